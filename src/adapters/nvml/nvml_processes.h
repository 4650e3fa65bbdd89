#ifndef CARVE_ADAPTERS_NVML_NVML_PROCESSES_H_
#define CARVE_ADAPTERS_NVML_NVML_PROCESSES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "adapters/nvml/nvml_library.h"
#include "ports/devices.h"

namespace carve {

// The compute processes on `device` (nvmlDeviceGetComputeRunningProcesses_v2), or, when
// `mig_enabled`, on each of its MIG devices (which needs no privilege, unlike the aggregate on
// the parent handle). One entry per pid, its device memory summed over the MIG devices it uses;
// memory_mib is -1 when the driver does not say (NVML_VALUE_NOT_AVAILABLE). Owner stays empty.
absl::StatusOr<std::vector<DeviceProcess>> ReadNvmlProcesses(const NvmlLibrary& lib,
                                                             nvml::Device device, bool mig_enabled);

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_PROCESSES_H_
