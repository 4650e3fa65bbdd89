// A stand-in for libnvidia-ml.so.1, built as a shared library so the NVML backend's dlopen and
// dlsym path runs on machines without a GPU. It exports the NVML functions the backend calls,
// answering from a scenario that tests set through the FakeNvml* functions (found with dlsym on
// the same, already loaded, library). It checks the backend against carve's own declarations of
// NVML, not against NVIDIA's: a wrong declaration would pass here and fail on a real driver.
#include "fake_nvml_state.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace fake_nvml {

FakeState& State() {
  static FakeState state;
  return state;
}

nvml::Device Handle(size_t gpu, size_t slot) {
  return reinterpret_cast<nvml::Device>(static_cast<uintptr_t>(0x10000 + gpu * 0x100 + slot));
}

bool Decode(const void* handle, size_t& gpu, size_t& slot) {
  uintptr_t v = reinterpret_cast<uintptr_t>(handle);
  if (v < 0x10000) return false;
  gpu = (v - 0x10000) / 0x100;
  slot = (v - 0x10000) % 0x100;
  if (gpu >= State().gpus.size() || slot >= 0x80) return false;
  return slot == 0 ||
         (slot <= State().gpus[gpu].migs.size() && State().gpus[gpu].migs[slot - 1].present);
}

const std::vector<FakeProfile>& Profiles() {
  static const std::vector<FakeProfile> profiles = {{0, 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
                                                    {7, 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6}},
                                                    {9, 15, 1, 2, 4, {0, 2, 4, 6}},
                                                    {1, 14, 2, 2, 3, {0, 2, 4}},
                                                    {2, 9, 3, 4, 2, {0, 4}},
                                                    {3, 5, 4, 4, 1, {0}},
                                                    {4, 0, 7, 8, 1, {0}}};
  return profiles;
}

const FakeProfile* ProfileById(unsigned int id) {
  for (const FakeProfile& p : Profiles()) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

}  // namespace fake_nvml

namespace {

using namespace fake_nvml;  // NOLINT: the exports below are the fake's own surface

nvml::Return CopyString(const std::string& s, char* out, unsigned int length) {
  if (out == nullptr || s.size() + 1 > length) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  std::memcpy(out, s.c_str(), s.size() + 1);
  return nvml::kSuccess;
}

}  // namespace

