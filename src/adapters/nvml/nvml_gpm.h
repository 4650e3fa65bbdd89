// A MIG GPU's activity from NVML's GPU Performance Monitoring (Hopper and later): the SM activity
// of each GPU instance between two samples, weighted by its compute slices. In MIG mode the
// utilization rates answer NOT_SUPPORTED; without GPM (older GPUs, drivers before R520, a
// failed sample) the activity stays unknown.
#ifndef CARVE_ADAPTERS_NVML_NVML_GPM_H_
#define CARVE_ADAPTERS_NVML_NVML_GPM_H_

#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "adapters/nvml/nvml_api.h"
#include "adapters/nvml/nvml_library.h"

namespace carve {

class NvmlGpm {
 public:
  // A GPU instance of a MIG GPU: its id and its compute slices.
  struct Instance {
    unsigned int id = 0;
    int slices = 0;
  };

  explicit NvmlGpm(const NvmlLibrary* lib) : lib_(lib) {}
  ~NvmlGpm();
  NvmlGpm(const NvmlGpm&) = delete;
  NvmlGpm& operator=(const NvmlGpm&) = delete;

  // GPU `index`'s busy percent since the last call for it: the sum over `instances` of each one's
  // SM activity times its slices over `total_slices` (the model's; slices no instance holds count
  // idle). nullopt when it cannot be known: GPM unsupported, a sample or metric failed, or this is
  // the first sample of an instance. Thread-safe.
  std::optional<double> MigBusy(nvml::Device device, unsigned int index, int total_slices,
                                const std::vector<Instance>& instances);

 private:
  const NvmlLibrary* lib_;
  std::mutex mu_;
  std::map<std::pair<unsigned int, unsigned int>, nvml::GpmSample> last_;  // (GPU, instance)
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_GPM_H_
