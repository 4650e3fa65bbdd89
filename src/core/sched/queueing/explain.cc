#include "core/sched/queueing/explain.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {
namespace {

std::string ModelNames(const Cluster& cluster, const ReplicaRequest& replica) {
  if (replica.allowed_models.empty()) return "GPUs";
  std::vector<std::string> names;
  for (GpuModelId m : replica.allowed_models) names.push_back(cluster.catalog().model(m).name);
  return absl::StrJoin(names, "/");
}

// Nodes that pass the filters no amount of freeing changes: state, pool, selector, taints.
bool Eligible(const Cluster& cluster, const Node& node, const ReplicaRequest& replica) {
  FitReason r = CheckNode(cluster, node, replica);
  return r != FitReason::kNodeNotReady && r != FitReason::kPool && r != FitReason::kNodeSelector &&
         r != FitReason::kTaint;
}

// The device is of a model and in a mode the replica may use (in service or not).
bool Suits(const Device& d, const ReplicaRequest& replica) {
  if (!ModelAllowed(replica, d.model)) return false;
  if (replica.gpu.mode == DeliveryMode::kExclusive) {
    return d.mode == DeliveryMode::kExclusive || d.mode == DeliveryMode::kShared;
  }
  return d.mode == replica.gpu.mode;
}

bool Serves(const Device& d, const ReplicaRequest& replica) {
  return d.schedulable() && Suits(d, replica) && DeviceTolerated(d, replica);
}

// A shared device the share would fit but for another group's shares on it (one MPS server
// serves one Unix user at a time), or caps it cannot enforce.
std::string ShareBlocker(const Cluster& cluster, const ReplicaRequest& replica) {
  if (replica.gpu.mode != DeliveryMode::kShared) return "";
  std::string caps;
  for (const Node& node : cluster.nodes()) {
    for (const Device& d : node.devices) {
      if (!Serves(d, replica) || d.free_compute < replica.gpu.compute ||
          d.free_memory < ShareMemory(cluster, d, replica)) {
        continue;
      }
      if (!ShareGroupAllows(d, replica)) {
        return absl::StrCat("GPU ", d.index, " of node ", node.name, " serves tenant ",
                            d.share_group,
                            "'s shares (one MPS server serves one Unix user at a time); "
                            "waits until they end");
      }
      if (!d.share_caps_enforced && !replica.best_effort && caps.empty()) {
        caps = absl::StrCat("GPU ", d.index, " of node ", node.name,
                            " cannot enforce share caps (no MPS daemon; see the node record); "
                            "isolation: best-effort accepts it");
      }
    }
  }
  return caps;
}

std::string BestNode(const std::string& name, int64_t have) {
  return name.empty() ? "no eligible node has any"
                      : absl::StrCat("best node ", name, " has ", have);
}

}  // namespace

absl::string_view ToString(Gate gate) {
  switch (gate) {
    case Gate::kQuota:
      return "quota";
    case Gate::kGang:
      return "gang";
    case Gate::kPlacement:
      return "placement";
    case Gate::kOrder:
      return "order";
    case Gate::kPreemption:
      return "preemption";
  }
  return "unknown";
}

