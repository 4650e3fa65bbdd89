// The fake's MIG management: GPU and compute instances created and destroyed at placements, with
// the checks the driver makes (privilege, valid placement, no overlap, instance limits, in use).
#include <string>
#include <type_traits>

#include "fake_nvml_state.h"

namespace {

using namespace fake_nvml;  // NOLINT: the exports below are the fake's own surface

// The fake's memory slices and compute slices per GPU.
constexpr unsigned int kMemorySlices = 8;
constexpr unsigned int kComputeSlices = 7;
// The index of NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE.
unsigned int ComputeProfileIndex(unsigned int slices) {
  switch (slices) {
    case 1:
      return 0;
    case 2:
      return 1;
    case 3:
      return 2;
    case 4:
      return 3;
    default:
      return 4;  // 7 slices
  }
}

nvml::ComputeInstance ComputeHandle(size_t gpu, size_t slot) {
  return reinterpret_cast<nvml::ComputeInstance>(Handle(gpu, 0x80 + slot));
}

// A GPU instance handle: the GPU and its MIG slot (1-based).
bool DecodeInstance(const void* handle, size_t& gpu, size_t& slot) {
  return Decode(handle, gpu, slot) && slot > 0;
}

bool DecodeCompute(const void* handle, size_t& gpu, size_t& slot) {
  uintptr_t v = reinterpret_cast<uintptr_t>(handle);
  if (v < 0x10000) return false;
  gpu = (v - 0x10000) / 0x100;
  slot = (v - 0x10000) % 0x100;
  if (gpu >= State().gpus.size() || slot <= 0x80) return false;
  slot -= 0x80;
  const std::vector<FakeMig>& migs = State().gpus[gpu].migs;
  return slot <= migs.size() && migs[slot - 1].present && migs[slot - 1].compute;
}

bool Busy(const FakeGpu& g, size_t slot) {
  for (const FakeProcess& p : g.processes) {
    if (p.mig == static_cast<int>(slot) - 1) return true;
  }
  return false;
}

// Why the driver would refuse a new GPU instance of `profile` at `placement`, or SUCCESS.
nvml::Return Refusal(const FakeGpu& g, const FakeProfile& profile,
                     const nvml::GpuInstancePlacement& placement) {
  bool valid = placement.size == profile.size;
  bool listed = false;
  for (unsigned int start : profile.starts) listed |= start == placement.start;
  if (!valid || !listed) return nvml::kErrorInvalidArgument;
  unsigned int same = 0, compute = profile.slices;
  for (const FakeMig& m : g.migs) {
    if (!m.present) continue;
    if (m.profile_id == profile.id) ++same;
    compute += m.slices;
    bool overlap = placement.start < m.start + m.size && m.start < placement.start + placement.size;
    if (overlap) return nvml::kErrorInsufficientResources;
  }
  if (same >= profile.count || compute > kComputeSlices) return nvml::kErrorInsufficientResources;
  return nvml::kSuccess;
}

}  // namespace

