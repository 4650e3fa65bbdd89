#ifndef CARVE_ADAPTERS_NVML_NVML_API_H_
#define CARVE_ADAPTERS_NVML_NVML_API_H_

// The slice of NVML's C API the device backend calls, declared here so that neither nvml.h nor
// the driver is needed to build. Names, layouts and values follow NVIDIA's nvml.h (API version
// 12); only what the backend calls is declared. None of it was checked against a real driver on
// the machine this was written on (no GPU there); docs/devices.md says what was verified how. The
// library is loaded with dlopen, so these are function pointer types, not prototypes of linked
// functions.

#include <cstdint>

namespace carve::nvml {

// nvmlReturn_t is a C enum; its values are ints.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorInUse = 19;
inline constexpr Return kErrorInsufficientResources = 23;

// nvmlDevice_t and nvmlGpuInstance_t are opaque pointers.
struct DeviceSt;
using Device = DeviceSt*;
struct GpuInstanceSt;
using GpuInstance = GpuInstanceSt*;
struct ComputeInstanceSt;
using ComputeInstance = ComputeInstanceSt*;
struct EventSetSt;
using EventSet = EventSetSt*;

// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE are both 96.
inline constexpr unsigned int kStringBufferSize = 96;
// nvmlDeviceGetMigMode's NVML_DEVICE_MIG_ENABLE.
inline constexpr unsigned int kMigEnable = 1;
// nvmlEnableState_t's NVML_FEATURE_ENABLED.
inline constexpr int kFeatureEnabled = 1;

// nvmlMemory_t (v1): bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// nvmlDeviceAttributes_t, filled by nvmlDeviceGetAttributes_v2 (for a MIG device: its instance).
struct DeviceAttributes {
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
  unsigned int gpuInstanceSliceCount;
  unsigned int computeInstanceSliceCount;
  unsigned long long memorySizeMB;  // MiB
};

// nvmlGpuInstancePlacement_t: memory slices [start, start + size).
struct GpuInstancePlacement {
  unsigned int start;
  unsigned int size;
};

// nvmlGpuInstanceInfo_t.
struct GpuInstanceInfo {
  Device device;
  unsigned int id;
  unsigned int profileId;  // as nvidia-smi mig -lgip prints it: 19 for 1g.*, 9 for 3g.*, ...
  GpuInstancePlacement placement;
};

// nvmlProcessInfo_v2_t, filled by nvmlDeviceGetComputeRunningProcesses_v2. The _v2 function is
// used on purpose: the R535 nvml.h changed nvmlProcessInfo_t (the _v3 layout) by adding
// usedGpuCcProtectedMemory without a new version, so the _v3 stride depends on the driver; the
// v2 struct has not changed since it was introduced.
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; kValueNotAvailable when the driver will not say
  unsigned int gpuInstanceId;        // 0xFFFFFFFF without MIG
  unsigned int computeInstanceId;
};
static_assert(sizeof(ProcessInfoV2) == 24, "nvmlProcessInfo_v2_t is 24 bytes on LP64");
// NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;
// NVML_GPU_INSTANCE_ID_ANY style "no MIG instance" value of gpuInstanceId in events and processes.
inline constexpr unsigned int kNoInstance = 0xFFFFFFFFu;

// nvmlUtilization_t: percent of the last sample period.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

// nvmlEventTypeXidCriticalError.
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x0000000000000008ULL;

// nvmlEventData_t (filled by nvmlEventSetWait_v2).
struct EventData {
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID for kEventTypeXidCriticalError
  unsigned int gpuInstanceId;    // kNoInstance unless the XID is attributable to a GPU instance
  unsigned int computeInstanceId;
};

// nvmlGpuInstanceProfileInfo_t, filled by nvmlDeviceGetGpuInstanceProfileInfo for a profile
// *index* (NVML_GPU_INSTANCE_PROFILE_1_SLICE = 0 ...); `id` is the profile id the create and list
// calls take (and nvidia-smi mig -lgip prints).
struct GpuInstanceProfileInfo {
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
};
// Profile indices are probed from 0 until this bound (NVML_GPU_INSTANCE_PROFILE_COUNT is 0xA in
// 12.0 and grows with new GPUs); unknown ones answer INVALID_ARGUMENT or NOT_SUPPORTED.
inline constexpr unsigned int kGpuInstanceProfileIndexBound = 0x20;

// nvmlComputeInstanceProfileInfo_t, for a compute instance profile index
// (NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0 ...).
struct ComputeInstanceProfileInfo {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
};
inline constexpr unsigned int kComputeInstanceProfileIndexBound = 0x10;
// NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED.
inline constexpr unsigned int kComputeInstanceEngineProfileShared = 0;

