#ifndef CARVE_RUNTIME_CONTROL_PLANE_H_
#define CARVE_RUNTIME_CONTROL_PLANE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/model/cluster.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/placement/policy.h"
#include "core/sched/queueing/explain.h"
#include "core/sched/queueing/quota.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"
#include "runtime/agent_protocol.h"
#include "runtime/audit_log.h"
#include "runtime/configuration.h"
#include "runtime/cycle_plan.h"
#include "runtime/identity.h"
#include "runtime/job_filter.h"
#include "runtime/job_table.h"
#include "runtime/journal.h"
#include "runtime/notification_config.h"
#include "runtime/queue_history.h"
#include "runtime/records.h"
#include "runtime/scheduler_memory.h"
#include "runtime/tenancy.h"
#include "runtime/utilization.h"
#include "runtime/work_board.h"

namespace carve {

class Placer;
struct Decisions;
struct Preemption;
struct ReplicaPlacement;

// The controller's state machine: jobs, nodes and tokens in memory, every change durable in the
// store (through the Journal) before the call that made it returns. Thread-safe.
class Notifier;         // notifier.h
class ReservationView;  // reservations.h

// A job record or its explanation as `who` may read it: below the cluster's admins, without the
// ids of other tenants' jobs (HideOtherTenantsJobs).
inline nlohmann::json ForReader(nlohmann::json job, const Principal& who) {
  if (who.role != Role::kAdmin) HideOtherTenantsJobs(job);
  return job;
}
inline absl::StatusOr<nlohmann::json> ForReader(absl::StatusOr<nlohmann::json> job,
                                                const Principal& who) {
  if (job.ok()) *job = ForReader(*std::move(job), who);
  return job;
}

class ControlPlane {
 public:
  struct Options {
    std::string policy = "carve";
    std::string log_dir;  // where replica logs are kept
    // Bytes of a replica's log the server stores; what comes beyond is dropped, and the replica's
    // record says where its log stops (log_truncated_at, event job.log-truncated).
    int64_t max_log_bytes = int64_t{64} << 20;
    std::string checkpoint_root;           // CARVE_CHECKPOINT_DIR parent, shared by every node
    int64_t node_timeout_us = 10'000'000;  // a node silent this long is not-ready
    int64_t lost_after_us = 10'000'000;    // ... and this much longer: its jobs are lost
    // A replica whose reclaim evidence has not come this long after its job started reclaiming
    // (or after this server started, if later) has its devices quarantined, and the job ends.
    int64_t reclaim_timeout_us = 300'000'000;
    // Called by ScheduleOnce while the core plans, without the lock (tests hold a cycle there).
    std::function<void()> while_planning;
    // Called by ScheduleOnce while it holds the lock, after the timers (tests: calls that must
    // never wait for a cycle, such as token checks, are answered meanwhile).
    std::function<void()> while_locked;
    // The cycle lets go of the lock after reading this many jobs for its plan, and after
    // recording this many explanations of why jobs wait, so that calls are answered meanwhile.
    size_t plan_slice = 4096;
    size_t explain_slice = 128;
    // A cycle in which nothing was released plans only new or changed work; every job is planned
    // again at least this often (aging, maintenance windows, reservation estimates move with
    // time). 0: every cycle plans every job.
    int64_t full_cycle_every_us = 5'000'000;
    // A release lets back in, per queue and request, only as many parked jobs as the released
    // nodes take replicas of that request (the first in the queue's order); false: every parked
    // job whose request fits there (benchmarks compare the two).
    bool unpark_by_room = true;
    // Checks the cluster kept from the last cycle against one rebuilt from every record in each
    // cycle (tests), not only in full cycles due to the interval (CycleStats::cluster_drift).
    bool check_kept_cluster = false;
    // Tests: called each time the cycle has let go of the lock between slices ("plan",
    // "explain").
    std::function<void(const std::string& step)> between_slices;
  };
  using Clock = std::function<int64_t()>;  // microseconds since the epoch

  // Loads the stored state. `store` and `catalog` outlive the control plane.
  ~ControlPlane();  // control_plane_notifications.cc: where Notifier is complete
  static absl::StatusOr<std::unique_ptr<ControlPlane>> Open(Store* store, const GpuCatalog* catalog,
                                                            Options options, Clock now);

  // Tokens are stored as SHA-256 hashes. AddToken registers a bootstrap token (no expiry).
  absl::Status AddToken(const std::string& token, const std::string& name, Role role);
  absl::StatusOr<Principal> Authenticate(const std::string& token) const;
  // The credential behind the request this thread serves, set by the API server once it has
  // authenticated the caller (nullopt: none, as in the scheduler loop). Every event this thread
  // records meanwhile names it in its details: actor_token and actor_role, plus actor_tenant (a
  // tenant's user) or actor_node (a node credential).
  static void SetActing(std::optional<Principal> who);

