#include "runtime/control_plane.h"
#include "runtime/notifier.h"  // the constructor may destroy notifier_

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/decision_log.h"
#include "runtime/log.h"
#include "runtime/tenant_paths.h"

namespace carve {

using json = nlohmann::json;

absl::Status NoSuchObject(const std::string& kind, const std::string& name) {
  return absl::InvalidArgumentError(
      absl::StrCat(kind, ": no ", kind, " \"", name, "\"; `carve apply -f` one, or leave it out"));
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += absl::StrFormat("%02x", digest[i]);
  return hex;
}

std::string RandomHex(int bytes) {
  std::vector<unsigned char> buf(static_cast<size_t>(bytes));
  if (RAND_bytes(buf.data(), bytes) != 1) return "";
  std::string hex;
  for (unsigned char b : buf) hex += absl::StrFormat("%02x", b);
  return hex;
}

bool IsSha256Hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

ControlPlane::ControlPlane(Store* store, const GpuCatalog* catalog, Options options, Clock now)
    : store_(store),
      catalog_(catalog),
      options_(std::move(options)),
      now_(std::move(now)),
      journal_(store),
      jobs_(catalog),
      identity_(now_,
                [this](StoreBatch& batch, const std::string& actor, const std::string& type,
                       const std::string& subject, const std::string& reason, json details) {
                  Event(batch, actor, type, subject, reason, std::move(details));
                }),
      audit_(store, [this] { AwaitCommitted(); }),
      config_(catalog) {}

absl::StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Open(Store* store,
                                                                 const GpuCatalog* catalog,
                                                                 Options options, Clock now) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(store, catalog, std::move(options), now));
  if (absl::Status s = cp->Load(); !s.ok()) return s;
  LogInfo("loaded the store: ", cp->jobs_.size(), " active jobs (next id ", cp->next_job_id_, "), ",
          cp->nodes_.size(), " nodes, ", cp->config_.size(), " configuration objects");
  return cp;
}

absl::Status ControlPlane::Load() {
  std::error_code ec;
  std::filesystem::create_directories(options_.log_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(options_.log_dir, ": ", ec.message()));
  auto nodes = store_->Load("node");
  if (!nodes.ok()) return nodes.status();
  for (const StoredRecord& r : *nodes) {
    auto node = NodeRecord::FromJson(json::parse(r.json, nullptr, false));
    if (!node.ok()) return node.status();
    // Liveness restarts with the controller: every node gets a fresh timeout.
    node->last_heartbeat_us = now_();
    nodes_[node->name] = *std::move(node);
  }
  // After the nodes: a finished job moved out of an old store gets usage rows from them.
  if (absl::Status s = LoadJobs(); !s.ok()) return s;
  for (const char* kind : kConfigKinds) {
    auto objects = store_->Load(kind);
    if (!objects.ok()) return objects.status();
    for (const StoredRecord& r : *objects) {
      if (absl::Status s = config_.Load(kind, r.id, r.json); !s.ok()) return s;
    }
  }
  auto modes = store_->Load("node-modes");
  if (!modes.ok()) return modes.status();
  for (const StoredRecord& r : *modes) {
    mode_overrides_[r.id] = ModesFromJson(json::parse(r.json, nullptr, false));
  }
  loaded_us_ = now_();
  // Their phases as they are: a start or end while no server ran is not an event (the first
  // look enforces an active one again: control_plane_reservations.cc).
  for (const ReservationConfig& r : config_.Reservations()) {
    reservation_phases_[r.name] = r.PhaseAt(loaded_us_);
  }
  if (absl::Status s = identity_.Load(*store_); !s.ok()) return s;
  return LoadUtilization();
}

bool ControlPlane::healthy() const { return !broken_; }

// Every API call asks: without the lock, which a scheduling cycle may hold.
absl::Status ControlPlane::Ready() const {
  if (!broken_) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return Broken();
}

absl::Status ControlPlane::Broken() const {
  return absl::UnavailableError(absl::StrCat(
      "the store failed to commit (", broken_reason_,
      "); this server refuses every call until it is restarted, which reloads what the store "
      "committed"));
}

