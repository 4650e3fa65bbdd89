#ifndef CARVE_RUNTIME_RECORDS_H_
#define CARVE_RUNTIME_RECORDS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/devices.h"
#include "runtime/job_spec.h"
#include "runtime/labels.h"
#include "runtime/node_records.h"
#include "runtime/states.h"

namespace carve {

// A device grant as stored and sent to agents (the core's DeviceGrant, with the profile by name).
struct GrantRecord {
  int device = 0;
  int64_t compute_milli = 0;
  int64_t memory_mib = 0;
  std::string profile;  // partition only
  int start = -1;
  bool created = false;  // a MIG instance made for this replica
};

struct ReplicaRecord {
  std::string node;  // empty until placed
  std::vector<GrantRecord> grants;
  // pending | running | exited; for a replaced service replica also retired (its reclaim is in)
  // or lost (its node went silent; its devices stay fenced)
  ReplicaState state = ReplicaState::kPending;
  int slot = 0;          // the place in the service this replica fills (0..replicas-1)
  std::string retire;    // why it is being replaced; empty while it serves
  bool planned = false;  // planned: stop it once its replacement runs (never below N)
  // A replacement of a lost, drained or faulty replica: it takes back the quota that one held
  // (a scale-up replica passes its queue's quota check like any new work).
  bool replacement = false;
  int64_t pid = 0;
  std::optional<int> exit_code;
  std::optional<int> signal;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  int64_t assigned_us = 0;  // when an agent was first handed it (it may run before it reports)
  std::string enforcement;  // what isolation the agent applied
  // Shared GPUs: how the share's caps were enforced and checked (the agent's record: "enforced":
  // "mps" | "mps (simulated)" | "none", the daemon, the limits given), null for other modes.
  nlohmann::json gpu_isolation;
  bool timed_out = false;
  bool oom_killed = false;
  nlohmann::json reclaim;  // the agent's reclaim record: status, checks with observed values
  // The versions of the node it ran on, when it started: {id, carve, kernel, driver, cuda_driver,
  // nvml} (the id names the node's full set, VBIOS and MIG modes included; see NodeRecord).
  nlohmann::json versions;
  int64_t idle_since_us = 0;  // its GPUs showed no activity since then (0: active or unknown)
  // Where its stored log stops (bytes past a --max-log-bytes limit were dropped; 0: complete),
  // and which limit dropped them: "server" or "agent".
  int64_t log_truncated_at = 0;
  std::string log_truncated_by;
  // Where this placement's output starts in the job's log for this replica: the bytes earlier
  // attempts stored before it was bound. The agent ships offsets into its own file, from 0.
  int64_t log_base = 0;
  // The agent's word on the node's copy of the log: whether its disk use is bounded, and how.
  std::string log_disk;
};

// What one replica held during an earlier attempt of its job.
struct AttemptReplica {
  std::string node;
  std::vector<GrantRecord> grants;
  nlohmann::json versions;  // as ReplicaRecord::versions
};

// An earlier run of a job, kept in its record when the platform runs it again (retry, requeue,
// failover, preemption). Its usage row is written when it ends.
struct AttemptRecord {
  int attempt = 0;
  std::string cause;  // why it ended
  std::string node;   // its first replica's node
  int64_t scheduled_us = 0;
  int64_t ended_us = 0;
  std::vector<AttemptReplica> replicas;
  std::string fault;                                 // the fault's reference, if one ended it
  nlohmann::json reclaim = nlohmann::json::array();  // each replica's reclaim record

