// `carve probe`: a workload that reports what a job gets, seen from inside the job. It is what the
// acceptance kit (docs/poc.md) runs: what was asked, what the record says was granted and what the
// probe saw must agree. It prints one JSON object per line on standard output, so that a probe
// killed part way (a memory cap enforced by killing) still leaves what it saw before:
//   {"probe":"sees", "uid", "gid", "visible_devices", "devices": [...], "cgroup": {...},
//    "mps": {...}}
//   {"probe":"memory", "device", "mib", "ok"[, "error"]}      one per step
//   {"probe":"memory-reached", "device", "mib"}               the most it held at once
//   {"probe":"progress", "second", "iterations", "kind"}      one per second of compute: kind
//                                                             gpu-kernel (kernel launches on the
//                                                             first device) or cpu-loop
//   {"probe":"kernel", "device", "error"}                     the GPU kernel could not run
//   {"probe":"resumed", "from_second", "attempt"}             with --checkpoint
//   {"probe":"done", "per_second", "kind"}
// Devices: simulated GPUs through their device files (CARVE_SIM_GPU_DIR, ports/devices.h), real
// ones through the CUDA driver API loaded with dlopen (libcuda.so.1; nothing needed to build).
#ifndef CARVE_RUNTIME_PROBE_H_
#define CARVE_RUNTIME_PROBE_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve {

struct ProbeOptions {
  int64_t memory_mib = 0;  // device memory to take, in steps (0: none)
  int64_t step_mib = 256;
  int64_t hold_ms = 0;  // keep the memory this long after the last step
  int64_t seconds = 0;  // compute for this long, reporting progress each second
  // How it ends, for the acceptance kit's abnormal jobs: `exit_code` after the compute (an early
  // or failing exit), or `crash`: SIGSEGV raised after the compute (a crashing job).
  int exit_code = 0;
  bool crash = false;
  // Resume the compute from $CARVE_CHECKPOINT_DIR/probe-progress (the seconds an earlier attempt
  // finished, written after each second): a training job that survives being moved.
  bool checkpoint = false;
};

// What the probe reads from its machine: files (nullopt when unreadable) and the environment.
struct ProbeHost {
  std::function<std::optional<std::string>(const std::string& path)> read_file;
  std::function<std::optional<std::string>(const std::string& name)> env;
  static ProbeHost Real();
};

// The limits of the probe's own cgroup, read where the kernel keeps them: /proc/self/cgroup for
// its groups, /proc/self/mounts for the hierarchies. Each limit names the file it came from; the
// effective one is the tightest of v1 and v2.
nlohmann::json OwnCgroupLimits(const ProbeHost& host);

// The devices a job may use, and how memory on one is taken.
class ProbeDevice {
 public:
  virtual ~ProbeDevice() = default;
  virtual nlohmann::json Describe() const = 0;
  virtual const std::string& id() const = 0;
  // Holds `mib` MiB more (in all: the sum of every call); an error when the device refuses.
  virtual absl::Status Take(int64_t mib) = 0;
  // Gives back everything taken.
  virtual void Release() = 0;
  // One unit of compute on the device: a launch of the probe's kernel (probe_kernel.h) over every
  // multiprocessor, and its wait. Unimplemented where the device runs no kernel (simulated GPUs):
  // the probe then computes on the CPU and says so (`"kind": "cpu-loop"`).
  virtual absl::Status Spin() { return absl::UnimplementedError("this device runs no kernel"); }
};

// Simulated GPUs named in CUDA_VISIBLE_DEVICES that have a directory under CARVE_SIM_GPU_DIR.
std::vector<std::unique_ptr<ProbeDevice>> SimulatedProbeDevices(const ProbeHost& host);
// Real GPUs through libcuda.so.1; Unavailable (with why) when there is none.
absl::StatusOr<std::vector<std::unique_ptr<ProbeDevice>>> CudaProbeDevices();

// Runs the probe, writing its lines to `out`; the exit code (options.exit_code, or 1 when
// nothing could be probed that was asked for). With options.crash it raises SIGSEGV instead of
// returning, after a last line `{"probe":"crash"}`.
int RunProbe(const ProbeOptions& options, const ProbeHost& host, std::ostream& out);

}  // namespace carve

#endif  // CARVE_RUNTIME_PROBE_H_