void ControlPlane::Touch(const JobRecord& job, StoreBatch& batch, const json* as_json) {
  std::string id = absl::StrFormat("%012d", job.id);
  if (IsFinal(job.state)) {
    // Puts apply before deletes: the live record goes whatever this batch wrote of it before.
    batch.puts.push_back({"job.done", id, job.ToJson().dump()});
    batch.deletes.push_back({"job", id});
    // Once per job, while memory holds it (a finished job read back from the store had it).
    if (jobs_.Contains(job.id) && finishing_.insert(job.id).second) Finish(job, batch);
  } else {
    batch.puts.push_back({"job", id, as_json != nullptr ? as_json->dump() : job.ToJson().dump()});
  }
  jobs_.Index(job);
}

void ControlPlane::CountWorkload(const JobSpec& spec) {
  auto request = ToJobRequest(spec, *catalog_);
  if (!request.ok()) return;
  auto [it, fresh] = workload_index_.try_emplace(request->replica, workload_.size());
  if (fresh) workload_.push_back({request->replica, 0});
  workload_[it->second].weight += 1;
}

namespace {

// The credential of the request this thread serves (ControlPlane::SetActing).
thread_local std::optional<Principal> acting;

}  // namespace

void ControlPlane::SetActing(std::optional<Principal> who) { acting = std::move(who); }

void ControlPlane::Event(StoreBatch& batch, const std::string& actor, const std::string& type,
                         const std::string& subject, const std::string& reason,
                         json details) const {
  StoredEvent e;
  e.time_us = now_();
  e.actor = actor;
  e.type = type;
  e.subject = subject;
  e.reason = reason;
  // Every record about a job names its tenant, project and queue (audit export and visibility).
  if (details.is_object() && !details.contains("tenant") && subject.rfind("job/", 0) == 0) {
    if (const JobRecord* job = jobs_.Find(std::atoll(subject.c_str() + 4)); job != nullptr) {
      details["tenant"] = job->spec.tenant;
      details["project"] = job->spec.project;
      details["queue"] = job->spec.queue;
    }
  }
  // Which credential acted: the token id, and the tenant or node it is bound to.
  if (acting && details.is_object() && !details.contains("actor_token")) {
    details["actor_token"] = acting->token_id;
    details["actor_role"] = Name(acting->role);
    if (!acting->tenant.empty()) details["actor_tenant"] = acting->tenant;
    if (acting->role == Role::kNode) details["actor_node"] = acting->name;
  }
  // ... and the versions of the nodes it ran on ({node: version set id}; the sets are on the node
  // records and in their node.registered / node.versions-changed events).
  if (details.is_object() && !details.contains("versions") && subject.rfind("job/", 0) == 0) {
    const JobRecord* job = jobs_.Find(std::atoll(subject.c_str() + 4));
    json versions = json::object();
    if (job != nullptr) {
      for (const ReplicaRecord& r : job->replicas) {
        if (r.versions.is_object()) versions[r.node] = r.versions.value("id", "");
      }
    }
    if (!versions.empty()) details["versions"] = versions;
  }
  e.details_json = details.dump();
  batch.events.push_back(std::move(e));
}

absl::Status ControlPlane::Durable(std::unique_lock<std::mutex>& lock, StoreBatch batch) {
  PutCounters(batch);
  std::vector<int64_t> finished;  // jobs whose final record this batch carries
  for (const StoredRecord& r : batch.puts) {
    if (r.kind == "job.done") finished.push_back(std::atoll(r.id.c_str()));
  }
  std::vector<std::pair<LogLevel, std::string>> lines = EventLogLines(batch);
  size_t records = batch.puts.size() + batch.deletes.size();
  size_t events = batch.events.size();
  std::future<absl::Status> done = journal_.Append(std::move(batch));
  lock.unlock();
  absl::Status status = done.get();
  if (!status.ok()) {
    // Memory is now ahead of the store: refuse further work until a restart reloads it.
    std::lock_guard<std::mutex> relock(mu_);
    if (!broken_) {
      broken_reason_ = std::string(status.message());
      broken_ = true;
      work_.End();  // waiting agents heartbeat now, and hear why every call is refused
      LogError("the store failed to commit (", status.message(), "): ", records, " records and ",
               events,
               " events not recorded; refusing every call (503, /readyz fails) until a restart");
    }
    return Broken();
  }
  if (!finished.empty()) {
    // In the store now: readers find them there once they leave memory.
    std::lock_guard<std::mutex> relock(mu_);
    Forget(finished);
  }
  for (const auto& [level, line] : lines) LogLine(level, line);
  return absl::OkStatus();
}