namespace {

// The gates a job's own record keeps (WaitExplanation::OwnSummary): all but the quota gate, or
// all when the quota is the only one.
std::vector<const GateFacts*> OwnGates(const std::vector<GateFacts>& gates) {
  std::vector<const GateFacts*> own;
  for (const GateFacts& g : gates) {
    if (g.gate != Gate::kQuota) own.push_back(&g);
  }
  if (own.empty()) {
    for (const GateFacts& g : gates) own.push_back(&g);
  }
  return own;
}

std::vector<const GateFacts*> AllGates(const std::vector<GateFacts>& gates) {
  std::vector<const GateFacts*> all;
  for (const GateFacts& g : gates) all.push_back(&g);
  return all;
}

std::string SummaryOf(const std::vector<const GateFacts*>& gates) {
  std::vector<std::string> parts;
  for (const GateFacts* g : gates) parts.push_back(g->summary);
  return absl::StrJoin(parts, "; ");
}

std::string SignatureOf(bool reserved, const std::vector<const GateFacts*>& gates) {
  std::string out = reserved ? "reserved" : "";
  for (const GateFacts* g : gates) {
    absl::StrAppend(&out, "|", ToString(g->gate));
    switch (g->gate) {
      case Gate::kQuota:
        absl::StrAppend(&out, ":", g->queue, ":", g->quota.resource);
        break;
      case Gate::kGang:
        absl::StrAppend(&out, ":", g->needed);
        break;
      case Gate::kPlacement:
        for (const auto& [reason, count] : g->reasons) absl::StrAppend(&out, ":", reason);
        break;
      case Gate::kOrder:
        absl::StrAppend(&out, ":", g->reserved_job);
        break;
      case Gate::kPreemption:
        for (int64_t v : g->victims) absl::StrAppend(&out, ":", v);
        break;
    }
  }
  return out;
}

// The extra resource no eligible node has enough of, or the spread limit every eligible node
// has reached; empty when neither blocks on its own.
std::string ExtraOrSpreadBlocker(const Cluster& cluster, const ReplicaRequest& replica) {
  if (replica.resources.extra.empty() && replica.max_per_node <= 0) return "";
  std::vector<const Node*> eligible;
  for (const Node& node : cluster.nodes()) {
    if (Eligible(cluster, node, replica)) eligible.push_back(&node);
  }
  for (const ExtraResource& need : replica.resources.extra) {
    int64_t best = -1;
    std::string where;
    bool offered = false;
    for (const Node* node : eligible) {
      offered |= ExtraAmount(node->capacity.extra, need.name) > 0;
      int64_t free = ExtraAmount(node->free.extra, need.name);
      if (free > best) best = free, where = node->name;
    }
    if (best >= need.amount) continue;
    if (!offered) {
      return absl::StrCat("needs ", need.amount, " of extra resource ", need.name,
                          " on one node; no eligible node offers it");
    }
    return absl::StrCat("needs ", need.amount, " of extra resource ", need.name,
                        " on one node; best node ", where, " has ", best, " free");
  }
  const bool all_full = replica.max_per_node > 0 && !eligible.empty() &&
                        std::all_of(eligible.begin(), eligible.end(), [&](const Node* node) {
                          auto it = node->apps.find(replica.app);
                          return it != node->apps.end() && it->second >= replica.max_per_node;
                        });
  if (!all_full) return "";
  return absl::StrCat("at most ", replica.max_per_node, " replica(s) of ", replica.app,
                      " per node, and each of the ", eligible.size(),
                      " eligible nodes runs that many already");
}

}  // namespace

std::string WaitExplanation::Summary() const { return SummaryOf(AllGates(gates)); }

std::string WaitExplanation::Signature() const { return SignatureOf(reserved, AllGates(gates)); }

std::string WaitExplanation::OwnSummary() const { return SummaryOf(OwnGates(gates)); }

std::string WaitExplanation::OwnSignature() const { return SignatureOf(reserved, OwnGates(gates)); }

GateFacts PlacementGate(const Cluster& cluster, const FitReport& report) {
  GateFacts g;
  g.gate = Gate::kPlacement;
  g.nodes_considered = report.nodes_considered;
  for (int i = 1; i < kFitReasonCount; ++i) {
    if (report.reasons[i] > 0) {
      g.reasons[std::string(ToString(static_cast<FitReason>(i)))] = report.reasons[i];
    }
  }
  auto not_ready = g.reasons.find(std::string(ToString(FitReason::kNodeNotReady)));
  if (not_ready != g.reasons.end()) {
    int cordoned = 0;
    for (const Node& n : cluster.nodes()) cordoned += n.state == NodeState::kCordoned;
    cordoned = std::min(cordoned, not_ready->second);
    if (cordoned > 0) g.reasons["cordoned"] = cordoned;
    not_ready->second -= cordoned;
    if (not_ready->second == 0) g.reasons.erase(not_ready);
  }
  std::vector<std::string> parts;
  int failed = 0;
  for (const auto& [reason, count] : g.reasons) {
    failed += count;
    parts.push_back(absl::StrCat(count, " ", reason));
  }
  g.summary = absl::StrCat(report.nodes_considered - failed, "/", report.nodes_considered,
                           " nodes fit replica ", std::max(report.replica, 0),
                           parts.empty() ? "" : ": ", absl::StrJoin(parts, ", "));
  return g;
}

