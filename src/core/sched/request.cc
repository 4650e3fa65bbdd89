#include "core/sched/request.h"

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status ValidateGpu(const GpuRequest& gpu, const ReplicaRequest& replica,
                         const GpuCatalog& catalog) {
  if (gpu.count < 0) return Invalid("gpus", "must not be negative");
  if (gpu.memory.units() < 0) return Invalid("gpu-memory", "must not be negative");
  switch (gpu.mode) {
    case DeliveryMode::kExclusive:
      if (gpu.compute.units() != 0 && gpu.compute != kWholeGpu) {
        return Invalid("gpu-compute", "exclusive GPUs are whole; use --mode shared for a share");
      }
      return absl::OkStatus();
    case DeliveryMode::kShared:
      if (gpu.count != 1)
        return Invalid("gpus", "a shared request takes a share of exactly one GPU");
      if (gpu.compute.units() <= 0 || gpu.compute >= kWholeGpu) {
        return Invalid("gpu-compute", "a share must be above 0 and below one whole GPU");
      }
      return absl::OkStatus();
    case DeliveryMode::kPartition: {
      if (gpu.count < 1) return Invalid("gpus", "a partition request needs at least one instance");
      if (gpu.profile.empty()) return Invalid("profile", "a partition request needs a MIG profile");
      bool known = false;
      for (size_t m = 0; m < catalog.size() && !known; ++m) {
        GpuModelId id(static_cast<int64_t>(m));
        bool allowed = replica.allowed_models.empty();
        for (GpuModelId a : replica.allowed_models) allowed |= (a == id);
        known = allowed && catalog.FindProfile(id, gpu.profile).ok();
      }
      if (!known) {
        return Invalid("profile",
                       absl::StrCat("no allowed GPU model has MIG profile \"", gpu.profile, "\""));
      }
      return absl::OkStatus();
    }
  }
  return Invalid("mode", "unknown delivery mode");
}

// Extra resources: named, each once in name order, each amount above 0; a spread limit needs
// the application it counts.
absl::Status ValidateExtraAndSpread(const ReplicaRequest& r) {
  const ExtraResources& extra = r.resources.extra;
  for (size_t i = 0; i < extra.size(); ++i) {
    if (extra[i].name.empty()) return Invalid("extra", "a resource needs a name");
    if (extra[i].amount <= 0) {
      return Invalid("extra", absl::StrCat(extra[i].name, ": must be above 0"));
    }
    if (i > 0 && extra[i - 1].name >= extra[i].name) {
      return Invalid("extra", absl::StrCat(extra[i].name, ": named twice or out of order"));
    }
  }
  if (r.max_per_node < 0) return Invalid("max-per-node", "must not be negative");
  if (r.max_per_node > 0 && r.app.empty()) {
    return Invalid("max-per-node", "a spread limit needs the application it counts (app)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRequest(const JobRequest& job, const GpuCatalog& catalog) {
  if (job.replicas < 1) return Invalid("replicas", "must be at least 1");
  const ReplicaRequest& r = job.replica;
  if (r.resources.cpu.units() < 0) return Invalid("cpu", "must not be negative");
  if (r.resources.memory.units() < 0) return Invalid("memory", "must not be negative");
  if (r.resources.storage.units() < 0) return Invalid("storage", "must not be negative");
  if (r.resources.network.units() < 0) return Invalid("network", "must not be negative");
  if (absl::Status s = ValidateExtraAndSpread(r); !s.ok()) return s;
  for (GpuModelId m : r.allowed_models) {
    if (!m.valid() || static_cast<size_t>(m.value()) >= catalog.size()) {
      return Invalid("gpu-model", "unknown GPU model id");
    }
  }
  return ValidateGpu(r.gpu, r, catalog);
}

}  // namespace carve
