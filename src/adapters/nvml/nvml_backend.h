#ifndef CARVE_ADAPTERS_NVML_NVML_BACKEND_H_
#define CARVE_ADAPTERS_NVML_NVML_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ports/devices.h"

namespace carve {

// The driver's NVML library; what OpenNvmlBackend() loads.
inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

// OpenNvmlBackend() with the library path given: tests load a fake NVML this way. Unavailable,
// saying why, when the library cannot be loaded, lacks a required function, fails to initialize
// or reports no GPU. The backend keeps the library loaded and NVML initialized until destroyed.
absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenNvmlBackendFromLibrary(
    const std::string& library);

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_BACKEND_H_