absl::StatusOr<json> ControlPlane::Submit(const json& body, const std::string& idem_key,
                                          const Principal& who, bool allow_unschedulable) {
  auto spec = JobSpecFromJson(body);
  if (!spec.ok()) return spec.status();
  if (absl::Status s = CheckSubmission(*spec); !s.ok()) return s;
  auto request = ToJobRequest(*spec, *catalog_);
  if (!request.ok()) return request.status();
  if (absl::Status s = CheckSubmissionMinimums(*spec); !s.ok()) return s;
  // Keys belong to a user id and tenant, never to a name (M1: a re-created user, or another
  // tenant's user of the same name, replayed a key and got another's job). A replay also
  // needs read access to the job; without it the key is treated as new.
  const std::string scope = absl::StrCat(who.user_id, "/", who.tenant);
  const bool keyed = !idem_key.empty() && !who.user_id.empty();
  const std::string key = keyed ? scope + "\n" + idem_key : "";
  // A finished job's key is in the store (Forget left memory). It is read before the lock: read
  // under it, every submission with a key held every call and the cycle for a store read. Jobs
  // leave memory only through Forget, which counts them: if none left between this read and the
  // lock, a key not in memory under the lock was not in memory during the read either, so the
  // read's answer still holds; otherwise it is read again under the lock.
  const uint64_t forgotten = forgotten_.load(std::memory_order_acquire);
  std::optional<absl::StatusOr<JobRecord>> finished;
  if (keyed) finished = FinishedByKey(key);
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  for (auto [kind, name] : {std::pair{"tenant", spec->tenant}, {"project", spec->project}}) {
    if (!config_.Exists(kind, name)) return NoSuchObject(kind, name);
  }
  if (absl::Status s = CheckQueueAccess(*spec, who); !s.ok()) return s;
  if (keyed) {
    auto it = idempotency_.find(key);
    std::optional<JobRecord> first;
    if (it != idempotency_.end()) {
      first = jobs_.At(it->second);
    } else {
      if (forgotten_.load(std::memory_order_relaxed) != forgotten) finished = FinishedByKey(key);
      if (finished->ok()) {
        first = **std::move(finished);
      } else if (!absl::IsNotFound(finished->status())) {
        return finished->status();
      }
    }
    if (first && Allowed(who, Access::kRead, first->spec.tenant, first->spec.project)) {
      return first->ToJson();
    }
  }
  if (absl::Status s = ResolveScheduling(*spec, body, who); !s.ok()) return s;
  if (!allow_unschedulable) {
    if (absl::Status s = CheckFitsEmptyCluster(*spec, *request); !s.ok()) return s;
  }
  JobRecord job;
  job.id = next_job_id_++;
  job.spec = *spec;
  job.submitted_by = who.name;
  job.idempotency_key = idem_key;
  if (!who.user_id.empty()) job.idempotency_scope = scope;
  job.created_us = now_();
  job.reason = "waiting for the next scheduling cycle";
  if (keyed) idempotency_[key] = job.id;
  StoreBatch batch;
  json out = job.ToJson();
  Touch(job, batch, &out);
  Event(batch, "user:" + who.name, "job.submitted", absl::StrCat("job/", job.id), "submitted",
        {{"name", job.spec.name},
         {"spec", job.spec.ToJson()},
         {"tenant", job.spec.tenant},
         {"project", job.spec.project},
         {"queue", job.spec.queue}});
  CountWorkload(job.spec);
  jobs_.Add(std::move(job));  // Touch could not index it: it was not in memory yet
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

absl::StatusOr<json> ControlPlane::GetJob(int64_t id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const JobRecord* job = jobs_.Find(id); job != nullptr) return job->ToJson();
  }
  auto done = DoneJob(id);  // not in memory: finished (committed before it left) or none
  if (absl::IsNotFound(done.status())) {
    return absl::NotFoundError(absl::StrCat("no job ", id, "; `carve ls --all` lists jobs"));
  }
  if (!done.ok()) return done.status();
  return done->ToJson();
}

absl::StatusOr<json> ControlPlane::Explain(int64_t id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const JobRecord* job = jobs_.Find(id); job != nullptr) return ExplainJob(*job);
  }
  auto done = DoneJob(id);
  if (absl::IsNotFound(done.status())) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (!done.ok()) return done.status();
  std::lock_guard<std::mutex> lock(mu_);
  return ExplainJob(*done);
}

