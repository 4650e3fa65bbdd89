#ifndef CARVE_CORE_SCHED_QUEUEING_RESOURCES_H_
#define CARVE_CORE_SCHED_QUEUEING_RESOURCES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/cluster.h"
#include "core/sched/placement/fit.h"
#include "core/sched/request.h"

namespace carve {

// Named quota resources, each an int64 in its smallest unit:
//   gpus            whole GPUs of any model (exclusive delivery), milli-GPU (1000 = one GPU)
//   gpus/<MODEL>    whole GPUs of one catalog model, e.g. gpus/H200-141GB, milli-GPU
//   gpu-share       compute shares of shared GPUs, milli-GPU
//   mig/<PROFILE>   MIG instances of one profile, e.g. mig/3g.40gb, a count
//   cpu             millicores
//   memory          MiB
// Ordered so that every report and every comparison over resources is deterministic.
using ResourceList = std::map<std::string, int64_t>;

// into += sign * add.
void AddResources(ResourceList& into, const ResourceList& add, int64_t sign = 1);

// Checks a resource name against the catalog: model and profile names must exist. Model names
// are canonicalized ("gpus/h200" -> "gpus/H200-141GB").
absl::StatusOr<std::string> CanonicalResource(absl::string_view name, const GpuCatalog& catalog);
// "8" GPUs -> 8000, "500m" CPU -> 500, "64Gi" memory -> 65536, "2" MIG instances -> 2.
absl::StatusOr<int64_t> ParseResourceAmount(absl::string_view resource, absl::string_view text);
// The inverse, for reports: 8000 on gpus -> "8", 65536 on memory -> "64Gi".
std::string FormatResourceAmount(absl::string_view resource, int64_t amount);

// What a job asks of quota before it is placed: every resource that does not depend on where
// it lands (gpus/<MODEL> only when the job allows exactly one model).
ResourceList RequestCharge(const JobRequest& job, const GpuCatalog& catalog);
// What a placed job holds: RequestCharge plus the models of the devices it got.
ResourceList PlacementCharge(const Cluster& cluster, const JobRequest& job,
                             const std::vector<ReplicaPlacement>& replicas);
// The cluster's schedulable totals per resource, the denominators of dominant shares.
ResourceList ClusterCapacity(const Cluster& cluster);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_RESOURCES_H_
