#include "adapters/nvml/nvml_processes.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

constexpr unsigned long long kMib = 1024ULL * 1024ULL;
// Processes may start between the sizing call and the reading call; the buffer grows this many
// times before giving up.
constexpr int kAttempts = 5;

// One device's processes, by NVML's protocol: ask with no buffer for the count
// (INSUFFICIENT_SIZE, or SUCCESS when there are none), then read into a buffer with some room to
// spare, asking again while the driver says it is too small.
absl::StatusOr<std::vector<nvml::ProcessInfoV2>> Read(const NvmlLibrary& lib, nvml::Device device) {
  unsigned int capacity = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<nvml::ProcessInfoV2> infos(capacity);
    unsigned int count = capacity;
    nvml::Return r = lib.fn().get_processes(device, &count, infos.empty() ? nullptr : infos.data());
    if (r == nvml::kSuccess) {
      infos.resize(std::min<size_t>(count, infos.size()));
      return infos;
    }
    if (r != nvml::kErrorInsufficientSize) {
      return lib.Failure(r, "nvmlDeviceGetComputeRunningProcesses_v2");
    }
    capacity = count + 8;
  }
  return absl::UnavailableError(
      absl::StrCat("nvmlDeviceGetComputeRunningProcesses_v2: the process list kept growing over ",
                   kAttempts, " reads"));
}

}  // namespace

absl::StatusOr<std::vector<DeviceProcess>> ReadNvmlProcesses(const NvmlLibrary& lib,
                                                             nvml::Device device,
                                                             bool mig_enabled) {
  const NvmlLibrary::Functions& f = lib.fn();
  if (f.get_processes == nullptr) {
    return absl::UnimplementedError(
        "this NVML has no nvmlDeviceGetComputeRunningProcesses_v2 (driver too old?)");
  }
  std::vector<nvml::Device> targets;
  if (!mig_enabled) {
    targets.push_back(device);
  } else {
    if (f.get_max_mig == nullptr || f.get_mig_handle == nullptr) {
      return absl::UnimplementedError("MIG is enabled but this NVML cannot list MIG devices");
    }
    unsigned int max = 0;
    if (nvml::Return r = f.get_max_mig(device, &max); r != nvml::kSuccess) {
      return lib.Failure(r, "nvmlDeviceGetMaxMigDeviceCount");
    }
    for (unsigned int i = 0; i < max; ++i) {
      nvml::Device mig = nullptr;
      nvml::Return r = f.get_mig_handle(device, i, &mig);
      if (r == nvml::kErrorNotFound) continue;
      if (r != nvml::kSuccess) return lib.Failure(r, "nvmlDeviceGetMigDeviceHandleByIndex");
      targets.push_back(mig);
    }
  }
  std::map<int64_t, DeviceProcess> by_pid;
  for (nvml::Device target : targets) {
    absl::StatusOr<std::vector<nvml::ProcessInfoV2>> infos = Read(lib, target);
    if (!infos.ok()) return infos.status();
    for (const nvml::ProcessInfoV2& info : *infos) {
      DeviceProcess& p = by_pid[info.pid];
      if (p.pid == 0) p.memory_mib = -1;
      p.pid = info.pid;
      if (info.usedGpuMemory == nvml::kValueNotAvailable) continue;
      p.memory_mib = std::max<int64_t>(p.memory_mib, 0) +
                     static_cast<int64_t>((info.usedGpuMemory + kMib - 1) / kMib);
    }
  }
  std::vector<DeviceProcess> out;
  for (auto& [pid, p] : by_pid) out.push_back(std::move(p));
  return out;
}

}  // namespace carve
