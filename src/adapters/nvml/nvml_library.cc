#include "adapters/nvml/nvml_library.h"

#include <dlfcn.h>

#include <type_traits>

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) fn_.shutdown();
  dlclose(handle_);
}

std::string NvmlLibrary::Error(nvml::Return r) const {
  const char* text = fn_.error_string != nullptr ? fn_.error_string(r) : nullptr;
  if (text == nullptr) return absl::StrCat("NVML error ", r);
  return absl::StrCat(text, " (", r, ")");
}

absl::Status NvmlLibrary::Failure(nvml::Return r, absl::string_view call) const {
  std::string message = absl::StrCat(call, ": ", Error(r));
  switch (r) {
    case nvml::kErrorNoPermission:
      return absl::PermissionDeniedError(absl::StrCat(message, " (needs root)"));
    case nvml::kErrorInvalidArgument:
      return absl::InvalidArgumentError(message);
    case nvml::kErrorNotSupported:
      return absl::UnimplementedError(message);
    case nvml::kErrorInUse:
    case nvml::kErrorInsufficientResources:
      return absl::FailedPreconditionError(message);
    case nvml::kErrorNotFound:
      return absl::NotFoundError(message);
    case nvml::kErrorGpuIsLost:
    case nvml::kErrorDriverNotLoaded:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

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
  load(f.get_driver_version, "nvmlSystemGetDriverVersion", false);
  load(f.get_cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2", false);
  load(f.get_nvml_version, "nvmlSystemGetNVMLVersion", false);
  load(f.get_vbios, "nvmlDeviceGetVbiosVersion", false);
  load(f.get_minor, "nvmlDeviceGetMinorNumber", false);
  load(f.get_mig_mode, "nvmlDeviceGetMigMode", false);
  load(f.get_max_mig, "nvmlDeviceGetMaxMigDeviceCount", false);
  load(f.get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex", false);
  load(f.get_attributes, "nvmlDeviceGetAttributes_v2", false);
  load(f.get_gi_id, "nvmlDeviceGetGpuInstanceId", false);
  load(f.get_gi_by_id, "nvmlDeviceGetGpuInstanceById", false);
  load(f.get_gi_info, "nvmlGpuInstanceGetInfo", false);
  load(f.get_retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus", false);
  load(f.get_remapped_rows, "nvmlDeviceGetRemappedRows", false);
  load(f.get_utilization, "nvmlDeviceGetUtilizationRates", false);
  load(f.get_processes, "nvmlDeviceGetComputeRunningProcesses_v2", false);
  load(f.event_set_create, "nvmlEventSetCreate", false);
  load(f.register_events, "nvmlDeviceRegisterEvents", false);
  load(f.event_set_wait, "nvmlEventSetWait_v2", false);
  load(f.event_set_free, "nvmlEventSetFree", false);
  load(f.get_gi_profile, "nvmlDeviceGetGpuInstanceProfileInfo", false);
  load(f.get_gis, "nvmlDeviceGetGpuInstances", false);
  load(f.get_gi_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", false);
  load(f.create_gi, "nvmlDeviceCreateGpuInstanceWithPlacement", false);
  load(f.destroy_gi, "nvmlGpuInstanceDestroy", false);
  load(f.get_ci_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo", false);
  load(f.create_ci, "nvmlGpuInstanceCreateComputeInstance", false);
  load(f.get_cis, "nvmlGpuInstanceGetComputeInstances", false);
  load(f.destroy_ci, "nvmlComputeInstanceDestroy", false);
  load(f.gpm_support, "nvmlGpmQueryDeviceSupport", false);
  load(f.gpm_alloc, "nvmlGpmSampleAlloc", false);
  load(f.gpm_free, "nvmlGpmSampleFree", false);
  load(f.gpm_mig_sample, "nvmlGpmMigSampleGet", false);
  load(f.gpm_metrics, "nvmlGpmMetricsGet", false);
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

}  // namespace carve
