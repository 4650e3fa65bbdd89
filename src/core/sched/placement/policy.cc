#include "core/sched/placement/policy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/sched/placement/policies.h"

namespace carve {

std::vector<std::string> PolicyNames() {
  return {"carve",      "fgd",         "best-fit", "packing",
          "clustering", "dot-product", "random",   "first-fit"};
}

absl::StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(absl::string_view name,
                                                            const PolicyOptions& options) {
  if (name == "first-fit") return MakeFirstFitPolicy();
  if (name == "best-fit") return MakeBestFitPolicy();
  if (name == "packing") return MakePackingPolicy();
  if (name == "clustering") return MakeClusteringPolicy();
  if (name == "dot-product") return MakeDotProductPolicy();
  if (name == "random") return MakeRandomPolicy();
  if (name == "fgd") return MakeFgdPolicy(options.workload);
  if (name == "carve") return MakeCarvePolicy(options.workload);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown placement policy \"", name, "\"; known: ", absl::StrJoin(PolicyNames(), ", ")));
}

}  // namespace carve
