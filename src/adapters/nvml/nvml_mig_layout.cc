// MIG re-layout through NVML's GPU-instance and compute-instance calls. Everything that can be
// checked is checked before the first destroy; after it, each step is recorded so that a failure
// can say exactly what was done and what the GPU has now.
#include "adapters/nvml/nvml_mig_layout.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {
namespace {

struct GpuInstanceState {
  nvml::GpuInstance handle = nullptr;
  nvml::GpuInstanceInfo info{};
  std::vector<nvml::ComputeInstance> compute;
};

// A return that only says "no such profile index here".
bool NoSuchProfile(nvml::Return r) {
  return r == nvml::kErrorInvalidArgument || r == nvml::kErrorNotSupported ||
         r == nvml::kErrorNotFound;
}

class MigEditor {
 public:
  MigEditor(const NvmlLibrary& lib, nvml::Device device, int index, const GpuModel& model,
            std::function<void(int)> destroyed = nullptr)
      : lib_(lib),
        f_(lib.fn()),
        device_(device),
        index_(index),
        model_(model),
        destroyed_(std::move(destroyed)) {}

  absl::Status Apply(const std::vector<DiscoveredMigInstance>& layout,
                     const std::function<absl::Status()>& check_idle) {
    if (absl::Status s = CheckFunctions(); !s.ok()) return s;
    if (absl::Status s = LoadProfiles(); !s.ok()) return Unchanged(s);
    std::vector<std::pair<unsigned int, nvml::GpuInstancePlacement>> plan;
    for (const DiscoveredMigInstance& m : layout) {
      absl::StatusOr<std::pair<unsigned int, nvml::GpuInstancePlacement>> step = Plan(m);
      if (!step.ok()) return Unchanged(step.status());
      plan.push_back(*step);
    }
    if (absl::Status s = check_idle(); !s.ok()) return Unchanged(s);
    absl::StatusOr<std::vector<GpuInstanceState>> current = List();
    if (!current.ok()) return Unchanged(current.status());

    for (const GpuInstanceState& gi : *current) {
      if (absl::Status s = DestroyOne(gi); !s.ok()) return s;
      done_.push_back(absl::StrCat("destroyed ", Name(gi.info)));
    }
    for (const auto& [profile_id, placement] : plan) {
      std::string name = absl::StrCat(ProfileName(profile_id), "@", placement.start);
      nvml::GpuInstance gi = nullptr;
      if (nvml::Return r = f_.create_gi(device_, profile_id, &placement, &gi);
          r != nvml::kSuccess) {
        return PartWay(
            lib_.Failure(r, absl::StrCat("nvmlDeviceCreateGpuInstanceWithPlacement (", name, ")")));
      }
      done_.push_back(absl::StrCat("created GPU instance ", name));
      if (absl::Status s = CreateComputeInstance(gi, profiles_.at(profile_id).sliceCount, name);
          !s.ok()) {
        return PartWay(s);
      }
      done_.back() = absl::StrCat("created ", name);
    }
    return absl::OkStatus();
  }

  // One more instance next to the others; the UUID of its MIG device.
  absl::StatusOr<std::string> Create(const std::string& profile, int start) {
    if (absl::Status s = CheckFunctions(); !s.ok()) return s;
    if (absl::Status s = LoadProfiles(); !s.ok()) return Unchanged(s);
    absl::StatusOr<std::pair<unsigned int, nvml::GpuInstancePlacement>> step =
        Plan({"", profile, start});
    if (!step.ok()) return Unchanged(step.status());
    const auto& [profile_id, placement] = *step;
    std::string name = absl::StrCat(profile, "@", start);
    nvml::GpuInstance gi = nullptr;
    if (nvml::Return r = f_.create_gi(device_, profile_id, &placement, &gi); r != nvml::kSuccess) {
      return Unchanged(
          lib_.Failure(r, absl::StrCat("nvmlDeviceCreateGpuInstanceWithPlacement (", name, ")")));
    }
    absl::Status made = CreateComputeInstance(gi, profiles_.at(profile_id).sliceCount, name);
    if (!made.ok()) {
      // Without its compute instance the GPU instance is of no use: take it back.
      nvml::Return r = f_.destroy_gi(gi);
      return absl::Status(
          made.code(),
          absl::StrCat(made.message(), r == nvml::kSuccess
                                           ? "; the GPU instance was destroyed again"
                                           : "; the GPU instance " + name +
                                                 " is left without one: " + lib_.Error(r)));
    }
    nvml::GpuInstanceInfo info{};
    if (nvml::Return r = f_.get_gi_info(gi, &info); r != nvml::kSuccess) {
      return lib_.Failure(r, absl::StrCat("created ", name, ", but nvmlGpuInstanceGetInfo"));
    }
    absl::StatusOr<std::string> uuid = MigDeviceUuid(info.id);
    if (!uuid.ok()) {
      return absl::Status(uuid.status().code(),
                          absl::StrCat("created ", name, ", but ", uuid.status().message()));
    }
    return uuid;
  }