  // Tenancy (control_plane_tenancy.cc): users, tokens with expiry, per-tenant access. Identity
  // (identity.h) keeps users and tokens; these calls authorize, check configuration and commit.
  absl::StatusOr<nlohmann::json> CreateUser(const nlohmann::json& body, const Principal& who);
  nlohmann::json ListUsers(const Principal& who) const;
  absl::StatusOr<nlohmann::json> RemoveUser(const std::string& name, const Principal& who);
  // Answers with the secret once; only its hash is stored.
  absl::StatusOr<nlohmann::json> CreateToken(const nlohmann::json& body, const Principal& who);
  nlohmann::json ListTokens(const Principal& who) const;
  absl::StatusOr<nlohmann::json> RevokeToken(const std::string& id, const Principal& who);
  // Admins: revokes the node's credential, so the join token may register the name again (the
  // node's agent joins anew after a restart).
  absl::StatusOr<nlohmann::json> RevokeNodeCredential(const std::string& node,
                                                      const Principal& who);
  // NotFound with NoJobMessage(id) unless the job exists and `who` may see it; PermissionDenied
  // when `who` sees it but may not `access` it.
  absl::Status CheckJob(int64_t id, const Principal& who, Access access) const;
  // Fills the caller's tenant and project into a job spec that names none; refuses others'.
  absl::Status AuthorizeSubmit(nlohmann::json& body, const Principal& who) const;

  // The event log's reading side (events, audit export, chain verification): reads only the
  // store, after a barrier (AwaitCommitted).
  const AuditLog& audit() const { return audit_; }

  // Leaving, or moving in (control_plane_export.cc, archive.h): a page of the stored records of
  // one exported kind (configuration, users, node modes, finished jobs, usage, utilization, queue
  // history, kit reports) with id > `after`, raw as stored: {records: [{id, doc}], next}; `next`
  // is "" after the last page. Admins only; any other kind is refused, naming those it may be.
  absl::StatusOr<nlohmann::json> ExportRecords(const std::string& kind, const std::string& after,
                                               int64_t limit, const Principal& who) const;

  // Reservations (kind: reservation; control_plane_reservations.cc): each one's phase, nodes and
  // what runs there now (the holder's jobs, borrowers, idle GPUs). Admins see every one; others
  // those of their tenant.
  nlohmann::json ListReservations(const Principal& who) const;

  // Usage and utilization (control_plane_usage.cc).
  nlohmann::json UsageRecords(int64_t since_us, int64_t until_us, const Principal& who) const;
  // Cost allocation (cost.h, control_plane_cost.cc): the usage `who` may read priced by the
  // applied prices, summed by tenant, project, queue or user; and a tenant's invoice for a month
  // ("2026-11"), one line per job attempt and price period (admins and its tenant-admins).
  absl::StatusOr<nlohmann::json> Cost(const std::string& by, int64_t since_us, int64_t until_us,
                                      const Principal& who) const;
  absl::StatusOr<nlohmann::json> Invoice(const std::string& tenant, const std::string& month,
                                         const Principal& who) const;
  absl::StatusOr<nlohmann::json> Usage(const std::string& by, int64_t since_us, int64_t until_us,
                                       const Principal& who) const;
  // With `step_us` (whole minutes) also `series`: the same matrix for each step of the range, at
  // most kMaxUtilizationSteps of them (the dashboard's charts).
  absl::StatusOr<nlohmann::json> Utilization(int64_t since_us, int64_t until_us,
                                             int64_t step_us = 0) const;
  static constexpr int64_t kMaxUtilizationSteps = 1440;
  // Integrates every GPU's state (installed, online, schedulable, busy) since the last call, and
  // samples the queues' quota ledger (queue_history.h); stores what is due in one commit.
  absl::Status AccrueUtilization();
  // Each queue's quota, use, borrowing and lending over [since, until) in steps of whole minutes
  // (0: one step; queue_history.h), for the queues `who` may see.
  absl::StatusOr<nlohmann::json> QueueHistory(int64_t since_us, int64_t until_us, int64_t step_us,
                                              const Principal& who) const;
  // Webhook notifications (notifier.h, control_plane_notifications.cc): the delivery thread runs
  // between Start and Stop (the API server's); status and deliveries for admins and the
  // notification's tenant-admins.
  void StartNotifications();
  void StopNotifications();
  absl::StatusOr<nlohmann::json> NotificationStatus(const Principal& who) const;
  absl::StatusOr<nlohmann::json> NotificationDeliveries(const std::string& name, int64_t after,
                                                        int64_t limit, const Principal& who) const;
  std::vector<NotificationConfig> NotificationConfigs() const;
  // Acceptance reports kept by the server (poc_reports.h, control_plane_poc.cc); admins only.
  // Keep checks the report against this server and keeps it with a poc.report-kept event.
  absl::StatusOr<nlohmann::json> KeepPocReport(const nlohmann::json& body, const Principal& who);
  // Up to `limit` summaries, newest first.
  absl::StatusOr<nlohmann::json> PocReports(int64_t limit, const Principal& who) const;
  absl::StatusOr<nlohmann::json> PocReport(int64_t id, const Principal& who) const;
  // Prometheus text exposition (metrics.cc).
  std::string Metrics(const Principal& who) const;

