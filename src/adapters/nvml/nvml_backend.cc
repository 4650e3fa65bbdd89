// NVML by dlopen: no build-time dependency on the driver. The library is opened and initialized
// once per backend; every call's status is checked, and a failing call on one GPU marks that GPU
// suspect or unhealthy instead of failing the whole discovery.
#include "adapters/nvml/nvml_backend.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "adapters/nvml/nvml_api.h"
#include "adapters/nvml/nvml_gpm.h"
#include "adapters/nvml/nvml_library.h"
#include "adapters/nvml/nvml_mig_layout.h"
#include "adapters/nvml/nvml_names.h"
#include "adapters/nvml/nvml_processes.h"
#include "adapters/nvml/nvml_xid_watch.h"
#include "core/model/gpu_catalog.h"

namespace carve {
namespace {

constexpr unsigned long long kMib = 1024ULL * 1024ULL;

int HealthRank(absl::string_view health) {
  if (health == "unhealthy") return 2;
  if (health == "suspect") return 1;
  return 0;
}

// Keeps the worse of the GPU's health and `health`; reasons accumulate.
void Degrade(DiscoveredGpu& gpu, absl::string_view health, absl::string_view reason) {
  if (HealthRank(health) > HealthRank(gpu.health)) gpu.health = std::string(health);
  gpu.health_reason = gpu.health_reason.empty() ? std::string(reason)
                                                : absl::StrCat(gpu.health_reason, "; ", reason);
}

class NvmlBackend : public DeviceBackend {
 public:
  // `count` GPUs; their handles are stable for the library's lifetime, so they are taken once
  // (a null handle is retried in Describe) and the XID watch registers them.
  NvmlBackend(std::unique_ptr<NvmlLibrary> lib, unsigned int count)
      : lib_(std::move(lib)), catalog_(GpuCatalog::BuiltIn()) {
    std::vector<nvml::Device> handles(count, nullptr);
    for (unsigned int i = 0; i < count; ++i) {
      if (lib_->fn().get_handle(i, &handles[i]) != nvml::kSuccess) handles[i] = nullptr;
    }
    xids_ = std::make_unique<NvmlXidWatch>(*lib_, handles);
    gpm_ = std::make_unique<NvmlGpm>(lib_.get());
  }
  ~NvmlBackend() override {  // frees the event set and samples while NVML is still up
    xids_.reset();
    gpm_.reset();
  }

  std::string name() const override { return "nvml"; }

  absl::StatusOr<std::vector<DeviceProcess>> Processes(int index) override {
    absl::StatusOr<nvml::Device> device = Handle(index);
    if (!device.ok()) return device.status();
    absl::StatusOr<bool> mig = MigEnabled(*device);
    if (!mig.ok()) return mig.status();
    absl::StatusOr<std::vector<DeviceProcess>> processes = ReadNvmlProcesses(*lib_, *device, *mig);
    if (!processes.ok()) {
      return absl::Status(processes.status().code(),
                          absl::StrCat("GPU ", index, ": ", processes.status().message()));
    }
    return processes;
  }

  // The whole GPU's used memory (nvmlDeviceGetMemoryInfo). In MIG mode it counts every
  // instance's reservation, which changes with the layout, so it is not offered there.
  absl::StatusOr<int64_t> UsedMemory(int index) override {
    absl::StatusOr<nvml::Device> device = Handle(index);
    if (!device.ok()) return device.status();
    absl::StatusOr<bool> mig = MigEnabled(*device);
    if (!mig.ok()) return mig.status();
    if (*mig) {
      return absl::UnimplementedError(absl::StrCat(
          "GPU ", index, " is in MIG mode: its used memory counts every instance's reservation"));
    }
    nvml::Memory memory{};
    if (nvml::Return r = lib_->fn().get_memory(*device, &memory); r != nvml::kSuccess) {
      return lib_->Failure(r, absl::StrCat("nvmlDeviceGetMemoryInfo (GPU ", index, ")"));
    }
    return static_cast<int64_t>(memory.used / kMib);
  }

