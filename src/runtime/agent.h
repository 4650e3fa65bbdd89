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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"
#include "ports/process.h"
#include "runtime/agent_protocol.h"
#include "runtime/exit_watch.h"
#include "runtime/mps_supervisor.h"
#include "runtime/reclaim_check.h"

namespace carve {

class ApiClient;

// The NVIDIA device nodes a replica with `grants` may open: its GPUs (/dev/nvidiaN, N the GPU's
// minor number as NVML reports it, else its index), the control and UVM devices CUDA needs,
// and for MIG grants every capability device (MIG instances are not separated by device node).
std::vector<std::string> NvidiaDeviceNodes(const std::vector<GrantRecord>& grants,
                                           const std::vector<DiscoveredGpu>& gpus);

// The node agent: discovers GPUs, registers with the server, heartbeats, runs assigned replicas
// as process groups (with their GPU environment and limits), ships their output, reports how
// they ended, and stops what the server says to stop. Its replicas survive an agent restart:
// the state file lets the next agent re-adopt them.
class Agent {
 public:
  struct Options {
    std::string server = "http://127.0.0.1:7070";
    std::string token;  // the join token; the node's own credential is kept in data_dir/node.token
    std::string node;
    std::string data_dir;  // logs, status files and state: private to the agent (0700)
    // What jobs may reach: per-tenant work and checkpoint directories, the simulated GPUs'
    // directory. Never inside a private directory. Empty: DATA_DIR/../carve-jobs.
    std::string jobs_dir;
    // Every job runs as the agent's own user (required when the agent is not root): jobs are
    // then not isolated from each other.
    bool single_user = false;
    // Tenants without a uid on their tenant document get one from this range, kept in the
    // data directory so a tenant keeps its uid on this node.
    int64_t uid_min = 200000;
    int64_t uid_max = 265535;
    int64_t cpu_milli = 0;
    int64_t memory_mib = 0;
    std::map<std::string, std::string> labels;
    // Named extra resources this node offers (`--resource NAME=AMOUNT`).
    std::map<std::string, int64_t> extra;
    int64_t heartbeat_ms = 500;
    // Processes and threads one replica may have (pids.max); 0: no limit.
    int64_t job_pids_max = 16384;
    int64_t stop_grace_ms = 3000;
    // Self-fencing: after this long without an answer to its heartbeats (counted from when it
    // sent the last answered one) the agent stops every replica it runs (SIGTERM, SIGKILL after
    // stop_grace_ms), so that a node cut off from the server never runs a job beside the attempt
    // the server starts elsewhere. It says so at registration, and the server then declares the
    // replicas lost only after this and the grace. 0: never (a server down that long would stop
    // every job, so it is the operator's choice).
    int64_t fence_after_ms = 0;
    int64_t memory_tolerance_mib = 64;  // device memory a reclaimed replica may leave behind
    // How long a reclaim check waits for residue to go (a driver tearing a context down, a
    // replica launched meanwhile) before it records what it sees.
    int64_t residue_settle_ms = 2000;
    // The carve binary, which leads each replica's group as `carve internal-run` (see
    // replica_monitor.h). Empty: this process's own executable.
    std::string self_exe;
    std::string ca_file;  // PEM CA for an https server (empty: the system's CAs)
    // The MPS control program started (with -d) for each shared GPU. Empty: by backend,
    // nvidia-cuda-mps-control on NVML, `carve internal-sim-mps` on simulated GPUs; "none": no
    // daemon (shared GPUs then take only `isolation: best-effort` shares).
    std::string mps_control;
    // Where the daemons' pipe and log directories live (<dir>/<gpu>/pipe, mode 0755): jobs of
    // every tenant reach it, so it is outside the private data directory. Empty:
    // /tmp/carve-mps-<hash of the data directory> (short: the pipes are Unix sockets).
    std::string mps_dir;
    // Output shipped per replica; the node's copy is freed (hole punching) once shipped or past
    // the limit, each heartbeat.
    int64_t max_log_bytes = int64_t{64} << 20;
    // Broken on purpose, for the acceptance kit's own tests (`carve agent --break`, hidden; never
    // in a deployment): "reclaim-checks" reports every reclaim verified without running its
    // checks; "versions" registers the node without its versions.
    std::set<std::string> broken;
  };
  Agent(Options options, std::unique_ptr<DeviceBackend> devices,
        std::unique_ptr<ProcessLauncher> launcher);
  ~Agent();

