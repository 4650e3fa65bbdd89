#include "core/model/gpu_catalog.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {
namespace {

constexpr int64_t kGib = 1024;

// Profile names of a model whose MIG geometry is 7 compute and 8 memory slices (A100, H100,
// H200); the IDs, instance limits and placements are the same on all of them.
struct SevenSliceNames {
  std::string one, one_me, one_double, two, three, four, seven;
};

// Instance memory is the device memory in proportion to the memory slices taken.
std::vector<MigProfile> SevenSliceProfiles(const SevenSliceNames& n, MemMib total) {
  auto mem = [&](int slices) { return MemMib(total.units() * slices / 8); };
  return {
      {n.one, 19, 1, 1, mem(1), 7, 1, {0, 1, 2, 3, 4, 5, 6}, false},
      {n.one_me, 20, 1, 1, mem(1), 1, 1, {0, 1, 2, 3, 4, 5, 6}, true},
      {n.one_double, 15, 1, 2, mem(2), 4, 2, {0, 2, 4, 6}, false},
      {n.two, 14, 2, 2, mem(2), 3, 2, {0, 2, 4}, false},
      {n.three, 9, 3, 4, mem(4), 2, 4, {0, 4}, false},
      {n.four, 5, 4, 4, mem(4), 1, 4, {0}, false},
      {n.seven, 0, 7, 8, mem(8), 1, 8, {0}, false},
  };
}

GpuModel NonMig(std::string name, std::vector<std::string> aliases, int64_t memory_mib, int sms) {
  GpuModel m;
  m.name = std::move(name);
  m.aliases = std::move(aliases);
  m.memory = MemMib(memory_mib);
  m.sm_count = sms;
  return m;
}

GpuModel SevenSlice(std::string name, std::vector<std::string> aliases, int64_t memory_mib, int sms,
                    const SevenSliceNames& names) {
  GpuModel m = NonMig(std::move(name), std::move(aliases), memory_mib, sms);
  m.mig_compute_slices = 7;
  m.mig_memory_slices = 8;
  m.mig_profiles = SevenSliceProfiles(names, MemMib(memory_mib));
  return m;
}

GpuModel A30() {
  GpuModel m = NonMig("A30-24GB", {"A30"}, 24576, 56);
  m.mig_compute_slices = 4;
  m.mig_memory_slices = 4;
  m.mig_profiles = {
      {"1g.6gb", 14, 1, 1, MemMib(6 * kGib), 4, 1, {0, 1, 2, 3}, false},
      {"1g.6gb+me", 21, 1, 1, MemMib(6 * kGib), 1, 1, {0, 1, 2, 3}, true},
      {"2g.12gb", 5, 2, 2, MemMib(12 * kGib), 2, 2, {0, 2}, false},
      {"2g.12gb+me", 6, 2, 2, MemMib(12 * kGib), 1, 2, {0, 2}, true},
      {"4g.24gb", 0, 4, 4, MemMib(24 * kGib), 1, 4, {0}, false},
  };
  return m;
}

}  // namespace

GpuCatalog GpuCatalog::BuiltIn() {
  GpuCatalog c;
  c.Add(SevenSlice("A100-40GB", {"A100-SXM4-40GB", "A100-PCIE-40GB", "A100"}, 40960, 108,
                   {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}));
  c.Add(
      SevenSlice("A100-80GB", {"A100-SXM4-80GB", "A100-PCIE-80GB", "A100-80G"}, 81920, 108,
                 {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}));
  c.Add(
      SevenSlice("H100-80GB", {"H100-SXM5-80GB", "H100-80GB-HBM3", "H100"}, 81559, 132,
                 {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}));
  c.Add(SevenSlice(
      "H200-141GB", {"H200", "H200-SXM-141GB", "H200-141G"}, 143771, 132,
      {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}));
  c.Add(A30());
  c.Add(NonMig("V100M16", {"V100-16GB", "V100-SXM2-16GB"}, 16384, 80));
  c.Add(NonMig("V100M32", {"V100-32GB", "V100-SXM2-32GB", "V100"}, 32768, 80));
  c.Add(NonMig("P100", {"P100-16GB", "P100-PCIE-16GB"}, 16384, 56));
  c.Add(NonMig("T4", {"Tesla-T4"}, 15360, 40));
  c.Add(NonMig("A10", {"A10-24GB"}, 23028, 72));
  c.Add(NonMig("L4", {"L4-24GB"}, 23034, 58));
  c.Add(NonMig("L40S", {"L40S-48GB"}, 46068, 142));
  // The Alibaba trace's undisclosed internal models; memory and SMs are not published.
  c.Add(NonMig("G1", {}, 0, 0));
  c.Add(NonMig("G2", {}, 0, 0));
  c.Add(NonMig("G3", {}, 0, 0));
  return c;
}

