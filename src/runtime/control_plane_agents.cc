// The agent side of the control plane: registration, heartbeats, replica reports.
#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"
#include "runtime/input_limits.h"
#include "runtime/reclaim_evidence.h"
#include "runtime/tenant_paths.h"

namespace carve {

namespace {

// Whether an exited replica ended with code 0 (not by a signal, not with an error).
bool ExitedWithZero(const ReplicaRecord& rep) { return rep.exit_code && *rep.exit_code == 0; }

// Whether a share's isolation record (one object, or a list of them) says a process bypassed MPS.
bool Bypassed(const nlohmann::json& isolation) {
  if (isolation.is_array()) {
    for (const nlohmann::json& one : isolation) {
      if (Bypassed(one)) return true;
    }
    return false;
  }
  return isolation.is_object() && isolation.contains("bypassed");
}

}  // namespace

using json = nlohmann::json;

absl::StatusOr<json> ControlPlane::Register(const json& body, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kJoin); !s.ok()) return s;
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  // What an agent registers is stored in the node record and printed: each string is bounded and
  // the node's name printable (a 3 MB string was taken whole; red team, 2026-12-02).
  if (absl::Status s = CheckStringBytes(body, "", kMaxReasonBytes); !s.ok()) return s;
  if (body.contains("name") && body["name"].is_string()) {
    absl::Status s = CheckPrintable("name", body["name"].get<std::string>(), kMaxNameBytes);
    if (!s.ok()) return s;
  }
  json with_times = body;
  // What the control plane keeps about the node's GPUs is its own, never taken from the agent
  // (versions are the agent's report, made into a set below).
  for (const char* kept : {"relayouts", "layout_mismatch", "instance_faults", "residue", "versions",
                           "agent_labels", "admin_labels"}) {
    with_times.erase(kept);
  }
  with_times["registered_us"] = now_();
  with_times["last_heartbeat_us"] = now_();
  with_times["state"] = Name(NodeRecordState::kReady);
  auto node = NodeRecord::FromJson(with_times);
  if (!node.ok()) return node.status();
  if (node->name.empty()) return absl::InvalidArgumentError("name: a node needs a name");
  if (node->labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrCat("labels: ", node->labels.size(),
                                                   " labels; a node carries at most ", kMaxLabels));
  }
  for (const auto& [key, value] : node->labels) {
    if (absl::Status s = CheckLabel(key, value); !s.ok()) return s;
  }
  node->agent_labels = node->labels;
  if (absl::Status s = ActsAs(who, node->name, "registers"); !s.ok()) return s;
  // The credential a joining agent made and saved before it asked (its SHA-256): bound as the
  // node's, so an agent that dies before it reads the answer still holds it (as a kubelet makes
  // its key before it asks for a certificate). Without one the server makes the credential.
  const std::string proposed = body.value("node_credential_sha256", "");
  if (body.contains("node_credential_sha256") && !IsSha256Hex(proposed)) {
    return absl::InvalidArgumentError(
        "node_credential_sha256: the SHA-256 (64 lowercase hex digits) of the credential the "
        "agent saved");
  }
  if (node->cpu_milli <= 0 || node->memory_mib <= 0) {
    return absl::InvalidArgumentError("cpu_milli and memory_mib must be positive");
  }
  if (absl::Status s = CheckExtraResources(node->extra, "extra"); !s.ok()) return s;
  // The agent's promise delays the loss of its jobs: bounded, so a node cannot hold them for days.
  if (node->fence_after_ms < 0 || node->fence_after_ms > kMaxFenceAfterMs ||
      node->fence_grace_ms < 0 || node->fence_grace_ms > kMaxFenceGraceMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "self_fence: after_ms must be 0 to ", kMaxFenceAfterMs, " and grace_ms 0 to ",
        kMaxFenceGraceMs, " (got ", node->fence_after_ms, " and ", node->fence_grace_ms, ")"));
  }
  for (const DiscoveredGpu& g : node->gpus) {
    auto model = catalog_->Find(g.model);
    if (!model.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("gpus[", g.index, "]: ", model.status().message()));
    if (!ParseDeliveryMode(g.mode).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("gpus[", g.index, "].mode: \"", g.mode,
                                                     "\" is not exclusive, shared or partition"));
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  // The join token: the node's credential is bound now, or was by the same join retried.
  std::optional<std::string> rejoin;
  if (who.role == Role::kAgent) {
    auto join = identity_.CheckJoin(node->name, proposed);
    if (!join.ok()) return join.status();
    rejoin = *join;
  }
  for (const auto& [index, mode] : mode_overrides_[node->name]) {
    if (index < static_cast<int>(node->gpus.size())) node->gpus[index].mode = mode;
  }
  StoreBatch batch;
  node->versions = NodeVersions(body.value("versions", json()), node->backend, node->gpus);
  node->residue.clear();
  // Quarantines, cordons, fences and recorded layouts outlive what the agent discovers.
  if (auto old = nodes_.find(node->name); old != nodes_.end()) {
    CarryOver(old->second, *node, batch);
    node->residue = old->second.residue;  // until the agent's next heartbeat says otherwise
    VersionsChanged(old->second, *node, batch);
  }
  node->labels = EffectiveLabels(node->agent_labels, node->admin_labels);
  bool known = nodes_.count(node->name) > 0;
  batch.puts.push_back({"node", node->name, node->ToJson().dump()});
  Event(batch, "agent:" + node->name, known ? "node.re-registered" : "node.registered",
        "node/" + node->name, absl::StrCat(node->gpus.size(), " GPUs via ", node->backend),
        {{"cpu_milli", node->cpu_milli},
         {"memory_mib", node->memory_mib},
         {"extra", node->extra},
         {"versions", node->versions->ToJson()}});
  json out = node->ToJson();
  if (rejoin) {
    out["node_credential"] = *rejoin;
  } else if (who.role == Role::kAgent) {  // the join token: the node gets its own credential
    std::string secret = proposed.empty() ? "carve_" + RandomHex(32) : "";
    if (proposed.empty() && secret.size() != 70) {
      return absl::InternalError("no randomness for a node credential");
    }
    out["node_credential"] = identity_.BindNodeCredential(
        node->name, proposed.empty() ? Sha256Hex(secret) : proposed, batch);
    if (!secret.empty()) out["node_token"] = secret;  // shown once
  }
  nodes_[node->name] = *std::move(node);
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

void ControlPlane::VersionsChanged(const NodeRecord& old, const NodeRecord& fresh,
                                   StoreBatch& batch) {
  const NodeVersionSet none;
  const NodeVersionSet& was = old.versions ? *old.versions : none;
  const NodeVersionSet& now = fresh.versions ? *fresh.versions : none;
  if (was.id == now.id) return;
  std::vector<std::string> what;
  // In the order and with the keys the set shows.
  static constexpr std::pair<const char*, std::string NodeVersionSet::*> kFields[] = {
      {"carve", &NodeVersionSet::carve},
      {"kernel", &NodeVersionSet::kernel},
      {"driver", &NodeVersionSet::driver},
      {"cuda_driver", &NodeVersionSet::cuda_driver},
      {"nvml", &NodeVersionSet::nvml}};
  for (const auto& [key, field] : kFields) {
    const std::string& before = was.*field;
    const std::string& after = now.*field;
    if (before != after) {
      what.push_back(absl::StrCat(key, " ", before.empty() ? "?" : before, " -> ", after));
    }
  }
  if (old.versions && was.gpus != now.gpus) what.push_back("GPU VBIOS or MIG mode");
  // Partition ids, jobs and audit records name the node, not a version: they stay traceable;
  // records made before carry the old set's id, which this event (and the old one) spells out.
  auto shown = [](const std::optional<NodeVersionSet>& v) { return v ? v->ToJson() : json(); };
  Event(batch, "agent:" + fresh.name, "node.versions-changed", "node/" + fresh.name,
        what.empty() ? "versions changed" : absl::StrJoin(what, ", "),
        {{"old", shown(old.versions)}, {"new", shown(fresh.versions)}});
}

void ControlPlane::ApplyReport(JobRecord& job, int r, const ReplicaReport& report,
                               const std::string& node, StoreBatch& batch) {
  ReplicaRecord& rep = job.replicas[r];
  auto where = nodes_.find(node);
  // The node's version set ({} and no id when it has none).
  const std::optional<NodeVersionSet> none;
  const std::optional<NodeVersionSet>& set = where == nodes_.end() ? none : where->second.versions;
  const json compact = set ? set->Compact() : json::object();
  const std::string set_id = set ? set->id : "";
  const std::optional<ReplicaState> state = report.state;
  std::string subject = absl::StrCat("job/", job.id);
  if (rep.state == ReplicaState::kPending &&
      (state == ReplicaState::kRunning || state == ReplicaState::kExited)) {
    rep.state = ReplicaState::kRunning;
    rep.pid = report.pid;
    rep.started_us = report.started_us.value_or(now_());
    rep.enforcement = report.enforcement;
    rep.versions = compact;
    if (!report.gpu_isolation.is_null()) rep.gpu_isolation = report.gpu_isolation;
    if (job.state == JobState::kRunning) {
      Event(batch, "agent:" + node, "job.replica-started", subject,
            absl::StrCat("replica ", r, " (slot ", rep.slot, ") running on ", node),
            {{"replica", r}, {"pid", rep.pid}});
    }
    if (job.state == JobState::kScheduled) {
      job.state = JobState::kRunning;
      job.started_us = rep.started_us;
      if (!job.spec.Lease().empty()) {
        job.lease_expires_us = now_() + ParseDurationUs(job.spec.Lease()).value_or(0);
      }
      job.reason = "running on " + node;
      Event(batch, "agent:" + node, "job.started", subject, job.reason,
            {{"replica", r}, {"pid", rep.pid}, {"enforcement", rep.enforcement}});
    }
    Touch(job, batch);
  }
  // What enforced a share's caps, as the agent last checked it: an MPS client seen, or a process
  // found on the GPU outside MPS, whose caps then never applied.
  // Once a bypass is on record a later report cannot take it back.
  if (!report.gpu_isolation.is_null() && rep.state != ReplicaState::kPending &&
      report.gpu_isolation != rep.gpu_isolation && !Bypassed(rep.gpu_isolation)) {
    rep.gpu_isolation = report.gpu_isolation;
    if (Bypassed(rep.gpu_isolation)) {
      Event(
          batch, "agent:" + node, "job.share-not-enforced", subject,
          absl::StrCat("replica ", r, " used its GPU outside MPS: its share's caps did not apply"),
          {{"replica", r}, {"gpu_isolation", rep.gpu_isolation}});
    }
    Touch(job, batch);
  }
  // The reclaim record may follow the exit in a later heartbeat.
  if (rep.state == ReplicaState::kExited && rep.reclaim.is_null() && report.reclaim) {
    rep.reclaim = AuditReclaim(rep, *report.reclaim, now_());
    if (rep.reclaim.is_object()) rep.reclaim["versions"] = set_id;
    rep.oom_killed = report.oom_killed;
    if (!rep.retire.empty()) Retire(job, r, batch);
    FinishIfDone(job, batch);  // a job that waited for the one just retired ends now
    Touch(job, batch);
    return;
  }
  if (rep.state == ReplicaState::kRunning && state == ReplicaState::kExited) {
    rep.state = ReplicaState::kExited;
    const ReplicaEnd end = report.end.value_or(ReplicaEnd{});
    rep.ended_us = end.ended_us.value_or(now_());
    if (end.exit_code) rep.exit_code = end.exit_code;
    if (end.signal) rep.signal = end.signal;
    rep.timed_out = end.timed_out;
    rep.oom_killed = report.oom_killed;
    if (report.reclaim) rep.reclaim = AuditReclaim(rep, *report.reclaim, now_());
    if (rep.reclaim.is_object()) rep.reclaim["versions"] = set_id;
    Event(batch, "agent:" + node, "job.replica-exited", subject,
          rep.exit_code
              ? absl::StrCat("replica ", r, " exited with code ", *rep.exit_code)
              : absl::StrCat("replica ", r, " was killed by signal ", rep.signal.value_or(0)),
          {{"replica", r}, {"timed_out", rep.timed_out}});
    // A replica that ran past max_runtime or failed ends the job: its replicas still waiting
    // for a node are not placed (and started on a fresh max_runtime) any more.
    if (rep.retire.empty() && (rep.timed_out || !ExitedWithZero(rep))) {
      RetireUnplaced(
          job, absl::StrCat("replica ", r, rep.timed_out ? " ran past max_runtime" : " failed",
                            " before it was placed"));
    }
    if (!rep.retire.empty() && !rep.reclaim.is_null()) Retire(job, r, batch);
    FinishIfDone(job, batch);
    Touch(job, batch);
  }
}

void ControlPlane::ApplyLogReport(JobRecord& job, int r, const ReplicaReport& report,
                                  const std::string& node, StoreBatch& batch) {
  ReplicaRecord& rep = job.replicas[r];
  if (report.log_truncated_at > 0) {
    LogTruncated(job, r, report.log_truncated_at, "agent", "agent:" + node, batch);
  }
  if (!report.log_disk.empty() && report.log_disk != rep.log_disk) {
    rep.log_disk = report.log_disk;
    Touch(job, batch);
  }
}

namespace {

std::string SignalName(int sig) {
  static const std::map<int, const char*> kNames = {
      {1, "SIGHUP"},   {2, "SIGINT"},   {3, "SIGQUIT"},  {4, "SIGILL"},
      {6, "SIGABRT"},  {7, "SIGBUS"},   {8, "SIGFPE"},   {9, "SIGKILL"},
      {11, "SIGSEGV"}, {13, "SIGPIPE"}, {14, "SIGALRM"}, {15, "SIGTERM"}};
  auto it = kNames.find(sig);
  return it == kNames.end() ? absl::StrCat("signal ", sig) : absl::StrCat(it->second);
}

}  // namespace

// Why a replica ended, in words that tell the user's code from the platform.
std::string ControlPlane::EndCause(const ReplicaRecord& rep, const std::string& memory) {
  if (rep.oom_killed) return "was killed by the kernel: out of memory (limit " + memory + ")";
  if (rep.exit_code) return absl::StrCat("exit code ", *rep.exit_code);
  return absl::StrCat("killed by signal ", rep.signal.value_or(0), " (",
                      SignalName(rep.signal.value_or(0)), ")");
}

void ControlPlane::FinishIfDone(JobRecord& job, StoreBatch& batch) {
  for (const ReplicaRecord& rep : job.replicas) {
    if (rep.retire.empty() && rep.state != ReplicaState::kExited) return;
    // A replica being replaced still holds its devices until its own evidence retires it: a job
    // must not end (and free them) under it.
    const bool holds = rep.state == ReplicaState::kRunning || rep.state == ReplicaState::kExited ||
                       (rep.state == ReplicaState::kPending && !rep.node.empty());
    if (!rep.retire.empty() && holds) return;
  }
  std::string subject = absl::StrCat("job/", job.id);
  if (job.state != JobState::kReclaiming) {
    job.state = JobState::kReclaiming;
    job.ended_us = now_();
    job.reason = "its processes ended; verifying that its resources came back";
    Event(batch, "scheduler", "job.reclaiming", subject, job.reason);
  }
  json statuses = json::array();
  for (const ReplicaRecord& rep : job.replicas) {
    if (!rep.retire.empty()) continue;  // replaced: its own evidence retired it
    if (rep.reclaim.is_null()) return;  // evidence still to come
    statuses.push_back(rep.reclaim.value("status", ""));
  }
  // The end is classified once every replica's evidence (exit, OOM counter) is in.
  std::vector<std::string> failures;
  bool timed_out = false;
  for (size_t r = 0; r < job.replicas.size(); ++r) {
    const ReplicaRecord& rep = job.replicas[r];
    if (!rep.retire.empty()) continue;
    timed_out |= rep.timed_out;
    if (rep.exit_code && *rep.exit_code == 0 && !rep.oom_killed) continue;
    failures.push_back(absl::StrCat("replica ", r, " ", EndCause(rep, job.spec.memory)));
  }
  if (timed_out) {
    job.outcome = JobState::kTimedOut;
    job.reason = "ran past max_runtime " + job.spec.max_runtime;
  } else if (job.cancel_requested) {
    job.outcome = JobState::kCancelled;
    job.reason = "cancelled by " + job.cancelled_by + "; every process of the job was stopped";
  } else if (!failures.empty()) {
    job.outcome = JobState::kFailed;
    job.reason = absl::StrJoin(failures, ", ");
  } else {
    job.outcome = JobState::kSucceeded;
    job.reason = "every replica exited with code 0";
  }
  // Evidence is in: devices whose checks failed leave the pool until an admin clears them.
  bool verified = true;
  for (const ReplicaRecord& rep : job.replicas) {
    if (rep.retire.empty()) verified &= QuarantineFailedChecks(job, rep, batch);
  }
  if (!job.displaced.empty() && !job.cancel_requested) {
    Recover(job, job.displaced, job.displaced, batch);
    return;
  }
  job.state = *job.outcome;
  if (!verified) job.reason += UnverifiedNote(job);
  Event(batch, "scheduler", absl::StrCat("job.", Name(job.state)), subject, job.reason,
        {{"reclaim", statuses}, {"verified", verified}});
}

AgentAssignment ControlPlane::Assignment(const JobRecord& job, int r) const {
  AgentAssignment a;
  a.job = job.id;
  a.replica = r;
  a.name = job.spec.name;
  a.kind = job.spec.kind;
  a.command = job.spec.command;
  a.env = job.spec.env;
  a.workdir = job.spec.workdir;
  a.mode = ParseDeliveryMode(job.spec.mode).value_or(DeliveryMode::kExclusive);  // checked
  a.isolation = job.spec.isolation;
  // What the cgroup enforces: the CPU limit (checked at submission) or request, the memory
  // asked; and every replica's weight under contention follows its CPU request, as the kubelet
  // sets it (with the default weight a replica asking 8 CPUs got under 2 beside a burst).
  auto request = ParseCpuMilli(job.spec.cpu);
  auto limit = job.spec.cpu_limit.empty() ? request : ParseCpuMilli(job.spec.cpu_limit);
  auto mem = ParseMemMib(job.spec.memory);
  a.cpu_milli = limit.ok() ? limit->units() : 0;
  a.cpu_request_milli = request.ok() ? request->units() : 0;
  a.memory_mib = mem.ok() ? mem->units() : 0;
  if (!job.spec.max_runtime.empty()) a.max_runtime_us = *ParseDurationUs(job.spec.max_runtime);
  a.tenant = job.spec.tenant;
  a.project = job.spec.project;
  // The agent creates ROOT/tenants/TENANT/job-ID as the tenant's user.
  a.checkpoint_root = options_.checkpoint_root;
  a.attempt = job.attempt;
  a.grants = job.replicas[r].grants;
  // The Unix user the tenant's jobs run as, when its tenant document names one (checked at apply).
  if (const TenantConfig* tenant = config_.Tenant(job.spec.tenant)) {
    a.uid = tenant->uid;
    a.gid = tenant->gid;
  }
  return a;
}

namespace {

// Whether a replica of `job` (not one being replaced) exited other than with code 0: its gang's
// other replicas stop.
bool AReplicaFailed(const JobRecord& job) {
  return std::any_of(job.replicas.begin(), job.replicas.end(), [](const ReplicaRecord& rep) {
    return rep.retire.empty() && rep.state == ReplicaState::kExited && !ExitedWithZero(rep);
  });
}

// The order to stop replica `r`, with the job's checkpoint grace when it has one.
StopOrder StopFor(const JobRecord& job, int r) {
  StopOrder stop{job.id, r, std::nullopt};
  if (!job.spec.checkpoint_grace.empty()) {
    stop.grace_ms = ParseDurationUs(job.spec.checkpoint_grace).value_or(0) / 1000;
  }
  return stop;
}

// The jobs of which the heartbeat reports a running replica.
std::set<int64_t> RunningJobs(const HeartbeatRequest& beat) {
  std::set<int64_t> running;
  for (const ReplicaReport& report : beat.replicas) {
    if (report.state == ReplicaState::kRunning) running.insert(report.job);
  }
  return running;
}

}  // namespace

absl::StatusOr<json> ControlPlane::Heartbeat(const json& body, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kNodeCall); !s.ok()) return s;
  absl::StatusOr<HeartbeatRequest> beat = HeartbeatRequest::FromJson(body);
  if (!beat.ok()) return beat.status();
  absl::StatusOr<HeartbeatAnswer> answer = Heartbeat(*beat, who);
  if (!answer.ok()) return answer.status();
  return answer->ToJson();
}

