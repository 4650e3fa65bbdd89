#ifndef CARVE_CORE_MODEL_GPU_CATALOG_H_
#define CARVE_CORE_MODEL_GPU_CATALOG_H_

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/ids.h"
#include "core/base/quantity.h"

namespace carve {

// A GPU instance profile of a MIG-capable model, as in NVIDIA's MIG user guide. Placements are
// in memory-slice units: an instance placed at `start` occupies slices [start, start + size).
struct MigProfile {
  std::string name;  // e.g. "3g.20gb", "1g.5gb+me"
  int id = 0;        // NVML GPU instance profile id
  int compute_slices = 0;
  int memory_slices = 0;
  MemMib memory;
  int max_instances = 0;
  int size = 0;             // placement size in memory slices
  std::vector<int> starts;  // valid start slices
  bool media_extensions = false;
};

struct GpuModel {
  std::string name;                  // canonical, e.g. "A100-40GB"
  std::vector<std::string> aliases;  // other spellings: "A100-SXM4-40GB", "A100"
  MemMib memory;
  int sm_count = 0;
  int mig_compute_slices = 0;  // 0 when the model has no MIG
  int mig_memory_slices = 0;
  std::vector<MigProfile> mig_profiles;

  bool mig_capable() const { return !mig_profiles.empty(); }
};

// One instance of a layout, for validity checks: profile index and start slice.
struct MigSlot {
  int profile = 0;
  int start = 0;
};

class GpuCatalog {
 public:
  // The built-in models: MIG-capable A100-40GB, A100-80GB, H100-80GB, H200-141GB, A30 and the
  // non-MIG V100M16, V100M32, P100, T4, A10, L4, L40S and the Alibaba trace's G1, G2, G3.
  static GpuCatalog BuiltIn();

  GpuModelId Add(GpuModel model);
  // Case-insensitive lookup by canonical name or alias.
  absl::StatusOr<GpuModelId> Find(absl::string_view name) const;
  const GpuModel& model(GpuModelId id) const { return models_[id.value()]; }
  size_t size() const { return models_.size(); }

  absl::StatusOr<int> FindProfile(GpuModelId model, absl::string_view profile) const;

 private:
  std::vector<GpuModel> models_;
};

// OK when every slot uses a valid start for its profile, no two slots share a memory slice, the
// compute slices fit, and no profile exceeds its instance limit (one media-extension instance).
absl::Status CheckMigLayout(const GpuModel& model, const std::vector<MigSlot>& layout);

// Free placements for `profile` next to `layout` (which must itself be valid).
std::vector<int> FreeMigStarts(const GpuModel& model, const std::vector<MigSlot>& layout,
                               int profile);

}  // namespace carve

#endif  // CARVE_CORE_MODEL_GPU_CATALOG_H_