// GPU Performance Monitoring (Hopper and later, NVML R520 and later): opaque samples, and
// metrics over the time between two of them. A MIG GPU's activity comes from here: the
// utilization rates answer NOT_SUPPORTED in MIG mode.
struct GpmSampleSt;
using GpmSample = GpmSampleSt*;
// nvmlGpmSupport_t.
struct GpmSupport {
  unsigned int version;  // kGpmSupportVersion
  unsigned int isSupportedDevice;
};
inline constexpr unsigned int kGpmSupportVersion = 1;
// nvmlGpmMetric_t.
struct GpmMetric {
  unsigned int metricId;  // in
  Return nvmlReturn;      // out: the value is valid when kSuccess
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
// nvmlGpmMetricsGet_t, with room for every metric id NVML has defined: NVML_GPM_METRIC_MAX was 98
// in R520's header and is 333 in later ones, both under version 1 (the library fills
// `numMetrics` entries), so the larger bound fits either.
inline constexpr unsigned int kGpmMetricMax = 333;
struct GpmMetricsGet {
  unsigned int version;  // kGpmMetricsGetVersion
  unsigned int numMetrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricMax];
};
inline constexpr unsigned int kGpmMetricsGetVersion = 1;
// NVML_GPM_METRIC_SM_UTIL: percent of the SMs that were busy (0..100).
inline constexpr unsigned int kGpmMetricSmUtil = 2;

using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);   // GetUUID, GetName
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
// nvmlSystemGetDriverVersion, nvmlSystemGetNVMLVersion (NVML_SYSTEM_*_VERSION_BUFFER_SIZE: 80).
using SystemGetStringFn = Return (*)(char*, unsigned int);
using SystemGetCudaDriverVersionFn = Return (*)(int*);             // _v2: 12020 for CUDA 12.2
using DeviceGetMinorNumberFn = Return (*)(Device, unsigned int*);  // N of /dev/nvidiaN
using DeviceGetMigModeFn = Return (*)(Device, unsigned int* current, unsigned int* pending);
using DeviceGetMaxMigDeviceCountFn = Return (*)(Device, unsigned int*);
using DeviceGetMigDeviceHandleByIndexFn = Return (*)(Device, unsigned int, Device*);
using DeviceGetAttributesFn = Return (*)(Device, DeviceAttributes*);  // nvmlDeviceGetAttributes_v2
using DeviceGetGpuInstanceIdFn = Return (*)(Device, unsigned int*);
using DeviceGetGpuInstanceByIdFn = Return (*)(Device, unsigned int, GpuInstance*);
using GpuInstanceGetInfoFn = Return (*)(GpuInstance, GpuInstanceInfo*);
// nvmlDeviceGetRetiredPagesPendingStatus(device, nvmlEnableState_t*): the enum is an int.
using DeviceGetRetiredPagesPendingStatusFn = Return (*)(Device, int*);
using DeviceGetRemappedRowsFn = Return (*)(Device, unsigned int* corrected,
                                           unsigned int* uncorrected, unsigned int* pending,
                                           unsigned int* failure);
// nvmlDeviceGetComputeRunningProcesses_v2(device, infoCount in/out, infos).
using DeviceGetProcessesFn = Return (*)(Device, unsigned int*, ProcessInfoV2*);
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using EventSetCreateFn = Return (*)(EventSet*);
using DeviceRegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned int timeout_ms);  // _v2
using EventSetFreeFn = Return (*)(EventSet);
using DeviceGetGpuInstanceProfileInfoFn = Return (*)(Device, unsigned int index,
                                                     GpuInstanceProfileInfo*);
using DeviceGetGpuInstancesFn = Return (*)(Device, unsigned int profile_id, GpuInstance*,
                                           unsigned int* count);
// nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profile id, placements, count in/out).
using DeviceGetGpuInstancePlacementsFn = Return (*)(Device, unsigned int, GpuInstancePlacement*,
                                                    unsigned int*);
using DeviceCreateGpuInstanceWithPlacementFn = Return (*)(Device, unsigned int profile_id,
                                                          const GpuInstancePlacement*,
                                                          GpuInstance*);
using GpuInstanceDestroyFn = Return (*)(GpuInstance);
using GpuInstanceGetComputeInstanceProfileInfoFn = Return (*)(GpuInstance, unsigned int index,
                                                              unsigned int engine_profile,
                                                              ComputeInstanceProfileInfo*);
using GpuInstanceCreateComputeInstanceFn = Return (*)(GpuInstance, unsigned int profile_id,
                                                      ComputeInstance*);
using GpuInstanceGetComputeInstancesFn = Return (*)(GpuInstance, unsigned int profile_id,
                                                    ComputeInstance*, unsigned int* count);
using ComputeInstanceDestroyFn = Return (*)(ComputeInstance);
using GpmQueryDeviceSupportFn = Return (*)(Device, GpmSupport*);
using GpmSampleAllocFn = Return (*)(GpmSample*);
using GpmSampleFreeFn = Return (*)(GpmSample);
// nvmlGpmMigSampleGet(device, GPU instance id, sample).
using GpmMigSampleGetFn = Return (*)(Device, unsigned int, GpmSample);
using GpmMetricsGetFn = Return (*)(GpmMetricsGet*);

}  // namespace carve::nvml

#endif  // CARVE_ADAPTERS_NVML_NVML_API_H_