absl::StatusOr<HeartbeatAnswer> ControlPlane::Heartbeat(const HeartbeatRequest& beat,
                                                        const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kNodeCall); !s.ok()) return s;
  const std::string& name = beat.node;
  if (absl::Status s = ActsAs(who, name, "heartbeats"); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  auto node = nodes_.find(name);
  if (node == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat("node \"", name, "\" is not registered"));
  }
  StoreBatch batch;
  node->second.last_heartbeat_us = now_();
  if (node->second.state == NodeRecordState::kNotReady ||
      node->second.state == NodeRecordState::kDead) {
    FencedItself(node->second, node->second.lost_us, beat, batch);
    node->second.state = NodeRecordState::kReady;
    node->second.lost_us = 0;
    batch.puts.push_back({"node", name, node->second.ToJson().dump()});
    Event(batch, "agent:" + name, "node.ready", "node/" + name, "heartbeats resumed");
  }
  if (beat.gpus) {
    Residue(node->second, *beat.gpus, batch);
    DeviceHealth(node->second, *beat.gpus, batch);
    InstanceHealth(node->second, *beat.gpus, batch);
    Activity(node->second, *beat.gpus, batch);
    auto& live = live_instances_[name];
    live.clear();
    for (const GpuReport& g : *beat.gpus) {
      for (const MigInstanceReport& m : g.mig_instances) live[g.index].push_back(m.instance);
    }
  }
  const std::set<int64_t> running_jobs = RunningJobs(beat);
  // Fenced devices come back once the node no longer runs the lost job's processes.
  for (auto it = node->second.fenced.begin(); it != node->second.fenced.end();) {
    if (running_jobs.count(it->second)) {
      ++it;
      continue;
    }
    Event(batch, "agent:" + name, "device.unfenced",
          absl::StrCat("node/", name, "/gpu/", it->first),
          absl::StrCat("node returned and job ", it->second, "'s processes are gone"));
    it = node->second.fenced.erase(it);
    batch.puts.push_back({"node", name, node->second.ToJson().dump()});
  }
  HeartbeatAnswer answer;
  std::set<std::pair<int64_t, int>> reported;
  for (const ReplicaReport& report : beat.replicas) {
    const int64_t id = report.job;
    const int r = report.replica;
    const bool running = report.state == ReplicaState::kRunning;
    reported.insert({id, r});
    JobRecord* live = jobs_.Find(id);
    // A report of an earlier attempt (its node was lost and the job runs again, here or
    // elsewhere) is not about the replica on record: applied to it, the old process's end ended
    // the new attempt before it started.
    bool ours = live != nullptr && r >= 0 && r < static_cast<int>(live->replicas.size()) &&
                live->replicas[r].node == name &&
                (!report.attempt || *report.attempt == live->attempt);
    if (!ours) {
      if (running) answer.stop.push_back({id, r, std::nullopt});
      continue;
    }
    JobRecord& job = *live;
    // Stopped by its own agent while cut off from the server (self-fencing), before the server
    // declared it lost: the platform's doing, so its recovery policy runs it again.
    const ReplicaRecord& on_record = job.replicas[r];
    const bool handed = on_record.state == ReplicaState::kRunning ||
                        (on_record.state == ReplicaState::kPending && on_record.assigned_us > 0);
    if (report.fenced_us && handed && job.displaced.empty() && on_record.retire.empty()) {
      DisplaceOn(job, name, -1, -1,
                 absl::StrCat("node ", name, " heard nothing from the server for ",
                              node->second.fence_after_ms, " ms and its agent stopped it"),
                 false, batch);
    }
    ApplyReport(job, r, report, name, batch);
    // An exit that ended a displaced attempt requeued the job (Recover clears its replicas):
    // the replica's record is gone, and the rest of its report has nothing left to apply to.
    if (r >= static_cast<int>(job.replicas.size())) continue;
    ApplyLogReport(job, r, report, name, batch);
    if (running && (IsFinal(job.state) || job.cancel_requested || !job.displaced.empty() ||
                    AReplicaFailed(job) || MustStop(job, job.replicas[r]))) {
      answer.stop.push_back(StopFor(job, r));
    }
  }
  for (JobRecord* placed : jobs_.PlacedOn(name)) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (IsFinal(job.state) || job.cancel_requested || !job.displaced.empty()) continue;
    bool handed = false;
    for (size_t r = 0; r < job.replicas.size(); ++r) {
      ReplicaRecord& rep = job.replicas[r];
      if (rep.node == name && rep.state == ReplicaState::kPending && !reported.count({id, r})) {
        answer.assignments.push_back(Assignment(job, static_cast<int>(r)));
        if (rep.assigned_us == 0) {
          rep.assigned_us = now_();
          handed = true;
        }
      }
    }
    if (handed) Touch(job, batch);
  }
  AdvanceRelayouts(node->second, beat, batch, answer.layouts);
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return answer;
}

