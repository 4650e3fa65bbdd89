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
#include "runtime/poc/poc_injector.h"

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

// A job running `carve probe ARGS` on an instance of `profile`.
nlohmann::json MigProbeSpec(const Options& options, const std::string& name,
                            const MigProfileOf& profile, const std::vector<std::string>& args);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_PARTITION_H_