  // {attempt, cause, node, scheduled_us, ended_us, replicas: [{node, grants, versions}], fault,
  // reclaim}, as stored since attempts were kept.
  nlohmann::json ToJson() const;
  // Refuses (InvalidArgument, naming the field) a part of the wrong type.
  static absl::StatusOr<AttemptRecord> FromJson(const nlohmann::json& j);
};

struct JobRecord {
  int64_t id = 0;
  JobSpec spec;
  JobState state = JobState::kQueued;
  std::string reason;  // why it is in this state
  std::string submitted_by;
  std::string idempotency_key;
  // Whose key it is: the submitter's user id and tenant (names can be re-used; ids are not).
  // Empty for jobs submitted before ids existed: their keys are not replayed.
  std::string idempotency_scope;
  int64_t created_us = 0;
  int64_t scheduled_us = 0;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  bool cancel_requested = false;
  std::string cancelled_by;
  std::string displaced;  // why the platform stopped it to run it again (drain, device fault)
  std::optional<JobState> outcome;      // while reclaiming: the final state the job ends in
  int64_t lease_expires_us = 0;         // 0: no lease
  int64_t idle_flagged_us = 0;          // when it was flagged for holding GPUs without using them
  int64_t not_before_us = 0;            // a retry's backoff: not scheduled before then
  int attempt = 0;                      // 0 for the first run; +1 per retry, requeue or failover
  std::vector<AttemptRecord> attempts;  // earlier attempts, oldest first
  std::vector<ReplicaRecord> replicas;  // empty until scheduled
  std::string explanation;              // last scheduling cycle's reason for waiting
  std::map<std::string, int> explanation_reasons;
  // The last reason it waited before it was placed (the explanation is cleared then), so its
  // record still answers "why did it wait" after it started; empty when it never waited a cycle.
  std::string waited_for;
  // The longest wait threshold (a notification's wait_longer_than) a job.wait-exceeded event was
  // written for, and in which attempt's wait: each threshold once per wait, across restarts.
  int64_t wait_alert_us = 0;
  int wait_alert_attempt = -1;
  // Preemption, both sides: the job it was last preempted for and why; the jobs it preempted.
  // Whether preempted_by is another tenant's job (not shown to the job's own readers), and the
  // victims of other tenants (`other_tenant: true`: their ids are not shown to this job's).
  int64_t preempted_by = 0;
  bool preempted_by_other_tenant = false;
  std::string preemption;
  nlohmann::json victims = nlohmann::json::array();  // [{job, reason, other_tenant?}]

  // Whether a replica of the job holds a grant on `node` (on its GPU `gpu`; -1: any GPU);
  // retired replicas hold nothing.
  bool Uses(const std::string& node, int gpu = -1) const;

  nlohmann::json ToJson() const;
  static absl::StatusOr<JobRecord> FromJson(const nlohmann::json& j);
};

// A node's planned maintenance window (POST /nodes/{name}/maintenance). Before it starts only
// jobs that will end by then (max_runtime) land on the node; while it is active the node is
// drained and takes no work; at its end it is back in service.
enum class WindowPhase { kScheduled, kActive };
struct MaintenanceWindow {
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::string by;  // the admin who planned it
  std::string reason;
  WindowPhase phase = WindowPhase::kScheduled;