json ControlPlane::ExplainJob(const JobRecord& job) const {
  json out = {{"id", job.id}, {"state", Name(job.state)}, {"reason", job.reason}};
  out.update(ExplainScheduling(job));
  if (job.state != JobState::kQueued) {
    json placed = json::array();
    for (const ReplicaRecord& r : job.replicas) {
      json g = json::array();
      for (const GrantRecord& gr : r.grants) g.push_back(gr.device);
      placed.push_back({{"node", r.node}, {"devices", g}});
    }
    out["placement"] = placed;
    out["scheduled_us"] = job.scheduled_us;
    out["created_us"] = job.created_us;
    out["waited_for"] = job.waited_for;  // why it waited before it was placed, if it did
  }
  return out;
}

absl::Status ControlPlane::CancelJob(JobRecord& job, const Principal& who, StoreBatch& batch) {
  const int64_t id = job.id;
  if (IsFinal(job.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended (", Name(job.state), ")"));
  }
  if (job.state == JobState::kReclaiming) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id,
                     " is already stopping: its processes have ended and its devices are being "
                     "reclaimed; nothing to cancel. Waiting for the reclaim evidence of ",
                     PendingReclaims(job, now_())));
  }
  if (job.state == JobState::kQueued) {
    job.state = JobState::kCancelled;
    job.reason = "cancelled by " + who.name + " before it was scheduled";
    job.ended_us = now_();
    Event(batch, "user:" + who.name, "job.cancelled", absl::StrCat("job/", id), job.reason);
  } else {
    job.cancel_requested = true;
    job.cancelled_by = who.name;
    job.reason = "cancel requested by " + who.name + "; stopping its processes";
    Event(batch, "user:" + who.name, "job.cancel-requested", absl::StrCat("job/", id), job.reason);
    RetireUnplaced(job, "the job was cancelled before the replica was started");
    FinishIfDone(job, batch);  // the placed ones may all have ended already
  }
  Touch(job, batch);
  return absl::OkStatus();
}

absl::StatusOr<json> ControlPlane::Cancel(int64_t id, const Principal& who) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<JobRecord> done;
  JobRecord* live = jobs_.Find(id);
  if (live == nullptr) {
    if (absl::Status s = Ended(id, done); !s.ok()) return s;
  }
  JobRecord& job = done ? *done : *live;  // a finished job only answers why not
  StoreBatch batch;
  if (absl::Status s = CancelJob(job, who, batch); !s.ok()) return s;
  json out = job.ToJson();
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

// One commit holds at most this many cancels (the lock is held while they are made); `more`
// says to ask again.
constexpr size_t kMaxCancelsPerRequest = 10000;

absl::StatusOr<json> ControlPlane::CancelMany(const std::vector<int64_t>& ids,
                                              const std::optional<JobFilter>& filter,
                                              const Principal& who) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  std::set<int64_t> chosen(ids.begin(), ids.end());
  bool more = false;  // the filter matched more than one request cancels
  if (filter) {
    // Only jobs the caller may read: a filter must not tell which other tenants' jobs exist.
    for (const auto& [id, live] : jobs_.active()) {
      const JobSpec& spec = live.job->spec;
      if (!Allowed(who, Access::kRead, spec.tenant, spec.project) || !filter->Matches(*live.job) ||
          live.job->cancel_requested || live.job->state == JobState::kReclaiming) {
        continue;  // not the caller's, not matching, or already stopping: `more` means progress
      }
      if (chosen.size() >= kMaxCancelsPerRequest) {
        more = true;
        break;
      }
      chosen.insert(id);
    }
  }
  json cancelled = json::array(), refused = json::array();
  StoreBatch batch;
  for (int64_t id : chosen) {
    JobRecord* job = jobs_.Find(id);
    if (job == nullptr || !Allowed(who, Access::kRead, job->spec.tenant, job->spec.project)) {
      // Ended and gone from memory, or never: the one-job answer reads the store for which.
      refused.push_back({{"id", id}, {"reason", absl::StrCat("no active job ", id)}});
      continue;
    }
    absl::Status s =
        Allowed(who, Access::kWrite, job->spec.tenant, job->spec.project)
            ? CancelJob(*job, who, batch)
            : absl::PermissionDeniedError(absl::StrCat("a ", Name(who.role), " only reads jobs"));
    if (s.ok()) {
      cancelled.push_back(id);
    } else {
      refused.push_back({{"id", id}, {"reason", std::string(s.message())}});
    }
  }
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return json{{"cancelled", cancelled}, {"refused", refused}, {"more", more}};
}

