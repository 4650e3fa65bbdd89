// What the partition suite's tests share: a GPU that makes MIG instances on demand, and probe
// jobs on an instance of one of its profiles.
#ifndef CARVE_RUNTIME_POC_POC_PARTITION_H_
#define CARVE_RUNTIME_POC_POC_PARTITION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_cluster.h"

namespace carve::poc {

struct MigGpu {
  std::string node;
  int index = 0;
  std::string model;
};

struct MigProfileOf {
  std::string model;    // "": any model with the profile
  std::string profile;  // "3g.40gb"
};

struct MigTarget {
  MigGpu gpu;
  std::string profile;  // the catalog's 3g profile of its model
};

// An idle GPU that makes MIG instances on demand; nullopt, and the record inconclusive, when the
// cluster has none.
absl::StatusOr<std::optional<MigTarget>> FindMigTarget(Cluster& c, Record& r);

// The operator's --fault-command, and the faults it injected that are not undone yet: each is
// undone when the injector goes, whatever the test's outcome (poc_partition_faults.cc).
class Injector {
 public:
  Injector(Cluster& c, Record& r) : c_(c), r_(r) {}
  ~Injector();
  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;

  // Runs `CMD ACTION ARGS...`; `undo` (an action with the same ARGS) runs at the end unless the
  // test ran it itself.
  absl::Status Inject(const std::string& action, const std::string& undo,
                      const std::vector<std::string>& args);
  absl::Status Undo(const std::string& action, const std::vector<std::string>& args);

 private:
  std::string Line(const std::string& action, const std::vector<std::string>& args) const;
  absl::Status Run(const std::string& line);

  Cluster& c_;
  Record& r_;
  std::vector<std::string> undo_;
};

// A job running `carve probe ARGS` on an instance of `profile`.
nlohmann::json MigProbeSpec(const Options& options, const std::string& name,
                            const MigProfileOf& profile, const std::vector<std::string>& args);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_PARTITION_H_