  // Discovers devices, registers (retrying until the server answers or `deadline_ms` passes),
  // re-adopts replicas from the state file, then heartbeats in a background thread.
  absl::Status Start(int64_t deadline_ms = 30000);
  // Stops heartbeating. Replicas keep running unless `kill_replicas`.
  void Stop(bool kill_replicas);
  // The agent's own device services (an MPS server, whose process NVML lists on the GPU): their
  // processes are never residue. `serving` false forgets the pid. Thread-safe.
  void DeclareDeviceService(int64_t pid, bool serving);

 private:
  struct Replica {
    int64_t job = 0;
    int index = 0;
    int attempt = 0;  // the job's attempt it was started for
    ProcessHandle handle;
    std::string log_path;
    std::string status_path;     // where the group leader records how the command ended
    int64_t shipped = 0;         // log bytes the server has
    int64_t freed = 0;           // log bytes [0, freed) of the node's copy are deallocated
    bool log_truncated = false;  // the job wrote more than max_log_bytes
    std::string log_disk;        // whether the node's copy is bounded (empty: not tried yet)
    int64_t started_us = 0;
    int64_t deadline_us = 0;  // 0: none
    bool timed_out = false;
    bool launched = false;
    // The server asked it to stop: signalled once, so a job saving a checkpoint on SIGTERM is
    // not interrupted by the next heartbeat's repeat of the request.
    bool stop_sent = false;
    std::optional<ExitStatus> exit;
    int64_t ended_us = 0;
    std::vector<GrantRecord> grants;
    nlohmann::json gpu_isolation;  // shares: what enforced the caps (mps_supervisor.h)
    nlohmann::json reclaim;        // the reclaim record, once the command has ended
    // What its devices showed while it ran, sampled once a second (SampleDevices): the most
    // device memory its processes held (-1: never read), and busy time of its whole GPUs.
    int64_t peak_device_mib = -1;
    double busy_seconds = -1;
    int64_t sampled_us = 0;  // the last sample
    // Reclaiming and stopping can take a grace period; they run off the heartbeat loop.
    std::shared_future<nlohmann::json> reclaiming;
  };

