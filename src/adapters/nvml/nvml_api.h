#ifndef CARVE_ADAPTERS_NVML_NVML_API_H_
#define CARVE_ADAPTERS_NVML_NVML_API_H_

// The slice of NVML's C API the device backend calls, declared here so that neither nvml.h nor
// the driver is needed to build. Names, layouts and values follow NVIDIA's nvml.h (API version
// 12); only what the backend reads is declared. The library is loaded with dlopen, so these are
// function pointer types, not prototypes of linked functions.

#include <cstdint>

namespace carve::nvml {

// nvmlReturn_t is a C enum; its values are ints.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorGpuIsLost = 15;

// nvmlDevice_t and nvmlGpuInstance_t are opaque pointers.
struct DeviceSt;
using Device = DeviceSt*;
struct GpuInstanceSt;
using GpuInstance = GpuInstanceSt*;

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

using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);   // GetUUID, GetName
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
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

}  // namespace carve::nvml

#endif  // CARVE_ADAPTERS_NVML_NVML_API_H_