  DriverVersions Versions() override {
    const NvmlLibrary::Functions& f = lib_->fn();
    DriverVersions v;
    char text[nvml::kStringBufferSize] = {};
    if (f.get_driver_version != nullptr &&
        f.get_driver_version(text, sizeof(text)) == nvml::kSuccess) {
      v.driver = text;
    }
    text[0] = '\0';
    if (f.get_nvml_version != nullptr && f.get_nvml_version(text, sizeof(text)) == nvml::kSuccess) {
      v.nvml = text;
    }
    int cuda = 0;
    if (f.get_cuda_driver_version != nullptr &&
        f.get_cuda_driver_version(&cuda) == nvml::kSuccess && cuda > 0) {
      v.cuda_driver = absl::StrCat(cuda / 1000, ".", (cuda % 1000) / 10);
    }
    return v;
  }

  absl::Status ApplyMigLayout(int index,
                              const std::vector<DiscoveredMigInstance>& layout) override {
    absl::StatusOr<nvml::Device> device = Handle(index);
    if (!device.ok()) return device.status();
    absl::StatusOr<GpuModelId> id = MigModel(index);
    if (!id.ok()) return id.status();
    const GpuModel& model = catalog_.model(*id);
    std::vector<MigSlot> slots;
    for (const DiscoveredMigInstance& m : layout) {
      absl::StatusOr<int> profile = catalog_.FindProfile(*id, m.profile);
      if (!profile.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("GPU ", index, ": ", profile.status().message()));
      }
      slots.push_back({*profile, m.start});
    }
    if (absl::Status s = CheckMigLayout(model, slots); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", index, ": ", s.message()));
    }
    auto check_idle = [&]() -> absl::Status {
      absl::StatusOr<std::vector<DeviceProcess>> processes = Processes(index);
      if (!processes.ok()) return processes.status();
      if (processes->empty()) return absl::OkStatus();
      std::vector<std::string> who;
      for (const DeviceProcess& p : *processes) {
        who.push_back(p.memory_mib >= 0 ? absl::StrCat("pid ", p.pid, " (", p.memory_mib, " MiB)")
                                        : absl::StrCat("pid ", p.pid));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", index, " is in use by ", absl::StrJoin(who, ", ")));
    };
    return ApplyNvmlMigLayout(*lib_, *device, index, model, layout, check_idle, Forget(index));
  }

  absl::StatusOr<std::string> CreateMigInstance(int index, const std::string& profile,
                                                int start) override {
    absl::StatusOr<nvml::Device> device = Handle(index);
    if (!device.ok()) return device.status();
    absl::StatusOr<GpuModelId> id = MigModel(index);
    if (!id.ok()) return id.status();
    return CreateNvmlMigInstance(*lib_, *device, index, catalog_.model(*id), profile, start);
  }

  absl::Status DestroyMigInstance(int index, int start) override {
    absl::StatusOr<nvml::Device> device = Handle(index);
    if (!device.ok()) return device.status();
    absl::StatusOr<GpuModelId> id = MigModel(index);
    if (!id.ok()) return id.status();
    return DestroyNvmlMigInstance(*lib_, *device, index, catalog_.model(*id), start, Forget(index));
  }

  absl::StatusOr<std::vector<DiscoveredGpu>> Discover() override {
    unsigned int count = 0;
    nvml::Return r = lib_->fn().get_count(&count);
    if (r != nvml::kSuccess) {
      return absl::UnavailableError(absl::StrCat("nvmlDeviceGetCount_v2 failed: ", lib_->Error(r)));
    }
    const NvmlXidWatch::Marks xids = xids_->Poll();
    std::vector<DiscoveredGpu> gpus;
    gpus.reserve(count);
    for (unsigned int i = 0; i < count; ++i) {
      gpus.push_back(Describe(i));
      if (auto it = xids.gpus.find(static_cast<int>(i)); it != xids.gpus.end()) {
        Degrade(gpus.back(), it->second.health, it->second.reason);
      }
    }
    for (const auto& [where, mark] : xids.instances) {
      if (where.first < 0 || where.first >= static_cast<int>(gpus.size())) continue;
      gpus[where.first].instance_health[where.second] = mark.health + " " + mark.reason;
    }
    return gpus;
  }

 private:
  // Tells the XID watch that an instance of GPU `index` is gone, with its fault.
  std::function<void(int)> Forget(int index) {
    return [this, index](int start) { xids_->ForgetInstance(index, start); };
  }

