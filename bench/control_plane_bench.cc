// What the controller's periodic work costs as finished jobs pile up: a node's heartbeat and a
// scheduling cycle, with 0 .. N finished jobs in the store and one node running one job.
//   carve_control_bench [--benchmark_filter=...]
// Both should cost the same whatever the history (issue 12: every heartbeat walked every job
// ever submitted, and every cycle converted each one to a placement request).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/store/sqlite_store.h"
#include "runtime/control_plane.h"
#include "runtime/job_spec.h"

namespace carve {
namespace {

using json = nlohmann::json;

const Principal kAdmin{"bench", "admin"};
const Principal kNode{"n1", "node"};

// A control plane whose store holds `finished` succeeded jobs, one registered node with eight
// H200s, and one running job on it.
struct Fixture {
  std::filesystem::path dir;
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store;
  std::unique_ptr<ControlPlane> cp;
  int64_t now = 1'700'000'000'000'000;

  explicit Fixture(int finished) {
    char tmpl[] = "/tmp/carve-control-bench-XXXXXX";
    dir = mkdtemp(tmpl);
    store = *OpenSqliteStore((dir / "carve.db").string());
    JobRecord done;
    done.spec =
        *JobSpecFromJson({{"name", "old"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}});
    done.state = "succeeded";
    StoreBatch batch;
    for (int i = 1; i <= finished; ++i) {
      done.id = i;
      batch.puts.push_back({"job", absl::StrFormat("%012d", i), done.ToJson().dump()});
      if (batch.puts.size() == 10000 || i == finished) {
        if (!store->Commit(std::move(batch)).ok()) std::abort();
        batch = StoreBatch{};
      }
    }
    ControlPlane::Options options;
    options.log_dir = (dir / "logs").string();
    options.node_timeout_us = 3600 * 1'000'000LL;
    cp = *ControlPlane::Open(store.get(), &catalog, options, [this] { return now; });
    json gpus = json::array();
    for (int i = 0; i < 8; ++i) {
      gpus.push_back({{"index", i},
                      {"uuid", absl::StrCat("GPU-", i)},
                      {"model", "H200"},
                      {"memory_mib", 143771},
                      {"mode", "exclusive"}});
    }
    if (!cp->Register({{"name", "n1"},
                       {"cpu_milli", 64000},
                       {"memory_mib", 262144},
                       {"backend", "simulated"},
                       {"gpus", gpus}},
                      Principal{"n1", "admin"})
             .ok() ||
        !cp->Submit({{"name", "live"}, {"command", {"sleep", "1"}}, {"resources", {{"gpus", 1}}}},
                    "", kAdmin)
             .ok() ||
        !cp->ScheduleOnce().ok()) {
      std::abort();
    }
  }
  ~Fixture() {
    cp.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

void Heartbeat(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  json body = {{"node", "n1"}, {"replicas", json::array()}};
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->Heartbeat(body, kNode));
  state.counters["finished_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(Heartbeat)->Arg(0)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void SchedulingCycle(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->ScheduleOnce());
  state.counters["finished_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(SchedulingCycle)->Arg(0)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace carve

BENCHMARK_MAIN();
