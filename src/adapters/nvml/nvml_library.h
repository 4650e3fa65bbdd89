#ifndef CARVE_ADAPTERS_NVML_NVML_LIBRARY_H_
#define CARVE_ADAPTERS_NVML_NVML_LIBRARY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "adapters/nvml/nvml_api.h"

namespace carve {

// A loaded and initialized NVML. NVML counts nvmlInit/nvmlShutdown pairs, so several may coexist.
class NvmlLibrary {
 public:
  // Optional functions are null when the driver predates them; callers say what is missing.
  struct Functions {
    nvml::InitFn init = nullptr;
    nvml::ShutdownFn shutdown = nullptr;
    nvml::ErrorStringFn error_string = nullptr;
    nvml::DeviceGetCountFn get_count = nullptr;
    nvml::DeviceGetHandleByIndexFn get_handle = nullptr;
    nvml::DeviceGetStringFn get_uuid = nullptr;
    nvml::DeviceGetStringFn get_name = nullptr;
    nvml::DeviceGetMemoryInfoFn get_memory = nullptr;
    // Optional: MIG (R450 and later), health, activity, processes, events, MIG management.
    nvml::SystemGetStringFn get_driver_version = nullptr;
    nvml::SystemGetCudaDriverVersionFn get_cuda_driver_version = nullptr;
    nvml::SystemGetStringFn get_nvml_version = nullptr;
    nvml::DeviceGetStringFn get_vbios = nullptr;  // nvmlDeviceGetVbiosVersion
    nvml::DeviceGetMinorNumberFn get_minor = nullptr;
    nvml::DeviceGetMigModeFn get_mig_mode = nullptr;
    nvml::DeviceGetMaxMigDeviceCountFn get_max_mig = nullptr;
    nvml::DeviceGetMigDeviceHandleByIndexFn get_mig_handle = nullptr;
    nvml::DeviceGetAttributesFn get_attributes = nullptr;
    nvml::DeviceGetGpuInstanceIdFn get_gi_id = nullptr;
    nvml::DeviceGetGpuInstanceByIdFn get_gi_by_id = nullptr;
    nvml::GpuInstanceGetInfoFn get_gi_info = nullptr;
    nvml::DeviceGetRetiredPagesPendingStatusFn get_retired_pending = nullptr;
    nvml::DeviceGetRemappedRowsFn get_remapped_rows = nullptr;
    nvml::DeviceGetUtilizationRatesFn get_utilization = nullptr;
    nvml::DeviceGetProcessesFn get_processes = nullptr;
    nvml::EventSetCreateFn event_set_create = nullptr;
    nvml::DeviceRegisterEventsFn register_events = nullptr;
    nvml::EventSetWaitFn event_set_wait = nullptr;
    nvml::EventSetFreeFn event_set_free = nullptr;
    nvml::DeviceGetGpuInstanceProfileInfoFn get_gi_profile = nullptr;
    nvml::DeviceGetGpuInstancesFn get_gis = nullptr;
    nvml::DeviceGetGpuInstancePlacementsFn get_gi_placements = nullptr;
    nvml::DeviceCreateGpuInstanceWithPlacementFn create_gi = nullptr;
    nvml::GpuInstanceDestroyFn destroy_gi = nullptr;
    nvml::GpuInstanceGetComputeInstanceProfileInfoFn get_ci_profile = nullptr;
    nvml::GpuInstanceCreateComputeInstanceFn create_ci = nullptr;
    nvml::GpuInstanceGetComputeInstancesFn get_cis = nullptr;
    nvml::ComputeInstanceDestroyFn destroy_ci = nullptr;
    // Optional: GPM (R520 and later), a MIG GPU's activity.
    nvml::GpmQueryDeviceSupportFn gpm_support = nullptr;
    nvml::GpmSampleAllocFn gpm_alloc = nullptr;
    nvml::GpmSampleFreeFn gpm_free = nullptr;
    nvml::GpmMigSampleGetFn gpm_mig_sample = nullptr;
    nvml::GpmMetricsGetFn gpm_metrics = nullptr;
  };

  // Unavailable, saying why, when the library cannot be loaded, lacks a required function or
  // fails to initialize.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);

  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const Functions& fn() const { return fn_; }

  // "Driver Not Loaded (9)".
  std::string Error(nvml::Return r) const;
  // A status for a failed call: "<call>: <error>", with a code that says what kind of failure it
  // is (NO_PERMISSION: PermissionDenied, IN_USE: FailedPrecondition, ...).
  absl::Status Failure(nvml::Return r, absl::string_view call) const;

 private:
  void* handle_;
  bool initialized_ = false;
  Functions fn_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_LIBRARY_H_