absl::StatusOr<json> ControlPlane::Renew(int64_t id, const Principal& who) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<JobRecord> done;
  JobRecord* live = jobs_.Find(id);
  if (live == nullptr) {
    if (absl::Status s = Ended(id, done); !s.ok()) return s;
  }
  JobRecord& job = done ? *done : *live;  // a finished job only answers why not
  if (job.spec.Lease().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " holds no lease"));
  }
  if (job.state != JobState::kRunning || job.cancel_requested) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", Name(job.state), "; only a running job's lease renews"));
  }
  job.lease_expires_us = now_() + ParseDurationUs(job.spec.Lease()).value_or(0);
  StoreBatch batch;
  Touch(job, batch);
  Event(batch, "user:" + who.name, "job.lease-renewed", absl::StrCat("job/", id),
        "lease renewed for " + job.spec.Lease(), {{"expires_us", job.lease_expires_us}});
  json out = job.ToJson();
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return out;
}

// Logs live under a directory per tenant (owner-only; see TenantDir). The caller holds mu_.
std::string ControlPlane::LogPath(const JobRecord& job, int replica) const {
  return absl::StrCat(TenantDir(options_.log_dir, job.spec.tenant), "/job-", job.id, "-", replica,
                      ".log");
}

int64_t ControlPlane::LogSize(const JobRecord& job, int replica) const {
  std::error_code ec;
  auto size = std::filesystem::file_size(LogPath(job, replica), ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

absl::Status ControlPlane::Ended(int64_t id, std::optional<JobRecord>& done) const {
  auto stored = DoneJob(id);
  if (absl::IsNotFound(stored.status())) return absl::NotFoundError(absl::StrCat("no job ", id));
  if (!stored.ok()) return stored.status();
  done = *std::move(stored);
  return absl::OkStatus();
}

namespace {

// Whether replica `r` of `job` runs on `node` now or ran there in an earlier attempt.
bool RanOn(const JobRecord& job, int r, const std::string& node) {
  if (job.replicas[static_cast<size_t>(r)].node == node) return true;
  return std::any_of(job.attempts.begin(), job.attempts.end(), [&](const AttemptRecord& a) {
    return r < static_cast<int>(a.replicas.size()) && a.replicas[r].node == node;
  });
}

}  // namespace

absl::Status ControlPlane::AppendLog(int64_t job, int replica, int64_t offset,
                                     const std::string& bytes, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kNodeCall); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  // A finished job's log may still be arriving: its record is read from the store.
  std::optional<JobRecord> done;
  JobRecord* live = jobs_.Find(job);
  if (live == nullptr) {
    // None: answered below as missing. A store that cannot be read is not "missing": on a 404
    // the agent stops shipping those bytes, so it gets the store's error and ships them again.
    if (absl::Status s = Ended(job, done); !s.ok() && !absl::IsNotFound(s)) return s;
  }
  const JobRecord* rec = live != nullptr ? live : done ? &*done : nullptr;
  // Another node's replica answers exactly like a missing one.
  if (rec == nullptr || replica < 0 || replica >= static_cast<int>(rec->replicas.size()) ||
      (who.role == Role::kNode && !RanOn(*rec, replica, who.name))) {
    return absl::NotFoundError(absl::StrCat("no replica ", replica, " of job ", job));
  }
  const ReplicaRecord& placed = rec->replicas[replica];
  // Late output of an earlier attempt on another node: the log now goes on with the current
  // attempt's, so it is dropped (answered OK, so that the agent stops resending it).
  if (who.role == Role::kNode && placed.node != who.name) return absl::OkStatus();
  std::string path = LogPath(*rec, replica);
  int64_t size = LogSize(*rec, replica);
  // The agent's offset is into this attempt's output (a file shorter than the base: bytes the
  // server lost, which the base must not make unreachable).
  offset += std::min(placed.log_base, size);
  const int64_t limit = options_.max_log_bytes;
  // Past the limit nothing is stored, so any offset there is as good as the next one.
  if (offset > size && size < limit) {
    return absl::FailedPreconditionError(absl::StrCat("log offset ", offset, " is past ", size));
  }
  const int64_t end = offset + static_cast<int64_t>(bytes.size());
  const int64_t keep = std::min(end, limit);  // the log stores bytes [0, keep)
  if (keep > size) {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out.write(bytes.data() + (size - offset), static_cast<std::streamsize>(keep - size));
    if (!out) return absl::InternalError(path + ": cannot write");
  }
  if (end <= limit || rec->replicas[replica].log_truncated_at > 0) return absl::OkStatus();
  StoreBatch batch;
  JobRecord& truncated = live != nullptr ? *live : *done;
  LogTruncated(truncated, replica, limit, "server",
               who.role == Role::kNode ? "agent:" + who.name : who.name, batch);
  return Durable(lock, std::move(batch));
}

void ControlPlane::LogTruncated(JobRecord& job, int replica, int64_t limit, const std::string& by,
                                const std::string& actor, StoreBatch& batch) {
  ReplicaRecord& rep = job.replicas[replica];
  if (rep.log_truncated_at > 0) return;
  rep.log_truncated_at = limit;
  rep.log_truncated_by = by;
  Event(batch, actor, "job.log-truncated", absl::StrCat("job/", job.id),
        absl::StrCat("replica ", replica, "'s log stops at ", limit, " bytes (the ", by,
                     "'s --max-log-bytes); later output is dropped"),
        {{"job", job.id},
         {"replica", replica},
         {"limit", limit},
         {"by", by},
         {"tenant", job.spec.tenant},  // a finished job is no longer in memory to name them
         {"project", job.spec.project},
         {"queue", job.spec.queue}});
  Touch(job, batch);
}

absl::StatusOr<std::string> ControlPlane::ReadLog(int64_t job, int replica, int64_t offset,
                                                  int64_t limit, int64_t* size) const {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<JobRecord> done;
    const JobRecord* live = jobs_.Find(job);
    if (live == nullptr) {
      auto stored = DoneJob(job);  // a finished job's record is in the store
      if (!stored.ok()) return stored.status();
      done = *std::move(stored);
    }
    const JobRecord& rec = done ? *done : *live;
    int replicas = std::max(rec.spec.replicas, static_cast<int>(rec.replicas.size()));
    if (replica < 0 || replica >= replicas) {
      return absl::NotFoundError(absl::StrCat("job ", job, " has no replica ", replica));
    }
    path = LogPath(rec, replica);
  }
  *size = 0;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::string();  // nothing shipped yet
  *size = static_cast<int64_t>(in.tellg());
  if (offset >= *size || limit <= 0) return std::string();
  std::string data(static_cast<size_t>(std::min(limit, *size - offset)), '\0');
  in.seekg(offset);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  return data;
}