  // Jobs. Submit is idempotent per (submitter, key): a repeat returns the first job. A job that
  // no registered node could hold even with the whole cluster empty (too many GPUs, a model or
  // mode no node has, more CPU than any node) is refused with why, unless `allow_unschedulable`
  // (a cluster still growing) or no node has registered yet.
  absl::StatusOr<nlohmann::json> Submit(const nlohmann::json& body, const std::string& idem_key,
                                        const Principal& who, bool allow_unschedulable = false);
  // A finished job is read from the store (kind job.done), where it went when it ended.
  absl::StatusOr<nlohmann::json> GetJob(int64_t id) const;
  // One page of the job list, in id order: jobs `who` may read with id > `after`, at most
  // `limit`; the active ones from memory, with `all` every job (ended ones read from the store
  // page by page, so a list of a million jobs is never in memory at once). `*next` gets the id
  // to continue after, 0 when the list is done.
  // `filter` narrows it (a filter on ended states or a time reads the history as `all` does).
  absl::StatusOr<nlohmann::json> JobsPage(bool all, const JobFilter& filter, const Principal& who,
                                          int64_t after, size_t limit, int64_t* next) const;
  // Jobs held in memory: the live ones, and finished ones whose final record is still being
  // committed. Memory follows live work, not every job ever submitted.
  size_t JobsInMemory() const;
  // What the last scheduling cycle planned: full or incremental, and how many jobs.
  CycleStats LastCycle() const;
  absl::StatusOr<nlohmann::json> Explain(int64_t id) const;
  absl::StatusOr<nlohmann::json> Cancel(int64_t id, const Principal& who);
  // Cancels, in one commit, the jobs named by `ids` and, with a filter, every active job that
  // matches it, of those `who` may cancel: {cancelled: [ids], refused: [{id, reason}], more}. A
  // named job `who` may not read is refused as if it did not exist; a filter never matches one.
  // At most 10,000 per call: `more` is true when the filter matched more (call again).
  absl::StatusOr<nlohmann::json> CancelMany(const std::vector<int64_t>& ids,
                                            const std::optional<JobFilter>& filter,
                                            const Principal& who);
  // Sets a running service's (recovery policy failover) replica count: new replicas are placed
  // one by one; removed ones are stopped and reclaimed with evidence while the rest keep serving.
  absl::StatusOr<nlohmann::json> Scale(int64_t id, int replicas, const Principal& who);
  // Extends a running job's lease by its lease duration from now.
  absl::StatusOr<nlohmann::json> Renew(int64_t id, const Principal& who);

  // Agents. The join token (role agent) only registers a node that holds no credential yet, and
  // binds the node's own credential: the one whose SHA-256 the agent sends
  // (node_credential_sha256: made and saved before it asked), or else one made here and sent
  // back once (node_token). A node credential
  // (role node) registers, heartbeats and ships logs as its own node only (NodeRestriction).
  absl::StatusOr<nlohmann::json> Register(const nlohmann::json& body, const Principal& who);
  // Takes the agent's replica reports; answers with what to start and what to stop. The JSON
  // form decodes the body (agent_protocol.h: a malformed one is InvalidArgument naming the field).
  absl::StatusOr<nlohmann::json> Heartbeat(const nlohmann::json& body, const Principal& who);
  absl::StatusOr<HeartbeatAnswer> Heartbeat(const HeartbeatRequest& beat, const Principal& who);
  // Work pushed to agents: returns `node`'s work version once it is above `after` (a replica
  // was placed on the node, or one of its replicas must stop), or when `timeout_ms` passes
  // (then the version unchanged). The agent heartbeats at once when it grows. ResourceExhausted
  // when `max_waiters` agents already wait (they then poll at their heartbeat period).
  absl::StatusOr<int64_t> WaitForWork(const std::string& node, int64_t after, int64_t timeout_ms,
                                      int max_waiters, const Principal& who);
  // Raises the work version of each node with work its agent has not been told of (after a
  // scheduling cycle, a cancel).
  void SignalNodes();
  // Answers every WaitForWork now and from now on (the server is stopping).
  void EndWaits();
  // A node credential ships logs only for replicas that ran on its node (others: NotFound).
  // Idempotent by offset; bytes past options.max_log_bytes are dropped, and the first time that
  // happens for a replica its record and an event (job.log-truncated) say so.
  absl::Status AppendLog(int64_t job, int replica, int64_t offset, const std::string& bytes,
                         const Principal& who);
  // At most `limit` log bytes from `offset` (read with a seek, never the whole file); `size` gets
  // the log's full size.
  absl::StatusOr<std::string> ReadLog(int64_t job, int replica, int64_t offset, int64_t limit,
                                      int64_t* size) const;
  nlohmann::json ListNodes() const;
  // Cordon: no new work on the node. Drain: cordon, and stop its jobs so their recovery policy
  // runs them elsewhere. Uncordon undoes both.
  // With `gpu` >= 0 only that GPU: cordon keeps new work off it, drain also moves its jobs.
  absl::StatusOr<nlohmann::json> Cordon(const std::string& node, const std::string& action, int gpu,
                                        const Principal& who);
  // A planned MIG re-layout of one GPU: drain it (only it), wait for verified reclamation, have
  // the agent apply `body.layout` (["3g.40gb@0", "1g.10gb", ...]; a profile without @start is
  // placed in the first free slot), verify what the agent discovers, return the GPU to service.
  absl::StatusOr<nlohmann::json> Relayout(const std::string& node, int gpu,
                                          const nlohmann::json& body, const Principal& who);
  // A maintenance window for a node: {starts_in: "10m" (default now), lasts: "2h", reason}, or
  // {cancel: true}.
  absl::StatusOr<nlohmann::json> Maintenance(const std::string& node, const nlohmann::json& body,
                                             const Principal& who);
  // An admin declares a silent node dead: its jobs are lost (if not yet) and its devices
  // unfenced, on the admin's word that nothing of them still runs there.
  absl::StatusOr<nlohmann::json> DeclareDead(const std::string& node, const Principal& who);