absl::StatusOr<int64_t> ControlPlane::WaitForWork(const std::string& node, int64_t after,
                                                  int64_t timeout_ms, int max_waiters,
                                                  const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kNodeCall); !s.ok()) return s;
  if (absl::Status s = ActsAs(who, node, "waits for work"); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (nodes_.count(node) == 0) {
      return absl::NotFoundError(absl::StrCat("node \"", node, "\" is not registered"));
    }
  }
  return work_.Wait(node, after, timeout_ms, max_waiters);  // without mu_
}

void ControlPlane::EndWaits() { work_.End(); }

void ControlPlane::SignalNodes() {
  WorkBoard::Work work;
  std::unique_lock<std::mutex> lock(mu_);
  for (const auto& [id, placed] : jobs_.placed()) {
    const JobRecord& job = *placed.job;
    bool stopping = job.cancel_requested || !job.displaced.empty();
    for (size_t r = 0; r < job.replicas.size(); ++r) {
      const ReplicaRecord& rep = job.replicas[r];
      if (rep.node.empty()) continue;
      // A replica the agent started but not yet reported is still pending here: it is told
      // to stop once its report arrives, so a stop is work for its node either way.
      bool live = rep.state == ReplicaState::kPending || rep.state == ReplicaState::kRunning;
      if (rep.state == ReplicaState::kPending && !stopping) {
        work[rep.node].insert({id, static_cast<int>(r), false});
      }
      if (live && (stopping || MustStop(job, rep))) {
        work[rep.node].insert({id, static_cast<int>(r), true});
      }
    }
  }
  // Posted under mu_: two signals must reach the board in the order they read the jobs.
  work_.Post(std::move(work));
}

}  // namespace carve
