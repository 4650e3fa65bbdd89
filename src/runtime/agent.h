#ifndef CARVE_RUNTIME_AGENT_H_
#define CARVE_RUNTIME_AGENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"
#include "ports/process.h"
#include "runtime/mps_supervisor.h"

namespace carve {

// The node agent: discovers GPUs, registers with the server, heartbeats, runs assigned replicas
// as process groups (with their GPU environment and limits), ships their output, reports how
// they ended, and stops what the server says to stop. Its replicas survive an agent restart:
// the state file lets the next agent re-adopt them.
class Agent {
 public:
  struct Options {
    std::string server = "http://127.0.0.1:7070";
    std::string token;
    std::string node;
    std::string data_dir;  // logs, checkpoints and the state file live here
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    std::map<std::string, std::string> labels;
    int64_t heartbeat_ms = 500;
    int64_t stop_grace_ms = 3000;
    int64_t memory_tolerance_mib = 64;  // device memory a reclaimed replica may leave behind
    // The carve binary, which leads each replica's group as `carve internal-run` (see
    // replica_monitor.h). Empty: this process's own executable.
    std::string self_exe;
    // The MPS control program started (with -d) for each shared GPU. Empty: by backend,
    // nvidia-cuda-mps-control on NVML, `carve internal-sim-mps` on simulated GPUs; "none": no
    // daemon (shared GPUs then take only `isolation: best-effort` shares).
    std::string mps_control;
    // Where the daemons' pipe and log directories live (<dir>/<gpu>/pipe, mode 0755): jobs of
    // every tenant reach it, so it is outside the private data directory. Empty:
    // /tmp/carve-mps-<hash of the data directory> (short: the pipes are Unix sockets).
    std::string mps_dir;
  };
  Agent(Options options, std::unique_ptr<DeviceBackend> devices,
        std::unique_ptr<ProcessLauncher> launcher);
  ~Agent();

  // Discovers devices, registers (retrying until the server answers or `deadline_ms` passes),
  // re-adopts replicas from the state file, then heartbeats in a background thread.
  absl::Status Start(int64_t deadline_ms = 30000);
  // Stops heartbeating. Replicas keep running unless `kill_replicas`.
  void Stop(bool kill_replicas);

 private:
  struct Replica {
    int64_t job = 0;
    int index = 0;
    ProcessHandle handle;
    std::string log_path;
    std::string status_path;  // where the group leader records how the command ended
    int64_t shipped = 0;      // log bytes the server has
    int64_t started_us = 0;
    int64_t deadline_us = 0;  // 0: none
    bool timed_out = false;
    bool launched = false;
    // The server asked it to stop: signalled once, so a job saving a checkpoint on SIGTERM is
    // not interrupted by the next heartbeat's repeat of the request.
    bool stop_sent = false;
    std::optional<ExitStatus> exit;
    int64_t ended_us = 0;
    nlohmann::json grants = nlohmann::json::array();
    nlohmann::json gpu_isolation;  // shares: what enforced the caps (mps_supervisor.h)
    nlohmann::json reclaim;        // the reclaim record, once the command has ended
    // Reclaiming and stopping can take a grace period; they run off the heartbeat loop.
    std::shared_future<nlohmann::json> reclaiming;
  };

  void Loop();
  absl::Status Tick();
  void Launch(const nlohmann::json& assignment);
  void PollAndEnforce();
  // Verifies that `r` left nothing behind: its process group is empty (stragglers are stopped),
  // no process of it is left on its devices, their memory is back, created partitions are gone.
  // Runs on its own thread; returns the record with "oom_killed".
  nlohmann::json Reclaim(Replica r);
  void StartReclaim(Replica& r);
  // Checks that no process of `r` is left on GPU `device` and its memory is back.
  template <typename Check>
  void CheckDeviceProcesses(const Replica& r, int device, Check& check, nlohmann::json& checks);
  // Destroys a dynamic MIG instance made for a replica and records whether the device agrees.
  template <typename Check>
  void CheckDestroyed(const nlohmann::json& grant, Check& check);
  // SIGTERM, then SIGKILL after `grace_ms` (-1: the agent's stop grace).
  void StopAsync(const ProcessHandle& handle, int64_t grace_ms = -1);
  // Applies a MIG layout the server asked for, once per request; the result is reported until the
  // server stops asking.
  void ApplyLayout(const nlohmann::json& request);
  void ShipLogs();
  nlohmann::json Report() const;
  void SaveState() const;
  void LoadState();
  std::map<std::string, std::string> GpuEnv(const nlohmann::json& assignment) const;
  // Shared GPUs: starts their MPS daemons (before registration, so the node says whether its
  // shares' caps are enforced).
  void StartMps();
  // A share's memory cap (its grant, or the GPU's memory in proportion to its compute share)
  // and thread percentage.
  std::pair<int64_t, int64_t> ShareCaps(const nlohmann::json& grant) const;
  // The replica's record of what enforced its shares' caps (null without shares).
  nlohmann::json GpuIsolation(const nlohmann::json& assignment) const;

  Options options_;
  std::unique_ptr<DeviceBackend> devices_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::vector<DiscoveredGpu> gpus_;
  std::map<std::pair<int64_t, int>, Replica> replicas_;  // touched only by the loop thread
  std::vector<std::future<void>> stopping_;              // stops in progress
  std::map<int, nlohmann::json> layout_results_;         // GPU index -> last applied layout
  std::unique_ptr<MpsSupervisor> mps_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_AGENT_H_