  // Configuration: a list of tenant, project, queue and node (device mode) documents, applied
  // all together or not at all.
  absl::StatusOr<nlohmann::json> Apply(const nlohmann::json& docs, const Principal& who);
  nlohmann::json ListObjects(const std::string& kind) const;

  // One scheduling cycle: node liveness and timers, then the queueing cycle over every queued job
  // (quota, order, gangs, backfill, preemption; docs/scheduling.md).
  // Returns how many jobs were scheduled.
  absl::StatusOr<int> ScheduleOnce();

  bool healthy() const;
  // OK, or Unavailable saying why this server refuses work: a commit failed, memory is ahead of
  // the store, and only a restart (which reloads what the store committed) makes it whole.
  absl::Status Ready() const;

  // Per queue: its configuration, and per resource quota, used, borrowed, lent, borrowable;
  // pending and running job counts. Only the queues `who` may submit to (admins: all): another
  // tenant's queue answers as one that does not exist (L1).
  nlohmann::json QueueStatus(const Principal& who) const;

 private:
  ControlPlane(Store* store, const GpuCatalog* catalog, Options options, Clock now);
  absl::Status Load();

  // Records a change: the job's document and an event, into `batch`.
  // Stores `job` in `batch` and keeps active_ in step with its state (every change of a job's
  // state is stored through here).
  // `as_json`, when given, is job.ToJson() already made by the caller (Submit answers with it).
  void Touch(const JobRecord& job, StoreBatch& batch, const nlohmann::json* as_json = nullptr);
  // Finished jobs (control_plane_history.cc). A job in a final state is stored as kind job.done
  // (its live record, kind job, deleted) and leaves memory once that commit is in (Forget).
  // Finish: at its first final Touch, the job's usage rows, idempotency key, reclaim outcomes
  // and workload weight go to the store (the last two in the counter record "finished").
  void Finish(const JobRecord& job, StoreBatch& batch);
  // After a commit: drops the finished jobs whose final record it carried. The caller holds mu_.
  void Forget(const std::vector<int64_t>& ids);
  // The counter record, when Finish changed it since the last commit.
  void PutCounters(StoreBatch& batch);
  // Loads the live jobs, the counters and the next job id; moves finished jobs of a store
  // written before job.done existed out of kind job.
  absl::Status LoadJobs();
  // Sets `done` to a finished job's stored record; NotFound ("no job <id>") when there is none.
  absl::Status Ended(int64_t id, std::optional<JobRecord>& done) const;
  // A finished job's stored record; NotFound (NoJobMessage) when there is none.
  absl::StatusOr<JobRecord> DoneJob(int64_t id) const;
  // The finished job submitted under idempotency key `key` (scope "\n" key); NotFound if none.
  absl::StatusOr<JobRecord> FinishedByKey(const std::string& key) const;
  // A job's explanation (GET /jobs/{id}/explain). The caller holds mu_.
  nlohmann::json ExplainJob(const JobRecord& job) const;
  // Every record of `kind` with id > `after`, page by page, in id order (not under mu_).
  void ForEachStored(const std::string& kind, const std::string& after,
                     const std::function<void(const StoredRecord&)>& each) const;
  // A job's usage rows, one per attempt that held devices (only attempt `attempt`'s, if given),
  // without a range's figures: what Recover stores for the attempt that ended and Finish for
  // every attempt (kind usage, ids by UsageRowId).
  std::vector<nlohmann::json> UsageRows(const JobRecord& job, int64_t now,
                                        std::optional<int> attempt = std::nullopt) const;
  // Adds a submitted job's replica request to the placement policy's workload model.
  void CountWorkload(const JobSpec& spec);
  void Event(StoreBatch& batch, const std::string& actor, const std::string& type,
             const std::string& subject, const std::string& reason,
             nlohmann::json details = nlohmann::json::object()) const;
  // Appends under the lock, waits outside it. Once committed, writes the batch's events to the
  // operator's log (decision_log.h); a failed commit breaks the server (Broken) and is logged
  // once, at error level.
  absl::Status Durable(std::unique_lock<std::mutex>& lock, StoreBatch batch);
  // Returns once every change made before the call is in the store: a reader of the store (the
  // event log) then sees whatever a reader of memory saw (a job's end, then its event).
  void AwaitCommitted() const;
  // The answer of every call once a commit failed. The caller holds mu_.
  absl::Status Broken() const;

