#ifndef CARVE_ADAPTERS_NVML_NVML_MIG_LAYOUT_H_
#define CARVE_ADAPTERS_NVML_NVML_MIG_LAYOUT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "adapters/nvml/nvml_library.h"
#include "core/model/gpu_catalog.h"
#include "ports/devices.h"

namespace carve {

// Replaces the MIG instances of GPU `index` (handle `device`, catalog model `model`, MIG mode on)
// with `layout`: one GPU instance per entry at its start slice, each with one compute instance
// spanning it (what `nvidia-smi mig -cgi <id> -C` makes). `layout` must already be valid for
// `model` (CheckMigLayout). Before anything changes, the driver's profiles and placements are
// read and `check_idle` is asked; any error then changes nothing and says so. Then every compute
// instance and GPU instance is destroyed and the new ones are created in order; a failure
// part-way returns the failing call's status with what was done and the instances the GPU has
// now (read back from the driver). `destroyed` hears of each GPU instance destroyed, by its start.
// Needs root (NO_PERMISSION otherwise).
absl::Status ApplyNvmlMigLayout(const NvmlLibrary& lib, nvml::Device device, int index,
                                const GpuModel& model,
                                const std::vector<DiscoveredMigInstance>& layout,
                                const std::function<absl::Status()>& check_idle,
                                const std::function<void(int start)>& destroyed);

// Dynamic partitions: one GPU instance of catalog profile `profile` at `start`, with a compute
// instance spanning it, next to the GPU's other instances (the driver refuses an overlap); the
// UUID of its MIG device. When the compute instance cannot be made the GPU instance is destroyed
// again. Needs root.
absl::StatusOr<std::string> CreateNvmlMigInstance(const NvmlLibrary& lib, nvml::Device device,
                                                  int index, const GpuModel& model,
                                                  const std::string& profile, int start);
// Destroys the GPU instance at `start` with its compute instances; the driver refuses one in use
// (FailedPrecondition). NotFound when there is none.
absl::Status DestroyNvmlMigInstance(const NvmlLibrary& lib, nvml::Device device, int index,
                                    const GpuModel& model, int start,
                                    const std::function<void(int start)>& destroyed);

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_MIG_LAYOUT_H_
