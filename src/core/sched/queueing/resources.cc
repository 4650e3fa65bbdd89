#include "core/sched/queueing/resources.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/quantity.h"

namespace carve {
namespace {

constexpr absl::string_view kGpusPrefix = "gpus/";
constexpr absl::string_view kMigPrefix = "mig/";

void AddReplicaCpuMemory(ResourceList& charge, const ReplicaRequest& r, int replicas) {
  if (r.resources.cpu.units() > 0) charge["cpu"] += r.resources.cpu.units() * replicas;
  if (r.resources.memory.units() > 0) charge["memory"] += r.resources.memory.units() * replicas;
}

}  // namespace

void AddResources(ResourceList& into, const ResourceList& add, int64_t sign) {
  for (const auto& [name, amount] : add) {
    int64_t& v = into[name];
    v += sign * amount;
    if (v == 0) into.erase(name);
  }
}

absl::StatusOr<std::string> CanonicalResource(absl::string_view name, const GpuCatalog& catalog) {
  if (name == "gpus" || name == "gpu-share" || name == "cpu" || name == "memory") {
    return std::string(name);
  }
  if (absl::StartsWith(name, kGpusPrefix)) {
    auto model = catalog.Find(name.substr(kGpusPrefix.size()));
    if (!model.ok()) return model.status();
    return absl::StrCat(kGpusPrefix, catalog.model(*model).name);
  }
  if (absl::StartsWith(name, kMigPrefix)) {
    absl::string_view profile = name.substr(kMigPrefix.size());
    for (size_t m = 0; m < catalog.size(); ++m) {
      if (catalog.FindProfile(GpuModelId(static_cast<int64_t>(m)), profile).ok()) {
        return std::string(name);
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("no GPU model in the catalog has MIG profile \"", profile, "\""));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown resource \"", name,
                   "\"; use gpus, gpus/<MODEL>, gpu-share, mig/<PROFILE>, cpu or memory"));
}

absl::StatusOr<int64_t> ParseResourceAmount(absl::string_view resource, absl::string_view text) {
  if (resource == "cpu") {
    auto v = ParseCpuMilli(text);
    if (!v.ok()) return v.status();
    return v->units();
  }
  if (resource == "memory") {
    auto v = ParseMemMib(text);
    if (!v.ok()) return v.status();
    return v->units();
  }
  if (absl::StartsWith(resource, kMigPrefix)) {
    int64_t count = 0;
    if (!absl::SimpleAtoi(text, &count) || count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\" is not a whole number of MIG instances"));
    }
    return count;
  }
  auto v = ParseGpuMilli(text);
  if (!v.ok()) return v.status();
  if (v->units() < 0) return absl::InvalidArgumentError("must not be negative");
  return v->units();
}

std::string FormatResourceAmount(absl::string_view resource, int64_t amount) {
  if (resource == "memory") return FormatMemMib(MemMib(amount));
  if (absl::StartsWith(resource, kMigPrefix)) return absl::StrCat(amount);
  return FormatMilli(amount);
}

ResourceList RequestCharge(const JobRequest& job, const GpuCatalog& catalog) {
  ResourceList charge;
  const ReplicaRequest& r = job.replica;
  const GpuRequest& g = r.gpu;
  if (!g.none()) {
    switch (g.mode) {
      case DeliveryMode::kExclusive:
        charge["gpus"] = int64_t{g.count} * kWholeGpu.units() * job.replicas;
        if (r.allowed_models.size() == 1) {
          charge[absl::StrCat(kGpusPrefix, catalog.model(r.allowed_models[0]).name)] =
              charge["gpus"];
        }
        break;
      case DeliveryMode::kShared:
        charge["gpu-share"] = g.compute.units() * job.replicas;
        break;
      case DeliveryMode::kPartition:
        charge[absl::StrCat(kMigPrefix, g.profile)] = int64_t{g.count} * job.replicas;
        break;
    }
  }
  AddReplicaCpuMemory(charge, r, job.replicas);
  return charge;
}

ResourceList PlacementCharge(const Cluster& cluster, const JobRequest& job,
                             const std::vector<ReplicaPlacement>& replicas) {
  ResourceList charge = RequestCharge(job, cluster.catalog());
  if (job.replica.gpu.mode != DeliveryMode::kExclusive || job.replica.allowed_models.size() == 1) {
    return charge;
  }
  for (const ReplicaPlacement& p : replicas) {
    const Node& node = cluster.node(p.node);
    for (const DeviceGrant& grant : p.grants) {
      const GpuModel& model = cluster.catalog().model(node.devices[grant.device].model);
      charge[absl::StrCat(kGpusPrefix, model.name)] += kWholeGpu.units();
    }
  }
  return charge;
}

ResourceList ClusterCapacity(const Cluster& cluster) {
  ResourceList total;
  for (const Node& node : cluster.nodes()) {
    total["cpu"] += node.capacity.cpu.units();
    total["memory"] += node.capacity.memory.units();
    for (const Device& d : node.devices) {
      const GpuModel& model = cluster.catalog().model(d.model);
      total["gpus"] += kWholeGpu.units();
      total[absl::StrCat(kGpusPrefix, model.name)] += kWholeGpu.units();
      if (d.mode == DeliveryMode::kShared) total["gpu-share"] += kWholeGpu.units();
      if (d.mode == DeliveryMode::kPartition) {
        // The most instances of each profile the device could hold at once.
        for (const MigProfile& p : model.mig_profiles) {
          total[absl::StrCat(kMigPrefix, p.name)] += p.max_instances;
        }
      }
    }
  }
  return total;
}

}  // namespace carve