  void ApplyReport(JobRecord& job, int replica, const ReplicaReport& report,
                   const std::string& node, StoreBatch& batch);
  void FinishIfDone(JobRecord& job, StoreBatch& batch);
  // Records, once per replica, that its log stops at `limit` bytes (`by`: who dropped the rest).
  void LogTruncated(JobRecord& job, int replica, int64_t limit, const std::string& by,
                    const std::string& actor, StoreBatch& batch);
  // The agent's word on its copy of the replica's log: where it stopped shipping, and whether
  // the node's disk use is bounded (replica record log_disk).
  void ApplyLogReport(JobRecord& job, int replica, const ReplicaReport& report,
                      const std::string& node, StoreBatch& batch);
  // Silent nodes: not-ready after node_timeout, their jobs lost lost_after later (or, when its
  // agent fences itself, once it has surely stopped them: SilenceBeforeLoss).
  void Liveness(int64_t now, StoreBatch& batch);
  int64_t SilenceBeforeLoss(const NodeRecord& node) const;
  // A returning node whose agent stopped replicas itself while cut off: node.fenced-itself, with
  // when it stopped each and whether that was before the server declared them lost (`lost_us`).
  void FencedItself(const NodeRecord& node, int64_t lost_us, const HeartbeatRequest& beat,
                    StoreBatch& batch);
  // The node stopped heartbeating: its jobs are lost, and recovered by their policy.
  void NodeLost(NodeRecord& node, int64_t now, StoreBatch& batch);
  // Stops a running job because of the platform (`cause`); when its evidence is in it runs again
  // by its recovery policy. Returns false when it was not running.
  bool Displace(JobRecord& job, const std::string& cause, StoreBatch& batch);
  // A service's replicas that `affected` selects are replaced alone while the others keep serving.
  // Planned (a drain): each keeps running until its replacement runs. Unplanned: stopped at once
  // (`lost`: the node is gone, no evidence will come). False when the whole job must recover
  // instead: not a service, or (unplanned) no other replica serves.
  bool ReplaceReplicas(JobRecord& job, const std::function<bool(const ReplicaRecord&)>& affected,
                       const std::string& cause, bool planned, bool lost, StoreBatch& batch);
  // Displace, but a service only moves its replicas on `node` (on GPU `gpu`, on its MIG instance
  // at slice `start`; -1: any).
  bool DisplaceOn(JobRecord& job, const std::string& node, int gpu, int start,
                  const std::string& cause, bool planned, StoreBatch& batch);
  // Moves every job on `node` (GPU `gpu`, MIG instance at `start`; -1: any) by its policy: drains,
  // maintenance, re-layouts and faults. Returns the blast radius: {jobs, queues, tenants}.
  nlohmann::json MoveOff(const std::string& node, int gpu, int start, const std::string& cause,
                         bool planned, StoreBatch& batch);
  // Whether the agent must stop this replica now.
  static bool MustStop(const JobRecord& job, const ReplicaRecord& rep);
  // Retires the replicas still waiting for a node (a scale-up or a replacement not placed yet):
  // they hold nothing and never report an end, so a job that is ending would wait for them
  // forever. They keep their index: agents name replicas by it.
  static void RetireUnplaced(JobRecord& job, const std::string& why);
  // A replaced replica's evidence is in: it gives its devices back (or quarantines them).
  void Retire(JobRecord& job, int replica, StoreBatch& batch);
  // Devices whose reclaim checks failed leave the pool until an admin clears them. Returns
  // whether the replica's reclaim was verified.
  bool QuarantineFailedChecks(const JobRecord& job, const ReplicaRecord& rep, StoreBatch& batch);
  // Replicas of running services enter the core's cycle as pending work (PlanWork): the
  // one the cycle bound on `cluster`, and why one waits.
  void PlaceReplica(JobRecord& job, size_t replica, const ReplicaPlacement& p,
                    const Cluster& cluster, StoreBatch& batch);
  void ReplicaWaits(JobRecord& job, size_t replica, Waiting& w, StoreBatch& batch);
  // A placement as the replica's record: node and grants (profiles by name).
  ReplicaRecord ToReplicaRecord(const Cluster& cluster, const ReplicaPlacement& p) const;
  // Queues `job` again as a new attempt, or ends it when its policy allows no more.
  // By value: callers pass the job's own fields (job.displaced), which Recover clears.
  void Recover(JobRecord& job, std::string cause, std::string fault_ref, StoreBatch& batch);
  // The agent's view of its GPUs' health: an unhealthy device displaces only its own jobs.
  void DeviceHealth(NodeRecord& node, const std::vector<GpuReport>& gpus, StoreBatch& batch);
  // The residue the agent reports per GPU (the device's view after reclaims); a GPU with residue
  // keeps its quarantine. Events when residue appears and when it is gone.
  void Residue(NodeRecord& node, const std::vector<GpuReport>& gpus, StoreBatch& batch);
  // Refuses to clear GPU `gpu`'s quarantine (apply document `doc`) while its agent reports
  // residue there, naming the processes.
  absl::Status CheckNoResidue(size_t doc, const NodeRecord& node, int gpu) const;
  // A `kind: node` document (the `doc`th applied): checked, then applied
  // (control_plane_objects.cc).
  absl::Status CheckNodeDoc(size_t doc, const nlohmann::json& d) const;
  void ApplyNodeDoc(const nlohmann::json& d, const Principal& who, StoreBatch& batch);
  // A re-registration with another version set: node.versions-changed with old and new.
  void VersionsChanged(const NodeRecord& old, const NodeRecord& fresh, StoreBatch& batch);
  // What the agent says of its GPUs' activity: utilization, and how long each replica's GPUs
  // have been idle.
  void Activity(NodeRecord& node, const std::vector<GpuReport>& gpus, StoreBatch& batch);
  // Time-driven stops and windows: unrenewed leases, jobs idle past their queue's idle_after,
  // maintenance windows starting and ending.
  void Timers(int64_t now, StoreBatch& batch);
  // job.wait-exceeded for the queued jobs of tenants whose notifications set wait_longer_than,
  // once per threshold per wait (about once a second; control_plane_timers.cc).
  void AlertLongWaits(int64_t now, StoreBatch& batch);
  // Reservations starting (the jobs that may not stay are moved off; borrowers stay, preemptible)
  // and ending: events once per phase (control_plane_reservations.cc).
  void ReservationTimers(int64_t now, StoreBatch& batch);
  // Ids of the jobs with a replica holding devices on `node`.
  nlohmann::json JobsOn(const std::string& node) const;
  // Jobs cancelled before any replica was handed to an agent end at once.
  void CancelUnstarted(int64_t now, StoreBatch& batch);
  // InvalidArgument, with the placement's reasons, when no registered node could hold `request`
  // even with the cluster idle; OK with no node registered (control_plane_fit.cc). REQUIRES: mu_.
  absl::Status CheckFitsEmptyCluster(const JobSpec& spec, JobRequest request) const;
  // Makes fit_ match the nodes and pools now, rebuilt only when what it is built from changed;
  // whether it was rebuilt.
  bool RefreshFit(int64_t now) const;
  // Cancels one job into `batch` (a queued one ends now; a placed one is stopped by its agents),
  // or says why not (it ended, or is already stopping). REQUIRES: mu_ held.
  absl::Status CancelJob(JobRecord& job, const Principal& who, StoreBatch& batch);
  // Lets `request` onto nodes whose maintenance starts after a job of `spec` must have ended.
  // `windows`: the start of each scheduled maintenance window (ScheduledWindows).
  static void TolerateWindows(JobRequest& request, const JobSpec& spec, int64_t now,
                              const std::set<int64_t>& windows);
  std::set<int64_t> ScheduledWindows() const;
  // Moves the node's re-layouts on with what its agent reported; adds what the agent must apply
  // to `layouts`.
  void AdvanceRelayouts(NodeRecord& node, const HeartbeatRequest& report, StoreBatch& batch,
                        std::vector<LayoutOrder>& layouts);
  // A re-registering node: keeps what outlives the agent (cordons, fences, quarantines,
  // re-layouts) and reports a MIG layout that differs from the recorded one instead of adopting it.
  void CarryOver(const NodeRecord& old, NodeRecord& fresh, StoreBatch& batch);
  // The agent's view of its MIG instances' health: an unhealthy instance displaces only the jobs
  // on it and takes no new work; its GPU's other instances keep running.
  void InstanceHealth(NodeRecord& node, const std::vector<GpuReport>& gpus, StoreBatch& batch);
  static std::string EndCause(const ReplicaRecord& rep, const std::string& memory);
  // Reclaims that never report (control_plane_reclaim.cc): once options_.reclaim_timeout_us has
  // passed, each silent replica gets an `unverified` reclaim record saying why, its devices are
  // quarantined, and the job ends (or a retiring service replica is retired).
  void ReclaimTimeouts(int64_t now, StoreBatch& batch);
  // What a reclaiming job still waits for, in words (for `carve cancel`).
  std::string PendingReclaims(const JobRecord& job, int64_t now) const;
  // The end of a job's reason when its reclaim was not verified.
  static std::string UnverifiedNote(const JobRecord& job);
  AgentAssignment Assignment(const JobRecord& job, int replica) const;
  std::string LogPath(const JobRecord& job, int replica) const;
  int64_t LogSize(const JobRecord& job, int replica) const;  // bytes stored so far (0: none)
  // `answer`, once `batch` is durable; an error answer commits nothing.
  template <typename T>
  absl::StatusOr<T> Committed(std::unique_lock<std::mutex>& lock, absl::StatusOr<T> answer,
                              StoreBatch batch);
  absl::Status LoadUtilization();