GpuModelId GpuCatalog::Add(GpuModel model) {
  models_.push_back(std::move(model));
  return GpuModelId(static_cast<int64_t>(models_.size()) - 1);
}

absl::StatusOr<GpuModelId> GpuCatalog::Find(absl::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    const GpuModel& m = models_[i];
    bool match = absl::EqualsIgnoreCase(m.name, name);
    for (const std::string& alias : m.aliases) match |= absl::EqualsIgnoreCase(alias, name);
    if (match) return GpuModelId(static_cast<int64_t>(i));
  }
  std::vector<std::string> names;
  for (const GpuModel& m : models_) names.push_back(m.name);
  return absl::NotFoundError(
      absl::StrCat("unknown GPU model \"", name, "\"; known models: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<int> GpuCatalog::FindProfile(GpuModelId id, absl::string_view profile) const {
  const GpuModel& m = model(id);
  for (size_t i = 0; i < m.mig_profiles.size(); ++i) {
    if (m.mig_profiles[i].name == profile) return static_cast<int>(i);
  }
  if (!m.mig_capable()) {
    return absl::NotFoundError(absl::StrCat("GPU model ", m.name, " does not support MIG"));
  }
  std::vector<std::string> names;
  for (const MigProfile& p : m.mig_profiles) names.push_back(p.name);
  return absl::NotFoundError(absl::StrCat("GPU model ", m.name, " has no MIG profile \"", profile,
                                          "\"; its profiles: ", absl::StrJoin(names, ", ")));
}

absl::Status CheckMigLayout(const GpuModel& model, const std::vector<MigSlot>& layout) {
  if (!model.mig_capable()) {
    if (layout.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(model.name, " does not support MIG"));
  }
  std::vector<int> owner(model.mig_memory_slices, -1);
  std::vector<int> per_profile(model.mig_profiles.size(), 0);
  int compute = 0;
  int media = 0;
  for (size_t s = 0; s < layout.size(); ++s) {
    const MigSlot& slot = layout[s];
    if (slot.profile < 0 || slot.profile >= static_cast<int>(model.mig_profiles.size())) {
      return absl::InvalidArgumentError("unknown MIG profile index");
    }
    const MigProfile& p = model.mig_profiles[slot.profile];
    if (std::find(p.starts.begin(), p.starts.end(), slot.start) == p.starts.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.name, " cannot start at memory slice ", slot.start, " on ", model.name));
    }
    for (int i = slot.start; i < slot.start + p.size; ++i) {
      if (owner[i] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            p.name, "@", slot.start, " overlaps ",
            model.mig_profiles[layout[owner[i]].profile].name, "@", layout[owner[i]].start));
      }
      owner[i] = static_cast<int>(s);
    }
    compute += p.compute_slices;
    media += p.media_extensions;
    if (++per_profile[slot.profile] > p.max_instances) {
      return absl::InvalidArgumentError(
          absl::StrCat("at most ", p.max_instances, " instances of ", p.name));
    }
  }
  if (compute > model.mig_compute_slices) {
    return absl::InvalidArgumentError(absl::StrCat("layout needs ", compute, " compute slices; ",
                                                   model.name, " has ", model.mig_compute_slices));
  }
  if (media > 1) return absl::InvalidArgumentError("at most one media-extension instance");
  return absl::OkStatus();
}

std::vector<int> FreeMigStarts(const GpuModel& model, const std::vector<MigSlot>& layout,
                               int profile) {
  std::vector<int> out;
  std::vector<MigSlot> candidate = layout;
  candidate.push_back({profile, 0});
  for (int start : model.mig_profiles[profile].starts) {
    candidate.back().start = start;
    if (CheckMigLayout(model, candidate).ok()) out.push_back(start);
  }
  return out;
}

}  // namespace carve
