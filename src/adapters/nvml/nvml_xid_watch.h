#ifndef CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_
#define CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "adapters/nvml/nvml_library.h"

namespace carve {

// Critical XID events of a node's GPUs, through one NVML event set polled without waiting. What
// an XID means (XidHealth) sticks for the watch's lifetime: a GPU that needed a reset stays marked
// until the agent restarts after it. An XID the driver attributes to a MIG GPU instance marks
// that instance (by its start slice) until it is destroyed (ForgetInstance).
class NvmlXidWatch {
 public:
  struct Mark {
    std::string health;  // "unhealthy" | "suspect"
    std::string reason;  // "XID 79", "XID 94 (GPU instance 3)"; several joined with "; "
  };
  struct Marks {
    std::map<int, Mark> gpus;                       // by GPU index
    std::map<std::pair<int, int>, Mark> instances;  // by GPU index and start slice
  };

  // Registers `devices` (by GPU index) for nvmlEventTypeXidCriticalError. A GPU that cannot be
  // registered (no event support, or MIG without privilege) is not watched; why is in
  // not_watched().
  NvmlXidWatch(const NvmlLibrary& lib, const std::vector<nvml::Device>& devices);
  ~NvmlXidWatch();
  NvmlXidWatch(const NvmlXidWatch&) = delete;
  NvmlXidWatch& operator=(const NvmlXidWatch&) = delete;

  // Drains pending events (nvmlEventSetWait_v2 with a 0 ms timeout) and returns every GPU marked
  // so far. An instance's XID whose instance cannot be placed (no privilege, already gone) marks
  // its GPU, naming the instance. Thread-safe: the agent discovers from its loop and its reclaim
  // threads.
  Marks Poll();
  // The instance at `start` of GPU `index` was destroyed: its fault goes with it.
  void ForgetInstance(int index, int start);
  const std::map<int, std::string>& not_watched() const { return not_watched_; }

 private:
  void Record(int index, unsigned long long xid, unsigned int gpu_instance);
  // The start slice of GPU instance `id` of GPU `index`, or -1.
  int StartOf(int index, unsigned int id) const;

  const NvmlLibrary& lib_;
  std::vector<nvml::Device> devices_;
  nvml::EventSet set_ = nullptr;
  std::mutex mu_;
  Marks marks_;  // guarded by mu_
  std::map<int, std::string> not_watched_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_
