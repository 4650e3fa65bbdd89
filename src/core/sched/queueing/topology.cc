#include "core/sched/queueing/topology.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

constexpr int kDomainsTriedPerLevel = 4;

// Idle whole devices of allowed models on `node` (what an exclusive replica could take).
int64_t IdleDevices(const Node& node, const ReplicaRequest& replica) {
  int64_t idle = 0;
  for (const Device& d : node.devices) {
    idle += d.schedulable() && d.idle() && ModelAllowed(replica, d.model) &&
            d.mode != DeliveryMode::kPartition && DeviceTolerated(d, replica);
  }
  return idle;
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  if (text.empty() || text == "any") return Topology::kAny;
  if (text == "compact") return Topology::kCompact;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not a topology; use any or compact"));
}

void LabelNodeNames(Cluster& cluster) {
  for (size_t i = 0; i < cluster.size(); ++i) {
    Node& n = cluster.mutable_node(NodeId(static_cast<int64_t>(i)));
    n.labels[std::string(kNodeNameLabel)] = n.name;
  }
}

PlaceResult PlaceWithTopology(Placer& placer, const Cluster& cluster, const JobRequest& job,
                              Topology topology) {
  if (topology == Topology::kAny || job.replicas < 2) return placer.Place(job);
  bool exclusive = job.replica.gpu.mode == DeliveryMode::kExclusive && !job.replica.gpu.none();
  int64_t needed = exclusive ? int64_t{job.replica.gpu.count} * job.replicas : 0;
  for (absl::string_view label : {kNodeNameLabel, kNvlinkLabel, kRackLabel}) {
    std::map<std::string, int64_t> free;  // domain -> idle devices
    for (const Node& n : cluster.nodes()) {
      auto it = n.labels.find(std::string(label));
      if (it == n.labels.end() || n.state != NodeState::kReady) continue;
      free[it->second] += exclusive ? IdleDevices(n, job.replica) : 0;
    }
    std::vector<std::pair<int64_t, std::string>> domains;  // tightest fit first
    for (const auto& [domain, idle] : free) {
      if (idle >= needed) domains.push_back({idle, domain});
    }
    std::sort(domains.begin(), domains.end());
    if (domains.size() > kDomainsTriedPerLevel) domains.resize(kDomainsTriedPerLevel);
    for (const auto& [idle, domain] : domains) {
      JobRequest within = job;
      within.replica.node_selector[std::string(label)] = domain;
      PlaceResult r = placer.Place(within);
      if (r.placed) return r;
    }
  }
  return placer.Place(job);
}

}  // namespace carve
