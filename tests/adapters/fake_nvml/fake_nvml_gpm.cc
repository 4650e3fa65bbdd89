// The fake's GPU Performance Monitoring: a sample holds the SM activity its GPU instance was set
// to when it was taken; the SM activity between two samples is the later one's.
#include <type_traits>

#include "fake_nvml_state.h"

// What a sample holds (opaque to NVML's callers).
struct carve::nvml::GpmSampleSt {
  bool taken = false;
  size_t gpu = 0;
  unsigned int instance = 0;
  int sm_util = -1;
};

namespace {

using namespace fake_nvml;  // NOLINT: the exports below are the fake's own surface
using Sample = nvml::GpmSampleSt;

}  // namespace

extern "C" {

// --- Scenario -----------------------------------------------------------------------------------

void FakeNvmlSetGpm(int gpu, int supported) { State().gpus[gpu].gpm = supported != 0; }
// The SM activity of the GPU instance in MIG slot `index`; -1: its metric fails.
void FakeNvmlSetMigSmUtil(int gpu, unsigned int index, int percent) {
  State().gpus[gpu].migs[index].sm_util = percent;
}

// --- NVML ---------------------------------------------------------------------------------------

nvml::Return nvmlGpmQueryDeviceSupport(nvml::Device device, nvml::GpmSupport* support) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0 || support == nullptr ||
      support->version != nvml::kGpmSupportVersion) {
    return nvml::kErrorInvalidArgument;
  }
  support->isSupportedDevice = State().gpus[gpu].gpm ? 1 : 0;
  return nvml::kSuccess;
}

nvml::Return nvmlGpmSampleAlloc(nvml::GpmSample* sample) {
  if (sample == nullptr) return nvml::kErrorInvalidArgument;
  *sample = new nvml::GpmSampleSt();
  return nvml::kSuccess;
}

nvml::Return nvmlGpmSampleFree(nvml::GpmSample sample) {
  delete sample;
  return nvml::kSuccess;
}

// GPU instance ids are the MIG slot + 1.
nvml::Return nvmlGpmMigSampleGet(nvml::Device device, unsigned int instance,
                                 nvml::GpmSample sample) {
  Lock lock;
  size_t gpu, slot;
  if (!Decode(device, gpu, slot) || slot != 0 || sample == nullptr) {
    return nvml::kErrorInvalidArgument;
  }
  const FakeGpu& g = State().gpus[gpu];
  if (!g.gpm || !g.mig_enabled) return nvml::kErrorNotSupported;
  if (instance == 0 || instance > g.migs.size() || !g.migs[instance - 1].present) {
    return nvml::kErrorNotFound;
  }
  *sample = {true, gpu, instance, g.migs[instance - 1].sm_util};
  return nvml::kSuccess;
}

nvml::Return nvmlGpmMetricsGet(nvml::GpmMetricsGet* get) {
  Lock lock;
  if (get == nullptr || get->version != nvml::kGpmMetricsGetVersion || get->sample1 == nullptr ||
      get->sample2 == nullptr || get->numMetrics > nvml::kGpmMetricMax) {
    return nvml::kErrorInvalidArgument;
  }
  const Sample& before = *get->sample1;
  const Sample& after = *get->sample2;
  if (!before.taken || !after.taken || before.gpu != after.gpu ||
      before.instance != after.instance) {
    return nvml::kErrorInvalidArgument;
  }
  for (unsigned int i = 0; i < get->numMetrics; ++i) {
    nvml::GpmMetric& m = get->metrics[i];
    const bool known = m.metricId == nvml::kGpmMetricSmUtil && after.sm_util >= 0;
    m.nvmlReturn = known ? nvml::kSuccess : nvml::kErrorNotSupported;
    m.value = known ? after.sm_util : 0;
  }
  return nvml::kSuccess;
}

}  // extern "C"

static_assert(std::is_same_v<decltype(&nvmlGpmQueryDeviceSupport), nvml::GpmQueryDeviceSupportFn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleAlloc), nvml::GpmSampleAllocFn>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleFree), nvml::GpmSampleFreeFn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMigSampleGet), nvml::GpmMigSampleGetFn>);
static_assert(std::is_same_v<decltype(&nvmlGpmMetricsGet), nvml::GpmMetricsGetFn>);
