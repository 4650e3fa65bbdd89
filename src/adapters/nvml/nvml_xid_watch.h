#ifndef CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_
#define CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/nvml/nvml_library.h"

namespace carve {

// Critical XID events of a node's GPUs, through one NVML event set polled without waiting. What
// an XID means for the GPU (XidHealth) sticks for the watch's lifetime: a GPU that needed a reset
// stays marked until the agent restarts after it.
class NvmlXidWatch {
 public:
  struct Mark {
    std::string health;  // "unhealthy" | "suspect"
    std::string reason;  // "XID 79", "XID 94 (GPU instance 3)"; several joined with "; "
  };

  // Registers `devices` (by GPU index) for nvmlEventTypeXidCriticalError. A GPU that cannot be
  // registered (no event support, or MIG without privilege) is not watched; why is in
  // not_watched().
  NvmlXidWatch(const NvmlLibrary& lib, const std::vector<nvml::Device>& devices);
  ~NvmlXidWatch();
  NvmlXidWatch(const NvmlXidWatch&) = delete;
  NvmlXidWatch& operator=(const NvmlXidWatch&) = delete;

  // Drains pending events (nvmlEventSetWait_v2 with a 0 ms timeout) and returns every GPU marked
  // so far, by index. Thread-safe: the agent discovers from its loop and its reclaim threads.
  std::map<int, Mark> Poll();
  const std::map<int, std::string>& not_watched() const { return not_watched_; }

 private:
  void Record(int index, unsigned long long xid, unsigned int gpu_instance);

  const NvmlLibrary& lib_;
  std::vector<nvml::Device> devices_;
  nvml::EventSet set_ = nullptr;
  std::mutex mu_;
  std::map<int, Mark> marks_;  // guarded by mu_
  std::map<int, std::string> not_watched_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_NVML_NVML_XID_WATCH_H_
