// Jobs written straight into a store, as the server stores them, for benchmarks that need a large
// history without submitting it through the API.
#ifndef CARVE_BENCH_STORE_FILL_H_
#define CARVE_BENCH_STORE_FILL_H_

#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "ports/store.h"
#include "runtime/job_spec.h"
#include "runtime/records.h"
#include "runtime/states.h"

namespace carve {

// Writes `count` jobs with ids from `first` in `state` (finished ones as kind job.done, as the
// server stores them), 50,000 to a transaction. `vary`, when given, changes each job first.
inline void Fill(Store& store, int first, int count, JobState state,
                 const std::function<void(JobRecord&)>& vary = {}) {
  JobRecord job;
  job.spec =
      *JobSpecFromJson({{"name", "old"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  job.state = state;
  const std::string kind = IsFinal(state) ? "job.done" : "job";
  StoreBatch batch;
  for (int i = first; i < first + count; ++i) {
    job.id = i;
    if (vary) vary(job);
    batch.puts.push_back({kind, absl::StrFormat("%012d", i), job.ToJson().dump()});
    if (batch.puts.size() == 50000 || i == first + count - 1) {
      if (!store.Commit(std::move(batch)).ok()) std::abort();
      batch = StoreBatch{};
    }
  }
}

}  // namespace carve

#endif  // CARVE_BENCH_STORE_FILL_H_
