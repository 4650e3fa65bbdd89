// The fake's processes, utilization and XID events, with their scenario setters.
#include <algorithm>
#include <type_traits>

#include "fake_nvml_state.h"

namespace {

using namespace fake_nvml;  // NOLINT: the exports below are the fake's own surface

// The event set handle; the fake has one set at a time.
nvml::EventSet SetHandle() { return reinterpret_cast<nvml::EventSet>(uintptr_t{0x5e7}); }

}  // namespace

extern "C" {

// --- Scenario -----------------------------------------------------------------------------------

// A compute process on GPU `gpu` (mig < 0) or on its MIG device in slot `mig`. used_mib < 0:
// the driver does not say (NVML_VALUE_NOT_AVAILABLE).
void FakeNvmlAddProcess(int gpu, int mig, unsigned int pid, long long used_mib) {
  unsigned long long bytes =
      used_mib < 0 ? nvml::kValueNotAvailable : static_cast<unsigned long long>(used_mib) << 20;
  State().gpus[gpu].processes.push_back({pid, bytes, mig});
}
// A process that starts between the backend's sizing call and its reading call.
void FakeNvmlAddProcessAfterSizing(int gpu, unsigned int pid, long long used_mib) {
  State().gpus[gpu].appear_after_sizing.push_back(
      {pid, static_cast<unsigned long long>(used_mib) << 20, -1});
}
void FakeNvmlSetProcessesResult(int gpu, int result) {
  State().gpus[gpu].processes_result = result;
}
void FakeNvmlSetUtilization(int gpu, int pct) { State().gpus[gpu].utilization = pct; }
void FakeNvmlSetRegisterEventsResult(int gpu, int result) {
  State().gpus[gpu].register_result = result;
}
// A critical XID on GPU `gpu`, attributed to GPU instance `gpu_instance` (-1: none). Delivered
// only when the GPU is registered for XID events, as the driver does.
void FakeNvmlInjectXid(int gpu, unsigned long long xid, int gpu_instance) {
  State().events.push_back(
      {static_cast<size_t>(gpu), xid,
       gpu_instance < 0 ? nvml::kNoInstance : static_cast<unsigned int>(gpu_instance)});
}
int FakeNvmlEventSets() { return State().event_sets; }

// --- NVML ---------------------------------------------------------------------------------------

// NVML's protocol: *count in is the buffer's room; when it is too small, *count out is what is
// needed and the result is INSUFFICIENT_SIZE (infos may then be NULL).
nvml::Return nvmlDeviceGetComputeRunningProcesses_v2(nvml::Device device, unsigned int* count,
                                                     nvml::ProcessInfoV2* infos) {
  Lock lock;
  size_t gpu, slot;
  if (count == nullptr || !Decode(device, gpu, slot)) return nvml::kErrorInvalidArgument;
  RefreshFromDir(gpu);
  FakeGpu& g = State().gpus[gpu];
  if (g.lost) return nvml::kErrorGpuIsLost;
  if (g.processes_result != nvml::kSuccess) return g.processes_result;
  // The aggregate over MIG devices on the parent handle needs privilege.
  if (slot == 0 && g.mig_enabled && !State().privileged) return nvml::kErrorNoPermission;
  std::vector<nvml::ProcessInfoV2> out;
  for (const FakeProcess& p : g.processes) {
    bool here = slot == 0 ? (!g.mig_enabled || p.mig >= 0) : p.mig == static_cast<int>(slot) - 1;
    if (!here) continue;
    unsigned int gi = p.mig >= 0 ? static_cast<unsigned int>(p.mig) + 1 : nvml::kNoInstance;
    out.push_back({p.pid, p.used_bytes, gi, gi == nvml::kNoInstance ? gi : 0u});
  }
  if (out.size() > *count) {
    *count = static_cast<unsigned int>(out.size());
    for (const FakeProcess& p : g.appear_after_sizing) g.processes.push_back(p);
    g.appear_after_sizing.clear();
    return nvml::kErrorInsufficientSize;
  }
  if (!out.empty() && infos == nullptr) return nvml::kErrorInvalidArgument;
  std::copy(out.begin(), out.end(), infos);
  *count = static_cast<unsigned int>(out.size());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetUtilizationRates(nvml::Device device, nvml::Utilization* utilization) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0) return nvml::kErrorInvalidArgument;
  RefreshFromDir(gpu);
  const FakeGpu& g = State().gpus[gpu];
  if (g.lost) return nvml::kErrorGpuIsLost;
  if (g.mig_enabled || g.utilization < 0) return nvml::kErrorNotSupported;
  utilization->gpu = static_cast<unsigned int>(g.utilization);
  utilization->memory = 0;
  return nvml::kSuccess;
}

nvml::Return nvmlEventSetCreate(nvml::EventSet* set) {
  Lock lock;
  if (set == nullptr) return nvml::kErrorInvalidArgument;
  ++State().event_sets;
  *set = SetHandle();
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceRegisterEvents(nvml::Device device, unsigned long long types,
                                      nvml::EventSet set) {
  Lock lock;
  size_t gpu, slot;
  if (set != SetHandle() || !Decode(device, gpu, slot)) return nvml::kErrorInvalidArgument;
  if (slot != 0) return nvml::kErrorNotSupported;  // no per-instance registration
  FakeGpu& g = State().gpus[gpu];
  if (g.register_result != nvml::kSuccess) return g.register_result;
  if ((types & nvml::kEventTypeXidCriticalError) != 0) g.registered = true;
  return nvml::kSuccess;
}

nvml::Return nvmlEventSetWait_v2(nvml::EventSet set, nvml::EventData* data, unsigned int) {
  Lock lock;
  if (set != SetHandle() || data == nullptr) return nvml::kErrorInvalidArgument;
  XidsFromDir();
  std::deque<FakeEvent>& events = State().events;
  while (!events.empty()) {
    FakeEvent e = events.front();
    events.pop_front();
    if (e.gpu >= State().gpus.size() || !State().gpus[e.gpu].registered) continue;
    *data = {Handle(e.gpu, 0), nvml::kEventTypeXidCriticalError, e.xid, e.gpu_instance,
             e.gpu_instance == nvml::kNoInstance ? nvml::kNoInstance : 0u};
    return nvml::kSuccess;
  }
  return nvml::kErrorTimeout;
}

nvml::Return nvmlEventSetFree(nvml::EventSet set) {
  Lock lock;
  if (set != SetHandle()) return nvml::kErrorInvalidArgument;
  --State().event_sets;
  return nvml::kSuccess;
}

}  // extern "C"

static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v2), nvml::DeviceGetProcessesFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetUtilizationRates), nvml::DeviceGetUtilizationRatesFn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetCreate), nvml::EventSetCreateFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceRegisterEvents), nvml::DeviceRegisterEventsFn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetWait_v2), nvml::EventSetWaitFn>);
static_assert(std::is_same_v<decltype(&nvmlEventSetFree), nvml::EventSetFreeFn>);
