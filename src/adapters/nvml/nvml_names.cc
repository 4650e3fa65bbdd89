#include "adapters/nvml/nvml_names.h"

#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace carve {
namespace {

const GpuModel* Lookup(const GpuCatalog& catalog, absl::string_view name) {
  if (name.empty()) return nullptr;
  absl::StatusOr<GpuModelId> id = catalog.Find(name);
  return id.ok() ? &catalog.model(*id) : nullptr;
}

bool MemoryAgrees(const GpuModel& model, int64_t memory_mib) {
  if (memory_mib <= 0 || model.memory.units() <= 0) return true;
  return std::llabs(model.memory.units() - memory_mib) * 10 <= model.memory.units();
}

}  // namespace

NvmlModelName NormalizeNvmlGpuName(const GpuCatalog& catalog, absl::string_view nvml_name,
                                   int64_t memory_mib) {
  absl::string_view name = absl::StripAsciiWhitespace(nvml_name);
  for (absl::string_view vendor : {"NVIDIA ", "Tesla "}) {
    if (absl::StartsWithIgnoreCase(name, vendor)) {
      name = absl::StripLeadingAsciiWhitespace(name.substr(vendor.size()));
    }
  }
  // "A100-SXM4-80GB" is a catalog alias as written; "H100 80GB HBM3" is one with hyphens.
  std::vector<std::string> words =
      absl::StrSplit(name, absl::ByAnyChar(" -"), absl::SkipWhitespace());
  for (const std::string& candidate : {std::string(name), absl::StrJoin(words, "-")}) {
    if (const GpuModel* m = Lookup(catalog, candidate)) return {m->name, true};
  }
  for (size_t n = words.size(); n-- > 1;) {
    std::vector<std::string> lead(words.begin(), words.begin() + static_cast<ptrdiff_t>(n));
    const GpuModel* m = Lookup(catalog, absl::StrJoin(lead, "-"));
    if (m != nullptr && MemoryAgrees(*m, memory_mib)) return {m->name, true};
  }
  return {std::string(nvml_name), false};
}

int MatchMigProfile(const GpuModel& model, int gpu_instance_slices, int64_t memory_mib,
                    int profile_id) {
  int best = -1;
  int64_t best_distance = std::numeric_limits<int64_t>::max();
  bool best_has_id = false;
  for (size_t i = 0; i < model.mig_profiles.size(); ++i) {
    const MigProfile& p = model.mig_profiles[i];
    const bool has_id = profile_id >= 0 && p.id == profile_id;
    if (gpu_instance_slices >= 0 && p.compute_slices != gpu_instance_slices) continue;
    if (gpu_instance_slices < 0 && memory_mib < 0 && !has_id) continue;
    int64_t distance = 0;
    if (memory_mib >= 0) {
      distance = std::llabs(p.memory.units() - memory_mib);
      if (distance * 4 > p.memory.units()) continue;
    }
    if (distance < best_distance || (distance == best_distance && has_id && !best_has_id)) {
      best = static_cast<int>(i);
      best_distance = distance;
      best_has_id = has_id;
    }
  }
  return best;
}

std::string FallbackMigProfileName(int gpu_instance_slices, int64_t memory_mib) {
  return absl::StrCat(gpu_instance_slices, "g.", (memory_mib + 512) / 1024, "gb");
}

std::string XidHealth(unsigned long long xid) {
  switch (xid) {
    case 48:
    case 62:
    case 64:
    case 74:
    case 79:
    case 95:
    case 119:
    case 120:
    case 140:
      return "unhealthy";
    case 63:
    case 92:
    case 94:
      return "suspect";
    default:
      return "";
  }
}

}  // namespace carve