  // The instance at `start` and its compute instances.
  absl::Status Destroy(int start) {
    if (absl::Status s = CheckFunctions(); !s.ok()) return s;
    if (absl::Status s = LoadProfiles(); !s.ok()) return Unchanged(s);
    absl::StatusOr<std::vector<GpuInstanceState>> current = List();
    if (!current.ok()) return Unchanged(current.status());
    for (const GpuInstanceState& gi : *current) {
      if (gi.info.placement.start != static_cast<unsigned int>(start)) continue;
      return DestroyOne(gi);
    }
    return absl::NotFoundError(absl::StrCat("GPU ", index_, " has no instance at slice ", start));
  }

 private:
  // A GPU instance with its compute instances; a failure says what the GPU was left with.
  absl::Status DestroyOne(const GpuInstanceState& gi) {
    for (nvml::ComputeInstance ci : gi.compute) {
      if (nvml::Return r = f_.destroy_ci(ci); r != nvml::kSuccess) {
        return PartWay(
            lib_.Failure(r, absl::StrCat("nvmlComputeInstanceDestroy (", Name(gi.info), ")")));
      }
    }
    if (nvml::Return r = f_.destroy_gi(gi.handle); r != nvml::kSuccess) {
      return PartWay(lib_.Failure(r, absl::StrCat("nvmlGpuInstanceDestroy (", Name(gi.info), ")")));
    }
    Destroyed(gi.info);
    return absl::OkStatus();
  }

  // The UUID of the MIG device in GPU instance `id`.
  absl::StatusOr<std::string> MigDeviceUuid(unsigned int id) const {
    if (f_.get_max_mig == nullptr || f_.get_mig_handle == nullptr || f_.get_gi_id == nullptr) {
      return absl::UnimplementedError("this NVML cannot list MIG devices");
    }
    unsigned int max = 0;
    if (nvml::Return r = f_.get_max_mig(device_, &max); r != nvml::kSuccess) {
      return lib_.Failure(r, "nvmlDeviceGetMaxMigDeviceCount");
    }
    for (unsigned int i = 0; i < max; ++i) {
      nvml::Device mig = nullptr;
      unsigned int gi = 0;
      if (f_.get_mig_handle(device_, i, &mig) != nvml::kSuccess ||
          f_.get_gi_id(mig, &gi) != nvml::kSuccess || gi != id) {
        continue;
      }
      char uuid[nvml::kStringBufferSize] = {};
      if (nvml::Return r = f_.get_uuid(mig, uuid, sizeof(uuid)); r != nvml::kSuccess) {
        return lib_.Failure(r, "nvmlDeviceGetUUID (MIG)");
      }
      return std::string(uuid);
    }
    return absl::NotFoundError(absl::StrCat("no MIG device lists GPU instance ", id));
  }

  absl::Status CheckFunctions() const {
    const std::pair<bool, const char*> needed[] = {
        {f_.get_gi_profile != nullptr, "nvmlDeviceGetGpuInstanceProfileInfo"},
        {f_.get_gis != nullptr, "nvmlDeviceGetGpuInstances"},
        {f_.get_gi_info != nullptr, "nvmlGpuInstanceGetInfo"},
        {f_.create_gi != nullptr, "nvmlDeviceCreateGpuInstanceWithPlacement"},
        {f_.destroy_gi != nullptr, "nvmlGpuInstanceDestroy"},
        {f_.get_ci_profile != nullptr, "nvmlGpuInstanceGetComputeInstanceProfileInfo"},
        {f_.create_ci != nullptr, "nvmlGpuInstanceCreateComputeInstance"},
        {f_.get_cis != nullptr, "nvmlGpuInstanceGetComputeInstances"},
        {f_.destroy_ci != nullptr, "nvmlComputeInstanceDestroy"}};
    for (const auto& [present, name] : needed) {
      if (!present) {
        return absl::UnimplementedError(
            absl::StrCat("this NVML has no ", name, " (driver too old?); nothing changed"));
      }
    }
    return absl::OkStatus();
  }