  // {start_us, end_us, by, reason, phase: scheduled | active}, as stored, shown and in events.
  nlohmann::json ToJson() const;
  // Refuses a phase it does not know, or fields of the wrong type.
  static absl::StatusOr<MaintenanceWindow> FromJson(const nlohmann::json& j);
};

struct NodeRecord {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  Labels labels;            // what placement and pools see: the agent's with the admin's edits
  Labels agent_labels;      // as its agent registered them (`carve agent --label`)
  LabelEdits admin_labels;  // `carve label`, `kind: node` labels: outlive re-registration
  std::string backend;      // "nvml" | "simulated"
  std::vector<DiscoveredGpu> gpus;
  // Named extra resources it offers (`carve agent --resource NAME=AMOUNT`): RDMA bandwidth,
  // local disk, licences; replicas ask for them in `resources.extra`.
  std::map<std::string, int64_t> extra;
  NodeRecordState state = NodeRecordState::kReady;  // dead: declared by an admin
  int64_t lost_us = 0;  // when its jobs were declared lost (0: not while it is silent)
  int64_t registered_us = 0;
  int64_t last_heartbeat_us = 0;
  // What its agent promised at registration (`carve agent --fence-after-ms`): after this long
  // without an answer to its heartbeats it stops its replicas itself, each within
  // `fence_grace_ms` (0: it does not, and the replicas of a lost node may run on).
  int64_t fence_after_ms = 0;
  int64_t fence_grace_ms = 0;
  std::map<int, std::string> quarantined;    // GPU index -> why (a failed reclaim check)
  std::string cordoned_by;                   // no new work while set ("admin", "admin (drain)")
  std::map<int, std::string> cordoned_gpus;  // GPU index -> who: no new work on that GPU
  std::map<int, int64_t> fenced;  // GPU index -> job lost with the node; kept out until it returns
  // GPU index -> a planned MIG re-layout in progress (draining, reconfiguring) or failed.
  std::map<int, RelayoutRecord> relayouts;
  // GPU index -> the MIG instances the agent discovered that differ from the recorded layout; not
  // adopted (the GPU is quarantined) until an admin re-lays it out or clears the quarantine.
  std::map<int, std::vector<DiscoveredMigInstance>> layout_mismatch;
  // MIG instances reported unhealthy while their GPU is not; nothing is placed on them until they
  // report healthy again.
  std::map<MigSlotRef, InstanceFault> instance_faults;
  std::optional<MaintenanceWindow> maintenance;  // none: no window planned
  // What the node runs, as its agent last registered (none: registered before versions were kept).
  std::optional<NodeVersionSet> versions;
  // GPU index -> residue the agent currently sees on it; a quarantine is not cleared while its GPU
  // has residue.
  std::map<int, GpuResidue> residue;

  // The GPU's state for scheduling and display: available, cordoned, draining, reconfiguring,
  // quarantined or fenced.
  std::string GpuState(int index) const;
  // The utilization denominators (docs/utilization.md). Online: heartbeating (not silent, not
  // declared dead). Schedulable: online and able to take new work now: no cordon or drain of the
  // node or the GPU, no active maintenance window, no MIG re-layout under way, not fenced or
  // quarantined, healthy.
  bool Online() const;
  bool Schedulable(const DiscoveredGpu& gpu) const;

  nlohmann::json ToJson() const;
  // Refuses (DataLoss, naming the node) a relayout phase, residue or any other part this server
  // cannot read; InvalidArgument for a missing name or resources or an unknown state.
  static absl::StatusOr<NodeRecord> FromJson(const nlohmann::json& j);
};

nlohmann::json GpuToJson(const DiscoveredGpu& g);
// A partition's id: its node, GPU and placement ("a100-0/gpu1/3g.40gb@4"). It names the same
// instance across agent restarts and driver upgrades, whatever UUID the driver gives it.
std::string PartitionId(const std::string& node, int gpu, const std::string& profile, int start);
nlohmann::json GrantToJson(const GrantRecord& g);
GrantRecord GrantFromJson(const nlohmann::json& j);
absl::StatusOr<DiscoveredGpu> GpuFromJson(const nlohmann::json& j);
// A node's GPU mode overrides (GPU index -> mode) as stored: {"1": "exclusive"}. The reader also
// takes the [[1, "exclusive"]] that earlier servers wrote, and skips what it cannot read.
nlohmann::json ModesToJson(const std::map<int, std::string>& modes);
std::map<int, std::string> ModesFromJson(const nlohmann::json& j);

// A job record or its explanation as a reader below the cluster's admins sees it: without the id
// of another tenant's job that preempted it, nor the ids of other tenants' jobs it preempted
// (the scheduler keeps both; the reasons already name no other tenant's job).
void HideOtherTenantsJobs(nlohmann::json& job);

}  // namespace carve

#endif  // CARVE_RUNTIME_RECORDS_H_
