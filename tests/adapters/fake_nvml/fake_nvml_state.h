// The scenario the fake libnvidia-ml answers from, shared by its source files.
#ifndef CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_STATE_H_
#define CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_STATE_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "adapters/nvml/nvml_api.h"

namespace fake_nvml {

namespace nvml = carve::nvml;

// One GPU instance; with a compute instance (the fake makes only full-size ones) it is also a
// MIG device. GPU instance ids are the slot + 1.
struct FakeMig {
  bool present = false;
  std::string uuid;
  unsigned int slices = 0;  // compute slices
  unsigned long long memory_mib = 0;
  unsigned int profile_id = 0;
  unsigned int start = 0;
  unsigned int size = 0;  // memory slices from start
  bool compute = true;    // has its compute instance
  int sm_util = -1;       // GPM SM activity percent; -1: the metric fails
};

struct FakeProcess {
  unsigned int pid = 0;
  unsigned long long used_bytes = 0;
  int mig = -1;  // MIG slot, -1: the GPU itself
};

struct FakeEvent {
  size_t gpu = 0;
  unsigned long long xid = 0;
  unsigned int gpu_instance = nvml::kNoInstance;
};

struct FakeGpu {
  std::string name;
  std::string uuid;
  unsigned long long memory_mib = 0;
  unsigned long long reserved_mib = 0;  // used with no process (driver reservation, leaks)
  std::string vbios = "96.00.89.00.01";
  int minor = -1;  // -1: the GPU's index
  bool mig_enabled = false;
  bool lost = false;
  bool remap_pending = false;
  int utilization = -1;  // -1: NOT_SUPPORTED
  bool gpm = false;      // GPM supported (nvmlGpmQueryDeviceSupport)
  nvml::Return processes_result = nvml::kSuccess;
  nvml::Return register_result = nvml::kSuccess;
  bool registered = false;
  std::vector<FakeMig> migs;  // by MIG device index; absent ones answer NOT_FOUND
  std::vector<FakeProcess> processes;
  std::vector<FakeProcess> appear_after_sizing;  // join `processes` after a sizing call
  int mig_generation = 0;
};

struct FakeState {
  nvml::Return init_result = nvml::kSuccess;
  std::string driver_version = "580.65.06";
  std::string nvml_version = "13.580.65.06";
  int cuda_driver_version = 13000;
  bool privileged = true;
  int initialized = 0;  // nvmlInit_v2 calls minus nvmlShutdown calls
  std::vector<FakeGpu> gpus;
  std::deque<FakeEvent> events;
  int event_sets = 0;  // created minus freed
  // Fail the nth (1-based) GPU instance creation with this result; 0: never.
  int fail_create_at = 0;
  nvml::Return fail_create_result = nvml::kSuccess;
  int creates = 0;
};

FakeState& State();

// Held by every NVML export: the real library is thread-safe, and the agent calls it from its
// heartbeat loop and its reclaim threads at once.
class Lock {
 public:
  Lock() { Mu().lock(); }
  ~Lock() { Mu().unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  static std::recursive_mutex& Mu() {
    static std::recursive_mutex mu;
    return mu;
  }
};

// Handles encode (gpu, MIG slot + 1) so nothing needs allocating: 0x10000 + gpu * 0x100 + slot.
// GPU instance handles use the same encoding; compute instance handles add 0x80 to the slot.
nvml::Device Handle(size_t gpu, size_t slot);
// The GPU and MIG slot (0: the GPU itself) of a handle; false when it is not one of ours.
bool Decode(const void* handle, size_t& gpu, size_t& slot);

// A GPU instance profile of the fake's 8-memory-slice MIG models (A100-80GB, H100, H200).
struct FakeProfile {
  unsigned int index;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned int id;
  unsigned int slices;
  unsigned int size;
  unsigned int count;
  std::vector<unsigned int> starts;
};
const std::vector<FakeProfile>& Profiles();
const FakeProfile* ProfileById(unsigned int id);

// The scenario from FAKE_NVML_DIR (fake_nvml_dir.cc); each does nothing when it is not set.
void LoadDirScenario();           // the GPUs, at nvmlInit_v2 when none were added
void RefreshFromDir(size_t gpu);  // its processes and utilization
void XidsFromDir();               // queues new XIDs

}  // namespace fake_nvml

#endif  // CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_STATE_H_