  absl::StatusOr<nvml::Device> Handle(int index) const {
    unsigned int count = 0;
    nvml::Return r = lib_->fn().get_count(&count);
    if (r != nvml::kSuccess) return lib_->Failure(r, "nvmlDeviceGetCount_v2");
    if (index < 0 || static_cast<unsigned int>(index) >= count) {
      return absl::NotFoundError(absl::StrCat("no GPU ", index, " (NVML reports ", count, ")"));
    }
    nvml::Device device = nullptr;
    r = lib_->fn().get_handle(static_cast<unsigned int>(index), &device);
    if (r != nvml::kSuccess) {
      return lib_->Failure(r, absl::StrCat("nvmlDeviceGetHandleByIndex_v2 (GPU ", index, ")"));
    }
    return device;
  }

  // The catalog model of GPU `index`, which must be a MIG model in MIG mode.
  absl::StatusOr<GpuModelId> MigModel(int index) const {
    DiscoveredGpu gpu = Describe(static_cast<unsigned int>(index));
    if (!gpu.mig_enabled) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", index, ": MIG mode is off (enable it with `nvidia-smi -i ", index,
                       " -mig 1` as root, then reset the GPU); nothing changed"));
    }
    absl::StatusOr<GpuModelId> id = catalog_.Find(gpu.model);
    if (!id.ok() || !catalog_.model(*id).mig_capable()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ", index, ": ", gpu.model, " is not a MIG model of the catalog; nothing changed"));
    }
    return id;
  }

  absl::StatusOr<bool> MigEnabled(nvml::Device device) const {
    if (lib_->fn().get_mig_mode == nullptr) return false;
    unsigned int current = 0;
    unsigned int pending = 0;
    nvml::Return r = lib_->fn().get_mig_mode(device, &current, &pending);
    if (r == nvml::kErrorNotSupported) return false;  // not a MIG-capable GPU
    if (r != nvml::kSuccess) return lib_->Failure(r, "nvmlDeviceGetMigMode");
    return current == nvml::kMigEnable;
  }

  // True on success. NOT_SUPPORTED only says the value is unavailable; a lost GPU is unhealthy;
  // any other failure makes the GPU suspect, naming the call.
  bool Check(DiscoveredGpu& gpu, nvml::Return r, absl::string_view call) const {
    if (r == nvml::kSuccess) return true;
    if (r == nvml::kErrorNotSupported) return false;
    Degrade(gpu, r == nvml::kErrorGpuIsLost ? "unhealthy" : "suspect",
            absl::StrCat(call, ": ", lib_->Error(r)));
    return false;
  }

  DiscoveredGpu Describe(unsigned int index) const {
    const NvmlLibrary::Functions& f = lib_->fn();
    DiscoveredGpu gpu;
    gpu.index = static_cast<int>(index);
    gpu.mode = "exclusive";
    nvml::Device device = nullptr;
    nvml::Return r = f.get_handle(index, &device);
    if (r != nvml::kSuccess) {
      // Without a handle nothing else can be read; the GPU is listed so that it is not missed.
      Degrade(gpu, "unhealthy", absl::StrCat("nvmlDeviceGetHandleByIndex_v2: ", lib_->Error(r)));
      return gpu;
    }
    char text[nvml::kStringBufferSize] = {};
    if (Check(gpu, f.get_uuid(device, text, sizeof(text)), "nvmlDeviceGetUUID")) gpu.uuid = text;
    nvml::Memory memory{};
    if (Check(gpu, f.get_memory(device, &memory), "nvmlDeviceGetMemoryInfo")) {
      gpu.memory_mib = static_cast<int64_t>(memory.total / kMib);
    }
    text[0] = '\0';
    // Evidence, not health: a failed read leaves it empty (unknown).
    if (f.get_vbios != nullptr && f.get_vbios(device, text, sizeof(text)) == nvml::kSuccess) {
      gpu.vbios = text;
    }
    unsigned int minor = 0;
    if (f.get_minor != nullptr && f.get_minor(device, &minor) == nvml::kSuccess) {
      gpu.minor = static_cast<int>(minor);
    }
    std::string product;
    text[0] = '\0';
    if (Check(gpu, f.get_name(device, text, sizeof(text)), "nvmlDeviceGetName")) product = text;
    NvmlModelName name = NormalizeNvmlGpuName(catalog_, product, gpu.memory_mib);
    gpu.model = name.model;
    const GpuModel* model = nullptr;
    if (name.known) model = &catalog_.model(*catalog_.Find(name.model));
    if (gpu.memory_mib == 0 && model != nullptr) gpu.memory_mib = model->memory.units();

    if (f.get_mig_mode != nullptr) {
      unsigned int current = 0;
      unsigned int pending = 0;
      if (Check(gpu, f.get_mig_mode(device, &current, &pending), "nvmlDeviceGetMigMode") &&
          current == nvml::kMigEnable) {
        gpu.mode = "partition";
        gpu.mig_enabled = true;
        std::vector<NvmlGpm::Instance> instances = DescribeMig(device, model, gpu);
        ReadMigActivity(device, index, model, instances, gpu);
      }
    }
    CheckMemoryHealth(device, gpu);
    ReadUtilization(device, gpu);
    return gpu;
  }