extern "C" {

// --- Scenario -----------------------------------------------------------------------------------

void FakeNvmlReset() { State() = FakeState(); }
void FakeNvmlSetInitResult(int result) { State().init_result = result; }
void FakeNvmlSetPrivileged(int privileged) { State().privileged = privileged != 0; }
int FakeNvmlInitialized() { return State().initialized; }

int FakeNvmlAddGpu(const char* name, const char* uuid, unsigned long long memory_mib,
                   int mig_enabled) {
  FakeGpu gpu;
  gpu.name = name;
  gpu.uuid = uuid;
  gpu.memory_mib = memory_mib;
  gpu.mig_enabled = mig_enabled != 0;
  State().gpus.push_back(gpu);
  return static_cast<int>(State().gpus.size()) - 1;
}

void FakeNvmlAddMig(int gpu, unsigned int index, const char* uuid, unsigned int slices,
                    unsigned long long memory_mib, unsigned int profile_id, unsigned int start) {
  std::vector<FakeMig>& migs = State().gpus[gpu].migs;
  if (migs.size() <= index) migs.resize(index + 1);
  const FakeProfile* profile = ProfileById(profile_id);
  migs[index] = {true,
                 uuid,
                 slices,
                 memory_mib,
                 profile_id,
                 start,
                 profile != nullptr ? profile->size : slices,
                 true};
}

// Memory the GPU reports in use beyond its processes' (a driver reservation, or memory no
// process holds any more).
void FakeNvmlSetReservedMemory(int gpu, unsigned long long mib) {
  State().gpus[gpu].reserved_mib = mib;
}
void FakeNvmlSetVersions(const char* driver, const char* nvml_version, int cuda) {
  State().driver_version = driver;
  State().nvml_version = nvml_version;
  State().cuda_driver_version = cuda;
}
void FakeNvmlSetVbios(int gpu, const char* vbios) { State().gpus[gpu].vbios = vbios; }
void FakeNvmlSetMinor(int gpu, int minor) { State().gpus[gpu].minor = minor; }

void FakeNvmlSetLost(int gpu) { State().gpus[gpu].lost = true; }
void FakeNvmlSetRemapPending(int gpu) { State().gpus[gpu].remap_pending = true; }

// --- NVML ---------------------------------------------------------------------------------------

nvml::Return nvmlInit_v2() {
  Lock lock;
  LoadDirScenario();
  if (State().init_result == nvml::kSuccess) ++State().initialized;
  return State().init_result;
}

nvml::Return nvmlShutdown() {
  Lock lock;
  if (State().initialized == 0) return nvml::kErrorUninitialized;
  --State().initialized;
  return nvml::kSuccess;
}

const char* nvmlErrorString(nvml::Return result) {
  Lock lock;
  switch (result) {
    case nvml::kSuccess:
      return "Success";
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case nvml::kErrorNoPermission:
      return "Insufficient Permissions";
    case nvml::kErrorNotFound:
      return "Not Found";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    case nvml::kErrorInvalidArgument:
      return "Invalid Argument";
    case nvml::kErrorInsufficientSize:
      return "Insufficient Size";
    case nvml::kErrorTimeout:
      return "Timeout";
    case nvml::kErrorInUse:
      return "In use by another client";
    case nvml::kErrorInsufficientResources:
      return "Insufficient Resources";
    default:
      return "Unknown Error";
  }
}

nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  Lock lock;
  *count = static_cast<unsigned int>(State().gpus.size());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml::Device* device) {
  Lock lock;
  if (index >= State().gpus.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = Handle(index, 0);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetUUID(nvml::Device device, char* uuid, unsigned int length) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot)) return 2;
  const FakeGpu& g = State().gpus[gpu];
  if (g.lost) return nvml::kErrorGpuIsLost;
  return CopyString(slot == 0 ? g.uuid : g.migs[slot - 1].uuid, uuid, length);
}

nvml::Return nvmlDeviceGetName(nvml::Device device, char* name, unsigned int length) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot)) return 2;
  if (State().gpus[gpu].lost) return nvml::kErrorGpuIsLost;
  return CopyString(State().gpus[gpu].name, name, length);
}

nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device device, nvml::Memory* memory) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  if (State().gpus[gpu].lost) return nvml::kErrorGpuIsLost;
  RefreshFromDir(gpu);
  const FakeGpu& g = State().gpus[gpu];
  unsigned long long used = g.reserved_mib << 20;
  for (const FakeProcess& p : g.processes) {
    if (p.used_bytes != nvml::kValueNotAvailable) used += p.used_bytes;
  }
  memory->total = g.memory_mib * 1024 * 1024;
  memory->used = std::min(used, memory->total);
  memory->free = memory->total - memory->used;
  return nvml::kSuccess;
}

nvml::Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  Lock lock;
  return CopyString(State().driver_version, version, length);
}

nvml::Return nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  Lock lock;
  return CopyString(State().nvml_version, version, length);
}

nvml::Return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  Lock lock;
  if (version == nullptr) return nvml::kErrorInvalidArgument;
  *version = State().cuda_driver_version;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetVbiosVersion(nvml::Device device, char* version, unsigned int length) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  if (State().gpus[gpu].lost) return nvml::kErrorGpuIsLost;
  return CopyString(State().gpus[gpu].vbios, version, length);
}