  // The driver's GPU instance profiles by id.
  absl::Status LoadProfiles() {
    for (unsigned int i = 0; i < nvml::kGpuInstanceProfileIndexBound; ++i) {
      nvml::GpuInstanceProfileInfo info{};
      nvml::Return r = f_.get_gi_profile(device_, i, &info);
      if (NoSuchProfile(r)) continue;
      if (r != nvml::kSuccess) return lib_.Failure(r, "nvmlDeviceGetGpuInstanceProfileInfo");
      profiles_[info.id] = info;
    }
    if (profiles_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", index_, ": the driver offers no GPU instance profiles"));
    }
    return absl::OkStatus();
  }

  // The driver's profile id and placement for one requested instance.
  absl::StatusOr<std::pair<unsigned int, nvml::GpuInstancePlacement>> Plan(
      const DiscoveredMigInstance& m) const {
    const MigProfile* profile = nullptr;
    for (const MigProfile& p : model_.mig_profiles) {
      if (p.name == m.profile) profile = &p;
    }
    if (profile == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", index_, ": ", model_.name, " has no MIG profile ", m.profile));
    }
    unsigned int id = static_cast<unsigned int>(profile->id);
    if (profiles_.count(id) == 0) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", index_, ": the driver offers no ",
                                                        m.profile, " (GPU instance profile ", id,
                                                        ")"));
    }
    nvml::GpuInstancePlacement wanted{static_cast<unsigned int>(m.start),
                                      static_cast<unsigned int>(profile->size)};
    if (f_.get_gi_placements == nullptr) return std::make_pair(id, wanted);
    // First the number of placements (placements == NULL), then the placements.
    unsigned int count = 0;
    nvml::Return r = f_.get_gi_placements(device_, id, nullptr, &count);
    std::vector<nvml::GpuInstancePlacement> placements(count);
    if (r == nvml::kSuccess && count > 0) {
      r = f_.get_gi_placements(device_, id, placements.data(), &count);
    }
    if (r != nvml::kSuccess) {
      return lib_.Failure(
          r, absl::StrCat("nvmlDeviceGetGpuInstancePossiblePlacements_v2 (", m.profile, ")"));
    }
    std::vector<unsigned int> starts;
    for (unsigned int i = 0; i < count && i < placements.size(); ++i) {
      if (placements[i].start == wanted.start) return std::make_pair(id, placements[i]);
      starts.push_back(placements[i].start);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("GPU ", index_, ": ", m.profile, " cannot start at slice ", m.start,
                     " (the driver allows: ", absl::StrJoin(starts, ", "), ")"));
  }

  // Every GPU instance with its compute instances.
  absl::StatusOr<std::vector<GpuInstanceState>> List() const {
    std::vector<GpuInstanceState> out;
    for (const auto& [id, profile] : profiles_) {
      if (profile.instanceCount == 0) continue;
      std::vector<nvml::GpuInstance> handles(profile.instanceCount);
      unsigned int count = 0;
      nvml::Return r = f_.get_gis(device_, id, handles.data(), &count);
      if (r != nvml::kSuccess) return lib_.Failure(r, "nvmlDeviceGetGpuInstances");
      for (unsigned int i = 0; i < count && i < handles.size(); ++i) {
        GpuInstanceState gi;
        gi.handle = handles[i];
        if (r = f_.get_gi_info(gi.handle, &gi.info); r != nvml::kSuccess) {
          return lib_.Failure(r, "nvmlGpuInstanceGetInfo");
        }
        absl::StatusOr<std::vector<nvml::ComputeInstance>> compute = ComputeInstances(gi.handle);
        if (!compute.ok()) return compute.status();
        gi.compute = *std::move(compute);
        out.push_back(std::move(gi));
      }
    }
    return out;
  }

  absl::StatusOr<std::vector<nvml::ComputeInstance>> ComputeInstances(nvml::GpuInstance gi) const {
    std::vector<nvml::ComputeInstance> out;
    std::set<unsigned int> seen;
    for (unsigned int i = 0; i < nvml::kComputeInstanceProfileIndexBound; ++i) {
      nvml::ComputeInstanceProfileInfo info{};
      nvml::Return r = f_.get_ci_profile(gi, i, nvml::kComputeInstanceEngineProfileShared, &info);
      if (NoSuchProfile(r)) continue;
      if (r != nvml::kSuccess) {
        return lib_.Failure(r, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
      }
      if (!seen.insert(info.id).second || info.instanceCount == 0) continue;
      std::vector<nvml::ComputeInstance> handles(info.instanceCount);
      unsigned int count = 0;
      if (r = f_.get_cis(gi, info.id, handles.data(), &count); r != nvml::kSuccess) {
        return lib_.Failure(r, "nvmlGpuInstanceGetComputeInstances");
      }
      for (unsigned int k = 0; k < count && k < handles.size(); ++k) out.push_back(handles[k]);
    }
    return out;
  }

  // One compute instance spanning the GPU instance's `slices` compute slices.
  absl::Status CreateComputeInstance(nvml::GpuInstance gi, unsigned int slices,
                                     const std::string& name) const {
    for (unsigned int i = 0; i < nvml::kComputeInstanceProfileIndexBound; ++i) {
      nvml::ComputeInstanceProfileInfo info{};
      nvml::Return r = f_.get_ci_profile(gi, i, nvml::kComputeInstanceEngineProfileShared, &info);
      if (NoSuchProfile(r)) continue;
      if (r != nvml::kSuccess) {
        return lib_.Failure(
            r, absl::StrCat("nvmlGpuInstanceGetComputeInstanceProfileInfo (", name, ")"));
      }
      if (info.sliceCount != slices) continue;
      nvml::ComputeInstance ci = nullptr;
      if (r = f_.create_ci(gi, info.id, &ci); r != nvml::kSuccess) {
        return lib_.Failure(r, absl::StrCat("nvmlGpuInstanceCreateComputeInstance (", name, ")"));
      }
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(absl::StrCat("no compute instance profile with ", slices,
                                                      " slices for the GPU instance ", name));
  }

  void Destroyed(const nvml::GpuInstanceInfo& info) const {
    if (destroyed_) destroyed_(static_cast<int>(info.placement.start));
  }

  std::string ProfileName(unsigned int id) const {
    for (const MigProfile& p : model_.mig_profiles) {
      if (p.id == static_cast<int>(id)) return p.name;
    }
    return absl::StrCat("profile ", id);
  }
  std::string Name(const nvml::GpuInstanceInfo& info) const {
    return absl::StrCat(ProfileName(info.profileId), "@", info.placement.start);
  }

  absl::Status Unchanged(const absl::Status& cause) const {
    return absl::Status(cause.code(),
                        absl::StrCat(cause.message(), "; GPU ", index_, " is unchanged"));
  }

  // The failure, what was done before it, and what the GPU has now.
  absl::Status PartWay(const absl::Status& cause) const {
    if (done_.empty()) return Unchanged(cause);
    std::string now;
    absl::StatusOr<std::vector<GpuInstanceState>> left = List();
    if (!left.ok()) {
      now = absl::StrCat("its instances could not be read back (", left.status().message(), ")");
    } else if (left->empty()) {
      now = "it has no MIG instances";
    } else {
      std::vector<std::string> names;
      for (const GpuInstanceState& gi : *left) {
        names.push_back(gi.compute.empty() ? Name(gi.info) + " (no compute instance)"
                                           : Name(gi.info));
      }
      now = absl::StrCat("it has ", absl::StrJoin(names, ", "));
    }
    return absl::Status(
        cause.code(),
        absl::StrCat("MIG layout of GPU ", index_, " failed part-way: ", cause.message(),
                     "; done before: ", absl::StrJoin(done_, ", "), "; ", now));
  }

  const NvmlLibrary& lib_;
  const NvmlLibrary::Functions& f_;
  nvml::Device device_;
  int index_;
  const GpuModel& model_;
  std::function<void(int)> destroyed_;
  std::map<unsigned int, nvml::GpuInstanceProfileInfo> profiles_;
  std::vector<std::string> done_;
};

}  // namespace

absl::StatusOr<std::string> CreateNvmlMigInstance(const NvmlLibrary& lib, nvml::Device device,
                                                  int index, const GpuModel& model,
                                                  const std::string& profile, int start) {
  return MigEditor(lib, device, index, model).Create(profile, start);
}

absl::Status DestroyNvmlMigInstance(const NvmlLibrary& lib, nvml::Device device, int index,
                                    const GpuModel& model, int start,
                                    const std::function<void(int start)>& destroyed) {
  return MigEditor(lib, device, index, model, destroyed).Destroy(start);
}

absl::Status ApplyNvmlMigLayout(const NvmlLibrary& lib, nvml::Device device, int index,
                                const GpuModel& model,
                                const std::vector<DiscoveredMigInstance>& layout,
                                const std::function<absl::Status()>& check_idle,
                                const std::function<void(int start)>& destroyed) {
  return MigEditor(lib, device, index, model, destroyed).Apply(layout, check_idle);
}

}  // namespace carve