  // Queues and scheduling (control_plane_queues.cc).
  // The job's queue must exist and, unless `who` is an admin, be one its tenant and project may
  // use (scheduling_grants.h); a queue it may not use is refused exactly like a missing one.
  absl::Status CheckQueueAccess(const JobSpec& spec, const Principal& who) const;
  // Checks the job's queue against its project and sets priority and preemptibility from its
  // priority class where the submission left them out; caps class, priority and
  // non-preemptibility by the project unless `who` is an admin.
  absl::Status ResolveScheduling(JobSpec& spec, const nlohmann::json& body,
                                 const Principal& who) const;
  // The scheduling cycle as plan and apply (scheduler_cycle.cc, control_plane_queues.cc). Under
  // the lock: the live state copied into `plan` (nodes, holdings, queued jobs, unplaced replicas
  // of running services, the revision of each job read). Without it: the core's decisions. Under
  // the lock again: each decision whose job and nodes are as planned is recorded (binds,
  // preemptions, explanations); the rest wait for the next cycle. Returns what was scheduled.
  absl::Status PlanCycle(std::unique_lock<std::mutex>& lock, CyclePlan& plan, StoreBatch& batch);
  // plan.cluster with every placed job's holdings, and plan.held: the last cycle's cluster (on
  // the same nodes) with the changes since, or `nodes` with every holding; `released` gets what
  // jobs gave back since the last cycle.
  void ReadHoldings(CyclePlan& plan, Cluster nodes, Released& released);
  // `fresh`: this cycle's nodes, without holdings.
  void CheckKeptCluster(CyclePlan& plan, Cluster fresh);
  // What `job`'s record says it holds, as placements on plan's nodes.
  std::vector<ReplicaPlacement> HeldBy(const CyclePlan& plan, const JobRecord& job) const;
  absl::Status PlanWork(std::unique_lock<std::mutex>& lock, CyclePlan& plan,
                        const Released& released, StoreBatch& batch);
  void Unpark(CyclePlan& plan, const Released& released);
  bool Parked(const CyclePlan& plan, const JobRecord& job, uint64_t revision) const;
  void PlanJob(CyclePlan& plan, JobRecord& job, uint64_t revision,
               const std::map<std::string, std::string>& pools, const std::set<int64_t>& windows,
               StoreBatch& batch);
  // Between two slices of a long step of the cycle: commits what the step changed so far (the
  // journal must get changes in the order memory made them), lets go of the lock so that calls
  // are answered, and takes it again.
  absl::Status Breathe(std::unique_lock<std::mutex>& lock, StoreBatch& batch,
                       const std::string& step);
  // Without the lock: plan.waits and plan.explain from the core's d.waits (compared with the
  // last cycle's, so unchanged explanations cost nothing under the lock).
  void TableWaits(CyclePlan& plan, Decisions& d) const;
  // After an applied cycle: what the next one builds on (SchedulerMemory), and its stats.
  void Remember(CyclePlan& plan, const Decisions& d);
  std::shared_ptr<const WaitTable> Publish(CyclePlan& plan) const;
  int ApplyPlan(CyclePlan& plan, const Decisions& d, StoreBatch& batch);
  // The explanations plan.explain names, each recorded if its job is as planned (the rest leave
  // plan.waits so that the next cycle compares them again), then plan.waits published. Lets go
  // of the lock between slices (`lock` is held on return).
  absl::Status RecordWaits(std::unique_lock<std::mutex>& lock, CyclePlan& plan, const Decisions& d,
                           StoreBatch& batch);
  void RecordWait(CyclePlan& plan, const WaitExplanation& core, StoreBatch& batch);
  // A queue whose quota starts holding waiting jobs (event queue.quota-holds), or, judged by a
  // cycle that ordered every waiting job, stops (queue.quota-frees): one record per crossing,
  // where each job's own record leaves the quota out (WaitExplanation::OwnSummary).
  void RecordQuotaHolds(const CyclePlan& plan, StoreBatch& batch);
  // Whether the job is as the plan read it (no change since), and each node a bind uses.
  bool Unchanged(const CyclePlan& plan, int64_t job) const;
  bool NodesUnchanged(const CyclePlan& plan, const std::vector<ReplicaPlacement>& where,
                      const ReservationView& reservations) const;
  // A planned preemption: the victim is displaced for the preemptor, which is nominated.
  void Preempt(const Preemption& p, int64_t now, StoreBatch& batch);
  // Why a queued job waits (`summary`: w.Summary(), made without the lock), recorded when it
  // changed (event job.waiting).
  void Waits(JobRecord& job, const Waiting& w, StoreBatch& batch);
  void BindJob(JobRecord& job, const std::vector<ReplicaPlacement>& replicas,
               const Cluster& cluster, bool backfilled, int64_t now, StoreBatch& batch);
  // Whether `who` may submit to `queue` from one of its projects (the check ResolveScheduling
  // makes at submission). The caller holds mu_.
  // The quota ledger charged with what every placed job holds; `running`: jobs per queue.
  QuotaLedger ChargedQueues(std::map<std::string, int>* running) const;
  void AccrueGpus(int64_t now, StoreBatch& batch);
  void AccrueQueues(int64_t now, StoreBatch& batch);
  bool QueueVisible(const std::string& queue, const Principal& who) const;
  // Queue, class, priority, preemption on both sides and, while queued, the gates that hold it.
  nlohmann::json ExplainScheduling(const JobRecord& job) const;

