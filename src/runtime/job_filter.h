// Which jobs a listing or a bulk cancel means: `carve ls --state queued --queue a`,
// `carve cancel --queue a --state queued`. One predicate over the typed record serves jobs in
// memory and finished jobs read back from the store.
#ifndef CARVE_RUNTIME_JOB_FILTER_H_
#define CARVE_RUNTIME_JOB_FILTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/records.h"
#include "runtime/states.h"

namespace carve {

struct JobFilter {
  std::set<JobState> states;  // empty: any state
  // Empty: any. `name` ending in `*` matches names that start with what comes before it.
  std::string user, tenant, project, queue, node, name;
  std::string kind;      // the job's kind (training, inference, ...), exactly
  std::string text;      // in its name, submitter or command, ignoring case
  int64_t since_us = 0;  // submitted at or after (0: any time)

  bool empty() const;
  // Whether a job in a final state can match (then a listing must read the store's history).
  bool WantsEnded() const;
  bool Matches(const JobRecord& job) const;

  // The query parameters FromParams reads, besides `state` and `since` (a listing's next-page
  // link carries them on).
  static const std::vector<std::string>& TextKeys();
  // From query parameters (`state=queued,running&queue=a&since=<µs>`); `param` answers nullopt for
  // one that is absent. A state or time that does not parse is an error naming it.
  static absl::StatusOr<JobFilter> FromParams(
      const std::function<std::optional<std::string>(const char*)>& param);
  // From a JSON object with the same keys (`states` a list or `state` a comma list).
  static absl::StatusOr<JobFilter> FromJson(const nlohmann::json& j);
};

}  // namespace carve

#endif  // CARVE_RUNTIME_JOB_FILTER_H_
