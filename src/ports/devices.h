#ifndef CARVE_PORTS_DEVICES_H_
#define CARVE_PORTS_DEVICES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace carve {

// A MIG instance as the device backend reports it.
struct DiscoveredMigInstance {
  std::string uuid;     // "MIG-..." (simulated: "MIG-sim-<node>-<gpu>-<start>")
  std::string profile;  // "3g.40gb"
  int start = 0;        // first memory slice
};

// One GPU as the device backend reports it.
struct DiscoveredGpu {
  int index = 0;
  std::string uuid;   // "GPU-..." (simulated: "GPU-sim-<node>-<index>")
  std::string model;  // catalog name or alias, e.g. "H200", "NVIDIA H100 80GB HBM3"
  int64_t memory_mib = 0;
  std::string mode;  // "exclusive" | "shared" | "partition"
  bool mig_enabled = false;
  bool dynamic_layout = false;  // partition: instances created on demand
  std::vector<DiscoveredMigInstance> mig_instances;
  std::string health = "healthy";  // "healthy" | "suspect" | "unhealthy"
  std::string health_reason;       // e.g. "XID 79"
  int utilization_pct = -1;        // device activity over the last sample (-1: unknown)
  // N of the GPU's device node /dev/nvidiaN (NVML's minor number, which need not equal the
  // index: the driver numbers GPUs in the order it probes them); -1: unknown.
  int minor = -1;
  std::string vbios;  // VBIOS version ("96.00.89.00.01"; simulated: "simulated"); empty: unknown
  // MIG instances with a fault of their own (an XID attributed to the instance), by start slice:
  // "unhealthy XID 94". The GPU's other instances are not affected.
  std::map<int, std::string> instance_health;
  // Shared GPUs, set by the agent: how shares' caps are enforced: "mps", "mps (simulated)", or
  // "none: <why>" (then only `isolation: best-effort` shares are placed there). Empty otherwise.
  std::string share_enforcement;
};

// A compute process on a device, as the driver (or the simulation) sees it.
// Reclaim checks key a process on its pid (a live process the agent can attribute to a replica by
// its cgroup or process group), never on `owner`, which a simulated job writes itself.
struct DeviceProcess {
  int64_t pid = 0;
  int64_t memory_mib = 0;  // device memory it holds; -1: the driver does not say
  std::string owner;       // simulated: the file name's prefix ("job-17-r0"); NVML: empty
};

// The driver stack a node runs, for the records of what ran where (see docs/platform.md).
struct DriverVersions {
  std::string driver;       // "580.65.06"; simulated: "simulated" (or CARVE_SIM_DRIVER_VERSION)
  std::string cuda_driver;  // the CUDA version the driver supports, "13.0"
  std::string nvml;         // "13.580.65.06"
};

// Where a node's GPUs come from: NVML on a real node, a YAML description on a simulated one.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual std::string name() const = 0;  // "nvml" | "simulated"
  virtual absl::StatusOr<std::vector<DiscoveredGpu>> Discover() = 0;
  // The compute processes on GPU `index` and the device memory they hold, for reclaim checks.
  virtual absl::StatusOr<std::vector<DeviceProcess>> Processes(int index) {
    (void)index;
    return absl::UnimplementedError(name() + " cannot list device processes");
  }
  // The device memory in use on GPU `index` (all of it: processes, driver reservations, memory
  // no process holds any more), in MiB; reclaim compares it with the GPU's baseline.
  virtual absl::StatusOr<int64_t> UsedMemory(int index) {
    (void)index;
    return absl::UnimplementedError(name() + " cannot read device memory in use");
  }
  // The driver, CUDA driver and NVML versions; empty fields when unknown.
  virtual DriverVersions Versions() { return {}; }
  // Replaces GPU `index`'s MIG instances with `layout` (each instance's profile and start; uuids
  // are ignored). Changes nothing and fails while a compute process runs on the GPU or when the
  // layout is not valid for the model.
  virtual absl::Status ApplyMigLayout(int index, const std::vector<DiscoveredMigInstance>& layout) {
    (void)index;
    (void)layout;
    return absl::UnimplementedError(name() + " cannot change MIG layouts");
  }
  // Dynamic partitions: creates an instance of `profile` at memory slice `start` on GPU `index`
  // and returns its UUID, or destroys the instance at `start`. The GPU's other instances keep
  // running. Discover() lists the instances that exist.
  virtual absl::StatusOr<std::string> CreateMigInstance(int index, const std::string& profile,
                                                        int start) {
    (void)index;
    (void)profile;
    (void)start;
    return absl::UnimplementedError(name() + " cannot create MIG instances");
  }
  virtual absl::Status DestroyMigInstance(int index, int start) {
    (void)index;
    (void)start;
    return absl::UnimplementedError(name() + " cannot destroy MIG instances");
  }
  // Where simulated devices keep their state (processes and memory jobs register); a no-op for
  // real devices.
  virtual void SetStateDir(const std::string& dir) { (void)dir; }
};

// Simulated device usage: a job on a simulated GPU "uses" device memory by writing a file
// DIR/<gpu uuid>/<owner>.<pid> holding the MiB it uses ("<MiB>", "<MiB> leak" or "<MiB> hold").
// The process is listed while <pid> lives (not a zombie); a "leak" entry keeps its memory after
// the process is gone, modelling a driver that did not free it (UsedMemory counts it, Processes
// lists no process for it); a "hold" entry is listed while <pid> exists at all, zombie included,
// modelling a defunct process the driver still holds. The owner part of the name is whatever the
// job wrote: nothing trusts it. UsedMemory is the sum of the counted entries. A file DIR/<gpu
// uuid>/health ("unhealthy XID 79") injects a device fault; DIR/<uuid>/health-<start> a fault of
// the MIG instance at that slice only. A file DIR/<uuid>/utilization ("80") is the device's
// activity in percent (0 when absent). A file DIR/<uuid>/mig-layout (one "profile@start" per line,
// then "generation N") holds a layout applied with ApplyMigLayout; it replaces the description's
// layout, and its instances get new UUIDs per generation, as a driver gives recreated instances. A
// dynamic instance is a file DIR/<uuid>/instances/<start> holding its profile. The agent puts DIR
// in CARVE_SIM_GPU_DIR. Versions: driver, CUDA driver, NVML and VBIOS "simulated", unless the
// agent's environment sets CARVE_SIM_DRIVER_VERSION (to model a driver upgrade).

// NVML through dlopen("libnvidia-ml.so.1"); Unavailable (with why) when the library or a GPU is
// missing. No NVML headers or library are needed to build.
absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenNvmlBackend();

// A YAML file describing simulated GPUs:
//   gpus:
//     - model: H200          # catalog name or alias
//       count: 8
//       mode: exclusive      # exclusive | shared | partition
//       layout: dynamic      # partition only: dynamic, or a list of "profile@start"
// Errors name the file, the entry and the field.
absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenSimulatedBackend(const std::string& yaml_path,
                                                                    const std::string& node_name);
// The same from YAML text (for `carve dev`'s built-in cluster and for tests).
absl::StatusOr<std::unique_ptr<DeviceBackend>> SimulatedBackendFromYaml(
    const std::string& yaml_text, const std::string& node_name);

}  // namespace carve

#endif  // CARVE_PORTS_DEVICES_H_