  // Registers with the node credential saved in DATA/node.token, or else with the join token
  // (options.token) and saves the node credential the server answers with (mode 0600); every
  // later call uses the node credential.
  absl::Status Join(const nlohmann::json& body, int64_t deadline_ms);
  absl::StatusOr<nlohmann::json> RegisterWith(const std::string& token, const nlohmann::json& body,
                                              int64_t deadline_ms);
  void Loop();
  absl::Status Tick();
  nlohmann::json RegistrationBody() const;
  absl::Status RegisterAgainIfUpgraded();
  bool CutOff() const;
  // Follows the server's answer: stops, then starts, then layouts.
  void Follow(const HeartbeatAnswer& answer);
  void Launch(const AgentAssignment& assignment);
  void PollAndEnforce();
  // Per running replica, at most once a second: the device memory its processes hold now (peak
  // kept) and, on whole GPUs, the utilization since the last sample (busy time).
  void SampleDevices();
  // Verifies that `r` left nothing behind: its process group is empty (stragglers are stopped),
  // no process of it is left on its devices, their memory is back, created partitions are gone.
  // Runs on its own thread; returns the record with "oom_killed".
  nlohmann::json Reclaim(Replica r);
  nlohmann::json UncheckedReclaim(const Replica& r);  // --break reclaim-checks
  void StartReclaim(Replica& r);
  // Checks that GPU `device` lists no process but those of live replicas placed on it and the
  // agent's services (residue: whoever owns it), and that its used memory is back to its
  // baseline but for what those hold (reclaim_check.h).
  template <typename Check>
  void CheckDeviceProcesses(const Replica& r, int device, Check& check, nlohmann::json& checks);
  template <typename Check>
  void CheckDeviceMemory(const Replica& r, int device, Check& check, nlohmann::json& checks);
  // What explains a process on GPU `device`: a live replica placed on it other than `except`, or
  // a declared device service.
  Explains ExplainsFor(int device, std::pair<int64_t, int> except) const;
  // The device's view, looked at again until it is clean or residue_settle_ms has passed.
  DeviceView SettledView(int device, std::pair<int64_t, int> except, bool memory);
  // Publishes the live replicas (and GPU UUIDs) for reclaim threads; loop thread only.
  void PublishLive();
  // The agent's current view of residue on `gpu`, for the heartbeat (none: clean).
  std::optional<GpuResidue> ResidueReport(const DiscoveredGpu& gpu) const;
  // Destroys a dynamic MIG instance made for a replica and records whether the device agrees.
  template <typename Check>
  void CheckDestroyed(const GrantRecord& grant, Check& check);
  // Stops the process group now (SIGTERM, SIGKILL after `grace_ms`); a failure is logged.
  void StopLogged(const ProcessHandle& handle, int64_t grace_ms);
  // SIGTERM, then SIGKILL after `grace_ms` (-1: the agent's stop grace).
  void StopAsync(const ProcessHandle& handle, int64_t grace_ms = -1);
  // Applies a MIG layout the server asked for, once per request; the result is reported until the
  // server stops asking.
  void ApplyLayout(const LayoutOrder& order);
  void ShipLogs();
  // Ships the replica's next log chunk below max_log_bytes.
  void ShipLog(ApiClient& api, Replica& r);
  // Frees the bytes of the node's copy that are shipped or past the limit (hole punching: the
  // file keeps its size, so offsets stay valid), and says in r.log_disk whether that worked.
  void FreeLog(Replica& r);
  HeartbeatRequest Report() const;
  ReplicaReport ReportOf(const Replica& r) const;
  GpuReport ReportOf(const DiscoveredGpu& g) const;
  void SaveState() const;
  void LoadState();
  // This agent's replicas' cgroups are named GroupPrefix() + "<job>-r<replica>" (unique per node
  // and data directory). SweepGroups, at start after LoadState, removes those no adopted replica
  // uses, killing what still runs in them.
  std::string GroupPrefix() const;
  void SweepGroups();
  std::map<std::string, std::string> GpuEnv(const AgentAssignment& assignment) const;
  // The Unix user a tenant's jobs run as on this node (the agent's own in single-user mode).
  absl::StatusOr<std::pair<int64_t, int64_t>> TenantIds(const AgentAssignment& assignment);
  // The job's environment: its own (loader variables deferred to its command), Carve's, HOME,
  // USER and LOGNAME.
  std::map<std::string, std::string> JobEnv(const AgentAssignment& assignment,
                                            const std::string& home, int64_t uid) const;
  // Creates the directories jobs may reach; called by Start.
  absl::Status PrepareDirs();
  // Shared GPUs: starts their MPS daemons (before registration, so the node says whether its
  // shares' caps are enforced).
  void StartMps();
  // Publishes the MPS daemons' pids for the reclaim checks (loop thread).
  void PublishMpsDaemons();
  // A share's memory cap (its grant, or the GPU's memory in proportion to its compute share)
  // and thread percentage.
  std::pair<int64_t, int64_t> ShareCaps(const GrantRecord& grant) const;
  // The replica's record of what enforced its shares' caps (null without shares).
  nlohmann::json GpuIsolation(const AgentAssignment& assignment) const;
  // A share's caps apply only to a process that is an MPS client, and CUDA runs without MPS,
  // silently, when it cannot reach the daemon. About once a second while shares run: a process
  // of the replica in an MPS server's client list confirms the record (`client`); any one
  // holding memory on the GPU outside every client list makes it say the caps were bypassed
  // (enforced: none). Lists that cannot be read conclude nothing. Real GPUs only: the simulated
  // twin runs no MPS servers. The device's processes are listed here, on the loop thread; the
  // client lists (a control command each, up to 3 s) are read on a thread of their own and
  // judged at a later tick, so that a slow or hung MPS control never delays a heartbeat (which
  // could make the server declare the node lost, or the agent fence itself).
  void VerifyMpsClients();
  struct MpsCheck {  // one round: the processes listed first, then the clients
    std::map<int, absl::StatusOr<std::vector<DeviceProcess>>> listed;
    std::map<int, absl::StatusOr<std::set<int64_t>>> clients;
    // Each GPU's daemon when the round began: a daemon restarted since lists none of the
    // clients of the one before, so that round concludes nothing for the GPU.
    std::map<int, pid_t> daemons;
  };
  // Starts a round over the GPUs of running shares whose records still say `mps`.
  void StartMpsCheck();
  // One record of `r`'s gpu_isolation against a finished round.
  void VerifyMpsRecord(const Replica& r, nlohmann::json& record, const MpsCheck& check);