std::string NearestFit(const Cluster& cluster, const ReplicaRequest& replica) {
  std::string cpu_node, mem_node, gpu_node;
  int64_t best_cpu = -1, best_mem = -1, best_gpu = -1;
  int partition_devices = 0;
  for (const Node& node : cluster.nodes()) {
    if (!Eligible(cluster, node, replica)) continue;
    if (node.free.cpu.units() > best_cpu) best_cpu = node.free.cpu.units(), cpu_node = node.name;
    if (node.free.memory.units() > best_mem) {
      best_mem = node.free.memory.units(), mem_node = node.name;
    }
    int64_t gpu = 0;
    bool serves = false;  // only a node with a device the replica may use can be the best one
    for (const Device& d : node.devices) {
      serves = serves || Suits(d, replica);
      if (!Serves(d, replica)) continue;
      if (replica.gpu.mode == DeliveryMode::kExclusive) {
        gpu += d.idle() ? 1 : 0;
      } else if (replica.gpu.mode == DeliveryMode::kShared) {
        gpu = std::max(gpu, d.free_compute.units());
      } else {
        ++partition_devices;
      }
    }
    if (serves && gpu > best_gpu) best_gpu = gpu, gpu_node = node.name;
  }
  if (best_cpu < 0) return "no ready node matches its pool, node selector and tolerations";
  const Resources& need = replica.resources;
  if (best_cpu < need.cpu.units()) {
    return absl::StrCat("needs ", FormatMilli(need.cpu.units()), " CPU on one node; ",
                        BestNode(cpu_node, 0), " ", FormatMilli(best_cpu), " free");
  }
  if (best_mem < need.memory.units()) {
    return absl::StrCat("needs ", FormatMemMib(need.memory), " memory on one node; best node ",
                        mem_node, " has ", FormatMemMib(MemMib(best_mem)), " free");
  }
  if (std::string blocker = ExtraOrSpreadBlocker(cluster, replica); !blocker.empty()) {
    return blocker;
  }
  const GpuRequest& gpu = replica.gpu;
  if (gpu.none()) return "fits an empty node; waits for CPU or memory to be freed";
  if (std::string blocker = ShareBlocker(cluster, replica); !blocker.empty()) return blocker;
  std::string models = ModelNames(cluster, replica);
  if (best_gpu < 0) {
    return absl::StrCat("no eligible node has a ",
                        replica.allowed_models.empty() ? "GPU" : models + " GPU", " in ",
                        ToString(gpu.mode), " mode");
  }
  switch (gpu.mode) {
    case DeliveryMode::kExclusive:
      return absl::StrCat("needs ", gpu.count, " whole ", models, " on one node; best node ",
                          gpu_node, " has ", std::max<int64_t>(best_gpu, 0), " free");
    case DeliveryMode::kShared:
      return absl::StrCat("needs a ", FormatMilli(gpu.compute.units()), " share of one ", models,
                          " in shared mode; best device (on ", gpu_node, ") has ",
                          FormatMilli(std::max<int64_t>(best_gpu, 0)), " free");
    case DeliveryMode::kPartition:
      return absl::StrCat("needs ", gpu.count, " free ", gpu.profile, " instance(s) on one node; ",
                          partition_devices, " partition-mode ", models,
                          " devices on eligible nodes, none with room");
  }
  return "";
}

GateFacts QuotaGate(const std::string& queue, const QuotaVerdict& v) {
  GateFacts g;
  g.gate = Gate::kQuota;
  g.queue = queue;
  g.quota = v;
  g.summary =
      absl::StrCat("queue ", queue, ": ", v.resource, " ", FormatResourceAmount(v.resource, v.used),
                   "/", FormatResourceAmount(v.resource, v.nominal), " used, needs ",
                   FormatResourceAmount(v.resource, v.requested), ", ",
                   FormatResourceAmount(v.resource, v.borrowable), " borrowable",
                   v.reclaimable ? " (within nominal: lent quota is reclaimable)" : "");
  return g;
}

}  // namespace carve