  // A MIG GPU's activity from GPM (nvml_gpm.h); unknown (-1) where it cannot be measured.
  void ReadMigActivity(nvml::Device device, unsigned int index, const GpuModel* model,
                       const std::vector<NvmlGpm::Instance>& instances, DiscoveredGpu& gpu) const {
    if (model == nullptr || model->mig_compute_slices <= 0) return;
    std::optional<double> busy = gpm_->MigBusy(device, index, model->mig_compute_slices, instances);
    if (busy) gpu.utilization_pct = static_cast<int>(std::lround(*busy));
  }

  // The MIG devices (compute instances) of a MIG-enabled GPU. The profile is named from the
  // instance's slice count and memory (nvmlDeviceGetAttributes_v2); the GPU instance's profile id
  // and placement come from nvmlDeviceGetGpuInstanceById, which needs a privileged user: without
  // it `start` stays -1 and "+me" profiles read as their plain twins. Returns the GPU instances
  // with their compute slices (for GPM; an instance whose id or slices NVML would not give has
  // slices 0).
  std::vector<NvmlGpm::Instance> DescribeMig(nvml::Device device, const GpuModel* model,
                                             DiscoveredGpu& gpu) const {
    const NvmlLibrary::Functions& f = lib_->fn();
    std::vector<NvmlGpm::Instance> instances;
    if (f.get_max_mig == nullptr || f.get_mig_handle == nullptr) {
      Degrade(gpu, "suspect", "MIG is enabled but this NVML cannot list MIG devices");
      return instances;
    }
    unsigned int max = 0;
    if (!Check(gpu, f.get_max_mig(device, &max), "nvmlDeviceGetMaxMigDeviceCount")) {
      return instances;
    }
    for (unsigned int i = 0; i < max; ++i) {
      nvml::Device mig = nullptr;
      nvml::Return r = f.get_mig_handle(device, i, &mig);
      if (r == nvml::kErrorNotFound) continue;  // no MIG device at this index
      if (!Check(gpu, r, "nvmlDeviceGetMigDeviceHandleByIndex")) continue;
      DiscoveredMigInstance instance;
      instance.start = -1;
      char text[nvml::kStringBufferSize] = {};
      if (Check(gpu, f.get_uuid(mig, text, sizeof(text)), "nvmlDeviceGetUUID (MIG)")) {
        instance.uuid = text;
      }
      int slices = -1;
      int64_t memory_mib = -1;
      if (f.get_attributes != nullptr) {
        nvml::DeviceAttributes attributes{};
        if (Check(gpu, f.get_attributes(mig, &attributes), "nvmlDeviceGetAttributes_v2")) {
          slices = static_cast<int>(attributes.gpuInstanceSliceCount);
          memory_mib = static_cast<int64_t>(attributes.memorySizeMB);
        }
      }
      int profile_id = -1;
      nvml::GpuInstanceInfo info{};
      if (ReadGpuInstance(device, mig, info)) {
        profile_id = static_cast<int>(info.profileId);
        instance.start = static_cast<int>(info.placement.start);
      }
      int profile = model != nullptr ? MatchMigProfile(*model, slices, memory_mib, profile_id) : -1;
      if (profile >= 0) {
        instance.profile = model->mig_profiles[profile].name;
      } else if (slices >= 0) {
        instance.profile = FallbackMigProfileName(slices, memory_mib);
      }
      gpu.mig_instances.push_back(std::move(instance));
      unsigned int gi = 0;
      if (f.get_gi_id != nullptr && f.get_gi_id(mig, &gi) == nvml::kSuccess) {
        instances.push_back({gi, std::max(slices, 0)});
      } else {
        instances.push_back({0, 0});  // its activity cannot be sampled: the GPU's stays unknown
      }
    }
    std::stable_sort(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                     [](const DiscoveredMigInstance& a, const DiscoveredMigInstance& b) {
                       return a.start < b.start;
                     });
    return instances;
  }