json ControlPlane::ListNodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  const std::vector<PoolSelector> pools = config_.Pools();
  for (const auto& [name, node] : nodes_) {
    json n = node.ToJson();
    int64_t running = 0;                          // a queued job holds no replica
    std::map<int, std::pair<int64_t, int>> held;  // per GPU: compute held (milli-GPU), grants
    for (const JobRecord* job : jobs_.PlacedOn(name)) {
      for (const ReplicaRecord& r : job->replicas) {
        if (r.node != name) continue;
        ++running;
        if (r.state == ReplicaState::kRetired) continue;  // its devices came back
        for (const GrantRecord& g : r.grants) {
          held[g.device].first += g.compute_milli;
          ++held[g.device].second;
        }
      }
    }
    n["replicas"] = running;
    n["pool"] = PoolOf(node.labels, pools);
    for (json& g : n["gpus"]) {  // what `carve nodes` counts as in use and free
      auto at = held.find(g.value("index", -1));
      g["allocated_milli"] = at == held.end() ? 0 : at->second.first;
      g["grants"] = at == held.end() ? 0 : at->second.second;
    }
    // What the agent listed on each GPU in its last heartbeat, beside the layout on record
    // (mig_instances); absent while the node is not ready or has not reported since this server
    // started (unknown, not none).
    auto live = live_instances_.find(name);
    if (node.state == NodeRecordState::kReady && live != live_instances_.end()) {
      for (json& g : n["gpus"]) {
        if (!g.value("mig_enabled", false)) continue;
        auto at = live->second.find(g.value("index", -1));
        g["mig_live"] = MigInstancesToJson(
            at == live->second.end() ? std::vector<DiscoveredMigInstance>{} : at->second);
      }
    }
    out.push_back(n);
  }
  return out;
}

void ControlPlane::AwaitCommitted() const {
  std::future<absl::Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done = journal_.Append(StoreBatch{});
  }
  done.wait();
}

}  // namespace carve