nvml::Return nvmlDeviceGetMinorNumber(nvml::Device device, unsigned int* minor) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0 || minor == nullptr) return 2;
  if (State().gpus[gpu].lost) return nvml::kErrorGpuIsLost;
  int value = State().gpus[gpu].minor;
  *minor = static_cast<unsigned int>(value >= 0 ? value : static_cast<int>(gpu));
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetMigMode(nvml::Device device, unsigned int* current,
                                  unsigned int* pending) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  *current = *pending = State().gpus[gpu].mig_enabled ? nvml::kMigEnable : 0;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetMaxMigDeviceCount(nvml::Device device, unsigned int* count) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  *count = State().gpus[gpu].mig_enabled ? 7 : 0;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetMigDeviceHandleByIndex(nvml::Device device, unsigned int index,
                                                 nvml::Device* mig) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  const FakeGpu& g = State().gpus[gpu];
  if (index >= g.migs.size() || !g.migs[index].present || !g.migs[index].compute) {
    return nvml::kErrorNotFound;
  }
  *mig = Handle(gpu, index + 1);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetAttributes_v2(nvml::Device device, nvml::DeviceAttributes* out) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot == 0) return nvml::kErrorNotSupported;
  const FakeMig& m = State().gpus[gpu].migs[slot - 1];
  *out = {};
  out->gpuInstanceSliceCount = m.slices;
  out->computeInstanceSliceCount = m.slices;
  out->memorySizeMB = m.memory_mib;
  return nvml::kSuccess;
}

// The GPU instance id is the MIG slot; GPU instance handles reuse the MIG device encoding.
nvml::Return nvmlDeviceGetGpuInstanceId(nvml::Device device, unsigned int* id) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot == 0) return 2;
  *id = static_cast<unsigned int>(slot);
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetGpuInstanceById(nvml::Device device, unsigned int id,
                                          nvml::GpuInstance* instance) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  if (!State().privileged) return nvml::kErrorNoPermission;
  *instance = reinterpret_cast<nvml::GpuInstance>(Handle(gpu, id));
  return nvml::kSuccess;
}

nvml::Return nvmlGpuInstanceGetInfo(nvml::GpuInstance instance, nvml::GpuInstanceInfo* info) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(instance, gpu, slot) || slot == 0) return 2;
  const FakeMig& m = State().gpus[gpu].migs[slot - 1];
  info->device = Handle(gpu, 0);
  info->id = static_cast<unsigned int>(slot);
  info->profileId = m.profile_id;
  info->placement = {m.start, m.size};
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetRemappedRows(nvml::Device device, unsigned int* corrected,
                                       unsigned int* uncorrected, unsigned int* pending,
                                       unsigned int* failure) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return 2;
  *corrected = *uncorrected = *failure = 0;
  *pending = State().gpus[gpu].remap_pending ? 1 : 0;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetRetiredPagesPendingStatus(nvml::Device, int*) {
  Lock lock;
  return nvml::kErrorNotSupported;  // as on Hopper, which remaps rows instead
}

}  // extern "C"

// The exports have the types the backend casts dlsym's results to.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), nvml::InitFn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), nvml::ErrorStringFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), nvml::DeviceGetCountFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), nvml::DeviceGetHandleByIndexFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), nvml::DeviceGetStringFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), nvml::DeviceGetMemoryInfoFn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetDriverVersion), nvml::SystemGetStringFn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetNVMLVersion), nvml::SystemGetStringFn>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetCudaDriverVersion_v2),
                             nvml::SystemGetCudaDriverVersionFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetVbiosVersion), nvml::DeviceGetStringFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMinorNumber), nvml::DeviceGetMinorNumberFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), nvml::DeviceGetMigModeFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex),
                             nvml::DeviceGetMigDeviceHandleByIndexFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAttributes_v2), nvml::DeviceGetAttributesFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceById), nvml::DeviceGetGpuInstanceByIdFn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetInfo), nvml::GpuInstanceGetInfoFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetRemappedRows), nvml::DeviceGetRemappedRowsFn>);