  // The GPU instance behind a MIG device; false when NVML will not tell (unprivileged user, old
  // driver). Not a health signal.
  bool ReadGpuInstance(nvml::Device device, nvml::Device mig, nvml::GpuInstanceInfo& info) const {
    const NvmlLibrary::Functions& f = lib_->fn();
    if (f.get_gi_id == nullptr || f.get_gi_by_id == nullptr || f.get_gi_info == nullptr) {
      return false;
    }
    unsigned int id = 0;
    nvml::GpuInstance instance = nullptr;
    return f.get_gi_id(mig, &id) == nvml::kSuccess &&
           f.get_gi_by_id(device, id, &instance) == nvml::kSuccess &&
           f.get_gi_info(instance, &info) == nvml::kSuccess;
  }

  // Memory health only, and only what the driver already decided: a failed row remap makes the
  // GPU unhealthy; a pending row remap or page retirement (both need a GPU reset) makes it
  // suspect. XID events come from NvmlXidWatch.
  void CheckMemoryHealth(nvml::Device device, DiscoveredGpu& gpu) const {
    const NvmlLibrary::Functions& f = lib_->fn();
    if (f.get_remapped_rows != nullptr) {
      unsigned int corrected = 0, uncorrected = 0, pending = 0, failure = 0;
      if (Check(gpu, f.get_remapped_rows(device, &corrected, &uncorrected, &pending, &failure),
                "nvmlDeviceGetRemappedRows")) {
        if (failure != 0) Degrade(gpu, "unhealthy", "row remapping failed");
        if (pending != 0) Degrade(gpu, "suspect", "row remapping pending a GPU reset");
      }
    }
    if (f.get_retired_pending != nullptr) {
      int pending = 0;
      if (Check(gpu, f.get_retired_pending(device, &pending),
                "nvmlDeviceGetRetiredPagesPendingStatus") &&
          pending == nvml::kFeatureEnabled) {
        Degrade(gpu, "suspect", "page retirement pending a GPU reset");
      }
    }
  }

  // Device activity (the "gpu" percent of nvmlDeviceGetUtilizationRates). Stays -1 (unknown)
  // when it cannot be read: MIG mode answers NOT_SUPPORTED, and a failed read is not a health
  // signal.
  void ReadUtilization(nvml::Device device, DiscoveredGpu& gpu) const {
    if (lib_->fn().get_utilization == nullptr || gpu.mig_enabled) return;  // MIG: GPM's, above
    nvml::Utilization utilization{};
    if (lib_->fn().get_utilization(device, &utilization) == nvml::kSuccess) {
      gpu.utilization_pct = static_cast<int>(std::min(utilization.gpu, 100u));
    }
  }

  std::unique_ptr<NvmlLibrary> lib_;
  GpuCatalog catalog_;
  std::unique_ptr<NvmlXidWatch> xids_;
  std::unique_ptr<NvmlGpm> gpm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenNvmlBackendFromLibrary(
    const std::string& library) {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> lib = NvmlLibrary::Open(library);
  if (!lib.ok()) return lib.status();
  unsigned int count = 0;
  nvml::Return r = (*lib)->fn().get_count(&count);
  if (r != nvml::kSuccess) {
    return absl::UnavailableError(
        absl::StrCat("NVML unavailable: nvmlDeviceGetCount_v2 failed: ", (*lib)->Error(r)));
  }
  if (count == 0) return absl::UnavailableError("NVML unavailable: the driver reports no GPUs");
  return std::make_unique<NvmlBackend>(*std::move(lib), count);
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenNvmlBackend() {
  return OpenNvmlBackendFromLibrary(kNvmlLibrary);
}

}  // namespace carve
