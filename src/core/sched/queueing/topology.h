#ifndef CARVE_CORE_SCHED_QUEUEING_TOPOLOGY_H_
#define CARVE_CORE_SCHED_QUEUEING_TOPOLOGY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/sched/placement/placer.h"

namespace carve {

// How close a job's replicas should be. kCompact prefers one node, then one NVLink domain
// (node label `nvlink-domain`), then one rack (label `rack`), then anywhere.
enum class Topology : uint8_t { kAny, kCompact };
absl::StatusOr<Topology> ParseTopology(absl::string_view text);

inline constexpr absl::string_view kNodeNameLabel = "carve.io/node";
inline constexpr absl::string_view kNvlinkLabel = "nvlink-domain";
inline constexpr absl::string_view kRackLabel = "rack";

// Places `job` preferring its topology; the cluster must carry kNodeNameLabel on every node
// (LabelNodeNames). Returns what Place returns; on failure the report is the unconstrained one.
PlaceResult PlaceWithTopology(Placer& placer, const Cluster& cluster, const JobRequest& job,
                              Topology topology);

// Sets kNodeNameLabel on every node, so one node can be selected like any other domain.
void LabelNodeNames(Cluster& cluster);

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_TOPOLOGY_H_
