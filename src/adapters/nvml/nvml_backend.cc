// NVML by dlopen: no build-time dependency on the driver. The library is opened and initialized
// once per backend; every call's status is checked, and a failing call on one GPU marks that GPU
// suspect or unhealthy instead of failing the whole discovery.
#include "adapters/nvml/nvml_backend.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "adapters/nvml/nvml_api.h"
#include "adapters/nvml/nvml_names.h"
#include "core/model/gpu_catalog.h"

namespace carve {
namespace {

constexpr unsigned long long kMib = 1024ULL * 1024ULL;

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// A loaded and initialized NVML. NVML counts nvmlInit/nvmlShutdown pairs, so several may coexist.
class NvmlLibrary {
 public:
  // Optional functions are null when the driver predates them.
  struct Functions {
    nvml::InitFn init = nullptr;
    nvml::ShutdownFn shutdown = nullptr;
    nvml::ErrorStringFn error_string = nullptr;
    nvml::DeviceGetCountFn get_count = nullptr;
    nvml::DeviceGetHandleByIndexFn get_handle = nullptr;
    nvml::DeviceGetStringFn get_uuid = nullptr;
    nvml::DeviceGetStringFn get_name = nullptr;
    nvml::DeviceGetMemoryInfoFn get_memory = nullptr;
    // Optional: MIG (R450 and later) and health.
    nvml::DeviceGetMigModeFn get_mig_mode = nullptr;
    nvml::DeviceGetMaxMigDeviceCountFn get_max_mig = nullptr;
    nvml::DeviceGetMigDeviceHandleByIndexFn get_mig_handle = nullptr;
    nvml::DeviceGetAttributesFn get_attributes = nullptr;
    nvml::DeviceGetGpuInstanceIdFn get_gi_id = nullptr;
    nvml::DeviceGetGpuInstanceByIdFn get_gi_by_id = nullptr;
    nvml::GpuInstanceGetInfoFn get_gi_info = nullptr;
    nvml::DeviceGetRetiredPagesPendingStatusFn get_retired_pending = nullptr;
    nvml::DeviceGetRemappedRowsFn get_remapped_rows = nullptr;
  };

  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);

  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  ~NvmlLibrary() {
    if (initialized_) fn_.shutdown();
    dlclose(handle_);
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const Functions& fn() const { return fn_; }

  // "Driver Not Loaded (9)".
  std::string Error(nvml::Return r) const {
    const char* text = fn_.error_string != nullptr ? fn_.error_string(r) : nullptr;
    if (text == nullptr) return absl::StrCat("NVML error ", r);
    return absl::StrCat(text, " (", r, ")");
  }

 private:
  void* handle_;
  bool initialized_ = false;
  Functions fn_;
};

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(absl::StrCat("NVML unavailable: cannot load ", path, " (",
                                               why != nullptr ? why : "?",
                                               "); is the NVIDIA driver installed?"));
  }
  auto lib = std::make_unique<NvmlLibrary>(handle);
  Functions& f = lib->fn_;
  const char* missing = nullptr;
  auto load = [&](auto& slot, const char* name, bool required) {
    slot = Symbol<std::remove_reference_t<decltype(slot)>>(handle, name);
    if (slot == nullptr && required && missing == nullptr) missing = name;
  };
  load(f.init, "nvmlInit_v2", true);
  load(f.shutdown, "nvmlShutdown", true);
  load(f.error_string, "nvmlErrorString", true);
  load(f.get_count, "nvmlDeviceGetCount_v2", true);
  load(f.get_handle, "nvmlDeviceGetHandleByIndex_v2", true);
  load(f.get_uuid, "nvmlDeviceGetUUID", true);
  load(f.get_name, "nvmlDeviceGetName", true);
  load(f.get_memory, "nvmlDeviceGetMemoryInfo", true);
  load(f.get_mig_mode, "nvmlDeviceGetMigMode", false);
  load(f.get_max_mig, "nvmlDeviceGetMaxMigDeviceCount", false);
  load(f.get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex", false);
  load(f.get_attributes, "nvmlDeviceGetAttributes_v2", false);
  load(f.get_gi_id, "nvmlDeviceGetGpuInstanceId", false);
  load(f.get_gi_by_id, "nvmlDeviceGetGpuInstanceById", false);
  load(f.get_gi_info, "nvmlGpuInstanceGetInfo", false);
  load(f.get_retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus", false);
  load(f.get_remapped_rows, "nvmlDeviceGetRemappedRows", false);
  if (missing != nullptr) {
    return absl::UnavailableError(
        absl::StrCat("NVML unavailable: ", path, " has no ", missing, " (driver too old?)"));
  }

  nvml::Return r = f.init();
  if (r != nvml::kSuccess) {
    return absl::UnavailableError(
        absl::StrCat("NVML unavailable: nvmlInit_v2 failed: ", lib->Error(r)));
  }
  lib->initialized_ = true;
  return lib;
}

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
  explicit NvmlBackend(std::unique_ptr<NvmlLibrary> lib)
      : lib_(std::move(lib)), catalog_(GpuCatalog::BuiltIn()) {}

  std::string name() const override { return "nvml"; }

  absl::StatusOr<std::vector<DiscoveredGpu>> Discover() override {
    unsigned int count = 0;
    nvml::Return r = lib_->fn().get_count(&count);
    if (r != nvml::kSuccess) {
      return absl::UnavailableError(absl::StrCat("nvmlDeviceGetCount_v2 failed: ", lib_->Error(r)));
    }
    std::vector<DiscoveredGpu> gpus;
    gpus.reserve(count);
    for (unsigned int i = 0; i < count; ++i) gpus.push_back(Describe(i));
    return gpus;
  }

 private:
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
        DescribeMig(device, model, gpu);
      }
    }
    CheckMemoryHealth(device, gpu);
    return gpu;
  }

  // The MIG devices (compute instances) of a MIG-enabled GPU. The profile is named from the
  // instance's slice count and memory (nvmlDeviceGetAttributes_v2); the GPU instance's profile id
  // and placement come from nvmlDeviceGetGpuInstanceById, which needs a privileged user: without
  // it `start` stays -1 and "+me" profiles read as their plain twins.
  void DescribeMig(nvml::Device device, const GpuModel* model, DiscoveredGpu& gpu) const {
    const NvmlLibrary::Functions& f = lib_->fn();
    if (f.get_max_mig == nullptr || f.get_mig_handle == nullptr) {
      Degrade(gpu, "suspect", "MIG is enabled but this NVML cannot list MIG devices");
      return;
    }
    unsigned int max = 0;
    if (!Check(gpu, f.get_max_mig(device, &max), "nvmlDeviceGetMaxMigDeviceCount")) return;
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
    }
    std::stable_sort(gpu.mig_instances.begin(), gpu.mig_instances.end(),
                     [](const DiscoveredMigInstance& a, const DiscoveredMigInstance& b) {
                       return a.start < b.start;
                     });
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
  // suspect. XID events are not watched here.
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

  std::unique_ptr<NvmlLibrary> lib_;
  GpuCatalog catalog_;
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
  return std::make_unique<NvmlBackend>(*std::move(lib));
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenNvmlBackend() {
  return OpenNvmlBackendFromLibrary(kNvmlLibrary);
}

}  // namespace carve