  Options options_;
  std::unique_ptr<DeviceBackend> devices_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::vector<DiscoveredGpu> gpus_;
  std::map<std::pair<int64_t, int>, Replica> replicas_;  // touched only by the loop thread
  std::vector<std::future<void>> stopping_;              // stops and reclaims in progress
  std::map<int, LayoutResult> layout_results_;           // GPU index -> last applied layout
  struct LiveReplica {
    ProcessHandle handle;
    std::set<int> devices;
  };
  mutable std::mutex live_mu_;  // guards live_, service_pids_, mps_daemons_ and uuids_
  std::map<std::pair<int64_t, int>, LiveReplica> live_;
  std::set<int64_t> service_pids_;
  std::map<int, std::string> uuids_;  // GPU index -> UUID
  DriverVersions versions_;
  std::unique_ptr<DeviceBaselines> baselines_;
  std::map<std::string, int64_t> tenant_uids_;  // allocated from the uid range
  std::unique_ptr<MpsSupervisor> mps_;
  std::set<int64_t> mps_daemons_;    // guarded by live_mu_: their MPS servers are not residue
  std::future<MpsCheck> mps_check_;  // the round of VerifyMpsClients in progress
  int64_t mps_check_started_us_ = 0;
  std::thread thread_;
  // Waits on the server for work (GET /agents/wait) and wakes the loop for a heartbeat at once.
  void WaitLoop();
  std::thread wait_thread_;
  // Self-fencing (options.fence_after_ms): checks the silence every 100 ms on its own thread, so
  // that a heartbeat stuck on a hung server does not delay it.
  void FenceLoop();
  void Fence();
  std::thread fence_thread_;
  // Steady-clock ms when the last heartbeat that got an answer was sent.
  std::atomic<int64_t> heard_ms_{0};
  // Replicas the agent stopped itself -> when (wall clock µs); guarded by live_mu_.
  std::map<std::pair<int64_t, int>, int64_t> fenced_;
  // Heartbeat now: the server has work for this node, a replica ended, or a reclaim record is
  // made. Thread-safe.
  void Wake();
  // Says at once when a replica's leader exits (pidfds); where it cannot, the loop's poll does.
  std::unique_ptr<ExitWatch> exits_;
  bool work_ = false;  // guarded by mu_: heartbeat now
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_AGENT_H_
