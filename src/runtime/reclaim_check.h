#ifndef CARVE_RUNTIME_RECLAIM_CHECK_H_
#define CARVE_RUNTIME_RECLAIM_CHECK_H_

// Residue judged by the device: after a replica ends, every compute process the device lists
// that no live replica placed on it (nor one of the agent's own device services, such as an MPS
// server) explains is residue, whoever owns it; and device memory in use above the GPU's
// baseline that live replicas do not explain is residue too. Processes are keyed on their pid
// (a live process), never on a name the job could have written.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"
#include "runtime/states.h"

namespace carve {

// A device process no live replica explains, described from /proc.
struct ResidueProcess {
  int64_t pid = 0;
  int64_t uid = -1;         // -1: unknown (gone, or in another pid namespace)
  std::string command;      // its command line (comm when empty); "" when gone
  int64_t memory_mib = -1;  // -1: the driver does not say
  ProcessState state = ProcessState::kRunning;
};

// What one GPU shows against what the agent can explain.
struct DeviceView {
  absl::Status processes;  // not OK: the device could not list its processes
  std::vector<ResidueProcess> residue;
  int process_count = 0;  // every process the device listed
  absl::Status memory;    // not OK: used memory could not be compared (why)
  int64_t used_mib = 0;
  int64_t baseline_mib = 0;
  int64_t explained_mib = 0;  // held by live replicas' and the agent's own processes

  int64_t Unexplained() const { return used_mib - baseline_mib - explained_mib; }
  bool MemoryClean(int64_t tolerance_mib) const {
    return !memory.ok() || Unexplained() <= tolerance_mib;
  }
  bool Clean(int64_t tolerance_mib) const { return residue.empty() && MemoryClean(tolerance_mib); }
};

// True when device process `pid` is explained: a live replica placed on the device, or an agent
// service.
using Explains = std::function<bool(int64_t pid)>;

// Lists GPU `index`'s processes and used memory; `baseline_mib` empty: memory is not compared.
DeviceView ViewDevice(DeviceBackend& devices, int index, std::optional<int64_t> baseline_mib,
                      const Explains& explains);
ResidueProcess DescribeProcess(const DeviceProcess& p);
// "pid 41 (uid 0, defunct, `sleep 30`, 2048 MiB)", joined by "; ".
std::string DescribeResidue(const std::vector<ResidueProcess>& residue);
// The heartbeat's per-GPU residue: {processes: [...], unexplained_mib, baseline_mib, used_mib};
// null when the view is clean.
nlohmann::json ResidueJson(const DeviceView& view, int64_t tolerance_mib);

// Each GPU's used memory with no process of a replica on it, by UUID, kept in a file so that an
// agent restart does not take leftover memory as its new normal. Taken when a GPU is first seen
// (used memory minus what its processes hold) and after a MIG layout change; after a verified
// reclaim on an idle GPU it can only go down. Thread-safe.
class DeviceBaselines {
 public:
  explicit DeviceBaselines(std::string path) : path_(std::move(path)) {}
  void Load();
  void TakeMissing(DeviceBackend& devices, const std::vector<DiscoveredGpu>& gpus);
  void Retake(DeviceBackend& devices, const DiscoveredGpu& gpu);
  void Lower(const std::string& uuid, int64_t used_mib);
  std::optional<int64_t> Get(const std::string& uuid) const;

 private:
  void Take(DeviceBackend& devices, const DiscoveredGpu& gpu);
  void SaveLocked() const;

  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> mib_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_RECLAIM_CHECK_H_
