#ifndef CARVE_ADAPTERS_CGROUPS_DEVICE_FILTER_H_
#define CARVE_ADAPTERS_CGROUPS_DEVICE_FILTER_H_

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace carve {

// A character device number.
struct DeviceNumber {
  uint32_t major = 0;
  uint32_t minor = 0;
  bool operator==(const DeviceNumber&) const = default;
};

// The majors of the NVIDIA character devices: 195 (nvidia-frontend: /dev/nvidiaN, nvidiactl,
// modeset) and every major /proc/devices names "nvidia*" (nvidia-uvm, nvidia-caps, ...).
std::vector<uint32_t> NvidiaMajors(absl::string_view proc_devices);

// The cgroup v2 device program (BPF_PROG_TYPE_CGROUP_DEVICE), as runc's device filter but for
// one rule: every device is allowed except the character devices of `nvidia_majors`, of which
// only `allowed` may be opened (or created). Returns 1 (allow) or 0 (deny, the open gets EPERM).
std::vector<bpf_insn> DeviceFilterProgram(const std::vector<uint32_t>& nvidia_majors,
                                          const std::vector<DeviceNumber>& allowed);

// Loads the program and attaches it to the cgroup v2 directory `cgroup_dir` (BPF_F_ALLOW_MULTI:
// a program an ancestor attached still runs too). The attachment lives as long as the cgroup;
// only a process with CAP_SYS_ADMIN can detach it. The error says why the kernel refused
// (with the verifier's log when it was the verifier).
absl::Status AttachDeviceFilter(const std::string& cgroup_dir,
                                const std::vector<uint32_t>& nvidia_majors,
                                const std::vector<DeviceNumber>& allowed);

}  // namespace carve

#endif  // CARVE_ADAPTERS_CGROUPS_DEVICE_FILTER_H_