  Store* store_;
  const GpuCatalog* catalog_;
  Options options_;
  Clock now_;
  mutable Journal journal_;  // appended under mu_; mutable for AwaitCommitted
  mutable std::mutex mu_;
  std::mutex schedule_mu_;  // one ScheduleOnce at a time; taken before mu_
  // The jobs in memory and their indexes (job_table.h).
  JobTable jobs_;
  // Work pushed to agents (WaitForWork, SignalNodes), behind its own lock.
  WorkBoard work_;
  // Every submitted job's replica request once, first seen first, weighted by how many jobs
  // asked for it (the policy's workload model; it was rebuilt from every job each cycle).
  Workload workload_;
  absl::flat_hash_map<ReplicaRequest, size_t> workload_index_;
  std::map<std::string, NodeRecord> nodes_;
  // Users, tokens and node credentials, behind their own lock (token checks never wait for
  // mu_); written only under mu_, which is taken first.
  Identity identity_;
  int64_t poc_reports_last_ = -1;  // the last kept report's id, under mu_ (-1: not read yet)
  UtilizationLedger utilization_;
  QueueHistoryLedger queue_history_;
  std::unique_ptr<Notifier> notifier_;
  AuditLog audit_;
  std::map<std::string, int64_t> idempotency_;  // submitter + key -> job id
  // Finished jobs Forget has dropped from memory so far (written under mu_). Submit reads a
  // key's finished job from the store before it takes mu_, and again under it only if a job left
  // memory meanwhile.
  std::atomic<uint64_t> forgotten_{0};
  // Tenants, projects, queues and priority classes; its revision is raised by every apply.
  Configuration config_;
  std::map<std::string, std::map<int, std::string>> mode_overrides_;  // node -> gpu -> mode
  // node -> gpu -> the MIG instances its agent listed in its last heartbeat (memory only): what
  // exists on the device now, dynamic instances included; `carve nodes` shows it as mig_live.
  std::map<std::string, std::map<int, std::vector<DiscoveredMigInstance>>> live_instances_;
  // Why each job waited in the last applied cycle (cycle_plan.h). Replaced whole by each apply;
  // the scheduler keeps its own pointer to read it without the lock (schedule_mu_).
  std::shared_ptr<const WaitTable> waits_ = std::make_shared<WaitTable>();
  std::shared_ptr<const WaitTable> last_waits_ = waits_;
  SchedulerMemory memory_;          // the scheduler's own (under schedule_mu_)
  int64_t kept_cluster_drift_ = 0;  // under schedule_mu_ (CheckKeptCluster)
  CycleStats last_cycle_;           // under mu_
  // The registered nodes with nothing on them, kept for CheckFitsEmptyCluster (under mu_;
  // control_plane_fit.cc).
  struct FitCache;
  mutable std::shared_ptr<FitCache> fit_;
  // Per queue, how long each of the last kRecentStarts jobs to start from it had waited (from
  // submission to its first placement), under mu_; memory only (QueueStatus's percentiles).
  static constexpr size_t kRecentStarts = 1024;
  std::map<std::string, std::deque<int64_t>> recent_waits_;
  // (queue, resource) whose quota held waiting jobs when last recorded (RecordQuotaHolds).
  std::set<std::pair<std::string, std::string>> quota_held_;
  int64_t waits_alerted_us_ = 0;  // when AlertLongWaits last looked
  // Each reservation's phase as ReservationTimers last saw it (at start: as loaded, no events).
  std::map<std::string, ReservationConfig::Phase> reservation_phases_;
  std::map<int64_t, int64_t> nominated_;  // preemptors not started yet -> when they preempted
  int64_t next_job_id_ = 1;
  // Finished jobs: those still in memory until their final record is committed, and what the
  // counter record keeps of every finished job (reclaim outcomes; workload classes: a spec of
  // each, first seen first, and how many finished jobs asked for it).
  std::set<int64_t> finishing_;
  std::map<std::string, int64_t> done_reclaims_;
  std::vector<std::pair<nlohmann::json, int64_t>> done_workload_;
  absl::flat_hash_map<ReplicaRequest, size_t> done_workload_index_;
  bool counters_dirty_ = false;
  int64_t loaded_us_ = 0;  // when this server loaded the store (reclaim timeouts count from it)
  // Set (under mu_, after broken_reason_) when a commit failed; read without the lock by Ready().
  std::atomic<bool> broken_{false};
  std::string broken_reason_;  // the store's error of the first failed commit
};

std::string Sha256Hex(const std::string& data);
// `bytes` random bytes (OpenSSL's generator) as hex; empty if it has none to give.
std::string RandomHex(int bytes);
// Whether `text` is a SHA-256 digest as Sha256Hex writes it (64 lowercase hex digits).
bool IsSha256Hex(const std::string& text);
// A submission's answer for a tenant, project or queue that does not exist, and for another
// tenant's: the same bytes.
absl::Status NoSuchObject(const std::string& kind, const std::string& name);
// A usage row's id (kind usage): "<held_to_us>/<job>/<attempt>", zero-padded, so ids order rows
// by the end of their hold; UsageRowsFrom(t) is the id to list after for rows held at or after t.
std::string UsageRowId(const nlohmann::json& row);
std::string UsageRowsFrom(int64_t since_us);

}  // namespace carve

#endif  // CARVE_RUNTIME_CONTROL_PLANE_H_