extern "C" {

// --- Scenario -----------------------------------------------------------------------------------

// The nth (1-based, counted from now) GPU instance creation fails with `result`.
void FakeNvmlFailGpuInstanceCreate(int nth, int result) {
  State().fail_create_at = State().creates + nth;
  State().fail_create_result = result;
}

// --- NVML ---------------------------------------------------------------------------------------

nvml::Return nvmlDeviceGetGpuInstanceProfileInfo(nvml::Device device, unsigned int index,
                                                 nvml::GpuInstanceProfileInfo* info) {
  Lock lock;
  size_t gpu, slot;
  if (info == nullptr || !Decode(device, gpu, slot) || slot != 0) {
    return nvml::kErrorInvalidArgument;
  }
  const FakeGpu& g = State().gpus[gpu];
  if (!g.mig_enabled) return nvml::kErrorNotSupported;
  for (const FakeProfile& p : Profiles()) {
    if (p.index != index) continue;
    *info = {};
    info->id = p.id;
    info->sliceCount = p.slices;
    info->instanceCount = p.count;
    info->memorySizeMB = g.memory_mib * p.size / kMemorySlices;
    return nvml::kSuccess;
  }
  return index < 0x11 ? nvml::kErrorNotSupported : nvml::kErrorInvalidArgument;
}

nvml::Return nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvml::Device device, unsigned int id,
                                                           nvml::GpuInstancePlacement* placements,
                                                           unsigned int* count) {
  Lock lock;
  size_t gpu, slot;
  const FakeProfile* p = ProfileById(id);
  if (count == nullptr || !Decode(device, gpu, slot) || slot != 0 || p == nullptr) {
    return nvml::kErrorInvalidArgument;
  }
  // As documented: privileged only, and whether or not MIG mode is on.
  if (!State().privileged) return nvml::kErrorNoPermission;
  *count = static_cast<unsigned int>(p->starts.size());
  if (placements == nullptr) return nvml::kSuccess;
  for (size_t i = 0; i < p->starts.size(); ++i) placements[i] = {p->starts[i], p->size};
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetGpuInstances(nvml::Device device, unsigned int id,
                                       nvml::GpuInstance* instances, unsigned int* count) {
  Lock lock;
  size_t gpu, slot;
  if (count == nullptr || !Decode(device, gpu, slot) || slot != 0 || ProfileById(id) == nullptr) {
    return nvml::kErrorInvalidArgument;
  }
  if (!State().privileged) return nvml::kErrorNoPermission;
  const FakeGpu& g = State().gpus[gpu];
  *count = 0;
  for (size_t i = 0; i < g.migs.size(); ++i) {
    if (g.migs[i].present && g.migs[i].profile_id == id) {
      instances[(*count)++] = reinterpret_cast<nvml::GpuInstance>(Handle(gpu, i + 1));
    }
  }
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceCreateGpuInstanceWithPlacement(nvml::Device device, unsigned int id,
                                                      const nvml::GpuInstancePlacement* placement,
                                                      nvml::GpuInstance* instance) {
  Lock lock;
  size_t gpu, slot;
  const FakeProfile* p = ProfileById(id);
  if (placement == nullptr || instance == nullptr || !Decode(device, gpu, slot) || slot != 0 ||
      p == nullptr) {
    return nvml::kErrorInvalidArgument;
  }
  if (!State().privileged) return nvml::kErrorNoPermission;
  FakeGpu& g = State().gpus[gpu];
  if (!g.mig_enabled) return nvml::kErrorNotSupported;
  if (nvml::Return r = Refusal(g, *p, *placement); r != nvml::kSuccess) return r;
  if (++State().creates == State().fail_create_at) return State().fail_create_result;
  size_t free = 0;
  while (free < g.migs.size() && g.migs[free].present) ++free;
  if (free == g.migs.size()) g.migs.emplace_back();
  ++g.mig_generation;
  g.migs[free] = {
      true,      "MIG-fake-" + std::to_string(gpu) + "-" + std::to_string(g.mig_generation),
      p->slices, g.memory_mib * p->size / kMemorySlices,
      p->id,     placement->start,
      p->size,   false};
  *instance = reinterpret_cast<nvml::GpuInstance>(Handle(gpu, free + 1));
  return nvml::kSuccess;
}

nvml::Return nvmlGpuInstanceDestroy(nvml::GpuInstance instance) {
  Lock lock;
  size_t gpu, slot;
  if (!DecodeInstance(instance, gpu, slot)) return nvml::kErrorInvalidArgument;
  if (!State().privileged) return nvml::kErrorNoPermission;
  FakeGpu& g = State().gpus[gpu];
  if (g.migs[slot - 1].compute || Busy(g, slot)) return nvml::kErrorInUse;
  g.migs[slot - 1].present = false;
  return nvml::kSuccess;
}

nvml::Return nvmlGpuInstanceGetComputeInstanceProfileInfo(nvml::GpuInstance instance,
                                                          unsigned int index,
                                                          unsigned int engine_profile,
                                                          nvml::ComputeInstanceProfileInfo* info) {
  Lock lock;
  size_t gpu, slot;
  if (info == nullptr || !DecodeInstance(instance, gpu, slot)) return nvml::kErrorInvalidArgument;
  const FakeMig& m = State().gpus[gpu].migs[slot - 1];
  // Only the compute instance that spans the GPU instance is modelled.
  if (engine_profile != nvml::kComputeInstanceEngineProfileShared ||
      index != ComputeProfileIndex(m.slices)) {
    return nvml::kErrorNotSupported;
  }
  *info = {};
  info->id = index;
  info->sliceCount = m.slices;
  info->instanceCount = 1;
  return nvml::kSuccess;
}

nvml::Return nvmlGpuInstanceCreateComputeInstance(nvml::GpuInstance instance, unsigned int id,
                                                  nvml::ComputeInstance* compute) {
  Lock lock;
  size_t gpu, slot;
  if (compute == nullptr || !DecodeInstance(instance, gpu, slot)) {
    return nvml::kErrorInvalidArgument;
  }
  if (!State().privileged) return nvml::kErrorNoPermission;
  FakeMig& m = State().gpus[gpu].migs[slot - 1];
  if (id != ComputeProfileIndex(m.slices)) return nvml::kErrorInvalidArgument;
  if (m.compute) return nvml::kErrorInsufficientResources;
  m.compute = true;
  *compute = ComputeHandle(gpu, slot);
  return nvml::kSuccess;
}

nvml::Return nvmlGpuInstanceGetComputeInstances(nvml::GpuInstance instance, unsigned int id,
                                                nvml::ComputeInstance* computes,
                                                unsigned int* count) {
  Lock lock;
  size_t gpu, slot;
  if (count == nullptr || !DecodeInstance(instance, gpu, slot)) {
    return nvml::kErrorInvalidArgument;
  }
  if (!State().privileged) return nvml::kErrorNoPermission;
  const FakeMig& m = State().gpus[gpu].migs[slot - 1];
  *count = 0;
  if (m.compute && id == ComputeProfileIndex(m.slices)) {
    computes[(*count)++] = ComputeHandle(gpu, slot);
  }
  return nvml::kSuccess;
}

nvml::Return nvmlComputeInstanceDestroy(nvml::ComputeInstance compute) {
  Lock lock;
  size_t gpu, slot;
  if (!DecodeCompute(compute, gpu, slot)) return nvml::kErrorInvalidArgument;
  if (!State().privileged) return nvml::kErrorNoPermission;
  FakeGpu& g = State().gpus[gpu];
  if (Busy(g, slot)) return nvml::kErrorInUse;
  g.migs[slot - 1].compute = false;
  return nvml::kSuccess;
}

}  // extern "C"

static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstanceProfileInfo),
                             nvml::DeviceGetGpuInstanceProfileInfoFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstancePossiblePlacements_v2),
                             nvml::DeviceGetGpuInstancePlacementsFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetGpuInstances), nvml::DeviceGetGpuInstancesFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceCreateGpuInstanceWithPlacement),
                             nvml::DeviceCreateGpuInstanceWithPlacementFn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceDestroy), nvml::GpuInstanceDestroyFn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo),
                             nvml::GpuInstanceGetComputeInstanceProfileInfoFn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceCreateComputeInstance),
                             nvml::GpuInstanceCreateComputeInstanceFn>);
static_assert(std::is_same_v<decltype(&nvmlGpuInstanceGetComputeInstances),
                             nvml::GpuInstanceGetComputeInstancesFn>);
static_assert(
    std::is_same_v<decltype(&nvmlComputeInstanceDestroy), nvml::ComputeInstanceDestroyFn>);
