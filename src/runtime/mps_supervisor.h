#ifndef CARVE_RUNTIME_MPS_SUPERVISOR_H_
#define CARVE_RUNTIME_MPS_SUPERVISOR_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"

namespace carve {

// One NVIDIA MPS control daemon per shared GPU, started and watched by the agent. The daemon
// runs with CUDA_VISIBLE_DEVICES=<the GPU's UUID> and its own pipe and log directories under
// `root` (mode 0755: clients of other uids reach the pipes there); a replica on a share is its
// client through CUDA_MPS_PIPE_DIRECTORY and gets its caps as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
// and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE. The daemon writes its pid to
// <pipe dir>/nvidia-cuda-mps-control.pid; it is alive while that process is.
//
// A daemon that cannot start leaves its GPU without enforced caps (share_enforcement "none:
// why"); a daemon that dies is a device fault: the GPU reports unhealthy ("mps daemon died")
// for one heartbeat, so that the server moves its jobs off, and healthy again only once a new
// daemon runs.
class MpsSupervisor {
 public:
  struct Options {
    // The control program and its leading arguments; "-d" is appended to start a daemon, and
    // control commands ("get_server_list", "quit") go to its standard input without it.
    std::vector<std::string> control;
    std::string root;                        // <root>/<gpu index>/pipe and /log
    bool simulated = false;                  // records say "mps (simulated)"
    std::map<std::string, std::string> env;  // more environment for the daemon
  };
  // kUnavailable: it never started (its GPU's shares run without enforced caps); kDied: found
  // dead, reported unhealthy once, restarted at the next heartbeat; kFailed: a restart failed.
  enum class DaemonState { kRunning, kUnavailable, kDied, kFailed };
  struct Daemon {
    int gpu = -1;
    std::string uuid;
    std::string pipe_dir;
    std::string log_dir;
    pid_t pid = 0;
    DaemonState state = DaemonState::kUnavailable;
    std::string error;  // why it is not running
    int restarts = 0;
    int64_t started_us = 0;
  };

  explicit MpsSupervisor(Options options);

  // Starts (or adopts a running) daemon for every GPU without MIG that may serve shares (on
  // NVML every one: the server sets modes; simulated GPUs: those described as shared), and
  // marks each GPU's share_enforcement.
  void Start(std::vector<DiscoveredGpu>& gpus);
  // GPU `gpu` serves shares (the server says so, or a share was placed there): its daemon's
  // death is then a device fault.
  void MarkShared(int gpu) const { shared_.insert(gpu); }
  // Once per heartbeat, on freshly discovered GPUs: notices dead daemons, restarts those whose
  // death was already reported, and applies share_enforcement and health to `gpus`.
  void Supervise(std::vector<DiscoveredGpu>& gpus);
  // Stops every daemon ("quit", then SIGTERM).
  void StopAll();

  // The environment for a client of GPU `gpu` with these caps; empty when no daemon runs.
  std::map<std::string, std::string> ClientEnv(int gpu, int64_t memory_mib,
                                               int64_t thread_pct) const;
  // What was enforced for a share on `gpu`, with how it was checked, for the replica's record.
  nlohmann::json Record(int gpu, int64_t memory_mib, int64_t thread_pct, bool best_effort) const;
  const Daemon* Find(int gpu) const;
  // What reading `gpu`'s client list needs, copied, so that another thread may read it while
  // Supervise restarts daemons: the control program and the daemon's environment.
  struct ClientQuery {
    int gpu = -1;
    std::vector<std::string> control;
    std::map<std::string, std::string> env;
    std::string unavailable;  // why no list can be read (no daemon runs); empty when one can
  };
  ClientQuery QueryClients(int gpu) const;
  // The pids the MPS servers of the query's daemon list as their clients (get_server_list, then
  // get_client_list of each); an error when a list cannot be read or no daemon runs (simulated
  // GPUs: the twin runs no servers). Each control command may take up to 3 s: the agent runs
  // this off its heartbeat thread. It reads no supervisor state.
  static absl::StatusOr<std::set<int64_t>> Clients(const ClientQuery& query);

 private:
  absl::Status Launch(Daemon& d);
  bool Alive(const Daemon& d) const;
  pid_t ReadPid(const Daemon& d) const;
  std::map<std::string, std::string> ControlEnv(const Daemon& d) const;
  std::string RunControl(const Daemon& d, const std::string& command) const;
  std::string Enforcement() const { return options_.simulated ? "mps (simulated)" : "mps"; }

  Options options_;
  std::map<int, Daemon> daemons_;  // by GPU index
  mutable std::set<int> shared_;
};

// `carve internal-sim-mps [-d]`: the simulated MPS control program (see docs/isolation.md).
// With -d it daemonizes, writes its pid file in CUDA_MPS_PIPE_DIRECTORY, and enforces each
// client's pinned memory limit on the simulated device: a process whose simulated allocation
// (CARVE_SIM_GPU_DIR/<uuid>/<owner>.<pid>) exceeds its CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is
// killed, as CUDA refuses the allocation, and the log says so. Without -d it answers control
// commands from standard input (get_server_list, quit).
int SimulatedMpsControl(bool daemon);

}  // namespace carve

#endif  // CARVE_RUNTIME_MPS_SUPERVISOR_H_
