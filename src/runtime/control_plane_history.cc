// Finished jobs: written to the store (kind job.done) when they end and dropped from memory once
// that commit is in, so memory, restarts and the periodic work follow live work. Reads of a
// finished job (GET /jobs/{id}, `carve ls --all`, usage) go to the store.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/control_plane.h"
#include "runtime/log.h"
#include "runtime/tenancy.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr const char* kCounters = "finished";  // the counter record's id
constexpr int64_t kPage = 10000;

std::string DoneId(int64_t id) { return absl::StrFormat("%012d", id); }

std::string IdempotencyId(const JobRecord& job) {
  return job.idempotency_scope + "\n" + job.idempotency_key;
}

// Decoding is most of a restart's time (JSON parsing, about 20 us a job): the records are decoded
// on every core, each thread a contiguous share, in order.
std::vector<absl::StatusOr<JobRecord>> DecodeJobs(const std::vector<StoredRecord>& records) {
  std::vector<absl::StatusOr<JobRecord>> out(records.size());
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  const size_t share = (records.size() + threads - 1) / threads;
  auto decode = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      out[i] = JobRecord::FromJson(json::parse(records[i].json, nullptr, false));
    }
  };
  if (records.size() < 1000) {
    decode(0, records.size());
    return out;
  }
  std::vector<std::thread> workers;
  for (size_t from = 0; from < records.size(); from += share) {
    workers.emplace_back(decode, from, std::min(records.size(), from + share));
  }
  for (std::thread& t : workers) t.join();
  return out;
}

}  // namespace

void ControlPlane::Finish(const JobRecord& job, StoreBatch& batch) {
  for (const json& row : UsageRows(job, now_())) {
    batch.puts.push_back({"usage", UsageRowId(row), row.dump()});
  }
  if (!job.idempotency_key.empty() && !job.idempotency_scope.empty()) {
    batch.puts.push_back({"idempotency", IdempotencyId(job), json{{"job", job.id}}.dump()});
  }
  for (const ReplicaRecord& r : job.replicas) {
    if (!r.reclaim.is_null()) ++done_reclaims_[r.reclaim.value("status", "unknown")];
  }
  if (auto request = ToJobRequest(job.spec, *catalog_); request.ok()) {
    auto [it, fresh] = done_workload_index_.try_emplace(request->replica, done_workload_.size());
    if (fresh) done_workload_.push_back({job.spec.ToJson(), 0});
    done_workload_[it->second].second += 1;
  }
  counters_dirty_ = true;
}

void ControlPlane::PutCounters(StoreBatch& batch) {
  if (!counters_dirty_) return;
  json workload = json::array();
  for (const auto& [spec, weight] : done_workload_) {
    workload.push_back({{"spec", spec}, {"weight", weight}});
  }
  batch.puts.push_back(
      {"counter", kCounters, json{{"reclaims", done_reclaims_}, {"workload", workload}}.dump()});
  counters_dirty_ = false;
}

void ControlPlane::Forget(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    finishing_.erase(id);
    const JobRecord* job = jobs_.Find(id);
    if (job == nullptr || !IsFinal(job->state)) continue;
    auto key = idempotency_.find(IdempotencyId(*job));
    if (key != idempotency_.end() && key->second == id) idempotency_.erase(key);
    nominated_.erase(id);
    jobs_.Erase(id);
    forgotten_.fetch_add(1, std::memory_order_release);  // Submit: a key may have left memory
  }
}

size_t ControlPlane::JobsInMemory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

absl::StatusOr<JobRecord> ControlPlane::DoneJob(int64_t id) const {
  auto stored = store_->Get("job.done", DoneId(id));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return absl::NotFoundError(NoJobMessage(id));
  return JobRecord::FromJson(json::parse((*stored)->json, nullptr, false));
}

absl::StatusOr<JobRecord> ControlPlane::FinishedByKey(const std::string& key) const {
  auto stored = store_->Get("idempotency", key);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return absl::NotFoundError("no job with this idempotency key");
  json r = json::parse((*stored)->json, nullptr, false);
  return DoneJob(r.is_object() ? r.value("job", int64_t{0}) : 0);
}

void ControlPlane::ForEachStored(const std::string& kind, const std::string& after,
                                 const std::function<void(const StoredRecord&)>& each) const {
  std::string from = after;
  for (;;) {
    auto page = store_->List(kind, from, kPage);
    if (!page.ok()) {
      LogError("cannot read ", kind, " records from the store: ", page.status().message());
      return;
    }
    for (const StoredRecord& r : *page) each(r);
    if (static_cast<int64_t>(page->size()) < kPage) return;
    from = page->back().id;
  }
}

absl::StatusOr<json> ControlPlane::JobsPage(bool all, const JobFilter& filter, const Principal& who,
                                            int64_t after, size_t limit, int64_t* next) const {
  all = all || filter.WantsEnded() || filter.since_us > 0;
  auto wanted = [&](const JobRecord& job) {
    return Allowed(who, Access::kRead, job.spec.tenant, job.spec.project) && filter.Matches(job);
  };
  limit = std::max<size_t>(limit, 1);
  std::map<int64_t, json> page;
  {
    // Memory first: a job that ends meanwhile is in the store by the time it leaves memory.
    std::lock_guard<std::mutex> lock(mu_);
    auto take = [&](const JobRecord& job) {
      if (wanted(job)) page.emplace(job.id, ForReader(job.ToJson(), who));
      return page.size() < limit;
    };
    if (all) {
      const auto& jobs = jobs_.all();
      for (auto it = jobs.upper_bound(after); it != jobs.end() && take(it->second); ++it) {
      }
    } else {
      const auto& active = jobs_.active();
      for (auto it = active.upper_bound(after); it != active.end() && take(*it->second.job); ++it) {
      }
    }
  }
  // The ended jobs in the store, merged in id order, until the page is full of ids below theirs.
  for (std::string from = DoneId(after); all;) {
    auto stored = store_->List("job.done", from, kPage);
    if (!stored.ok()) return stored.status();
    for (const StoredRecord& r : *stored) {
      int64_t id = std::atoll(r.id.c_str());
      if (page.size() >= limit && id > page.rbegin()->first) break;
      if (page.count(id)) continue;  // memory's copy is as new
      json job = json::parse(r.json, nullptr, false);
      if (!job.is_object() || !job["spec"].is_object()) continue;
      const json& spec = job["spec"];
      if (!Allowed(who, Access::kRead, spec.value("tenant", "default"),
                   spec.value("project", "default"))) {
        continue;
      }
      if (!filter.empty()) {  // typed only when a filter needs it: `ls --all` reads millions
        auto record = JobRecord::FromJson(job);
        if (!record.ok() || !filter.Matches(*record)) continue;
      }
      page.emplace(id, ForReader(std::move(job), who));
      if (page.size() > limit) page.erase(std::prev(page.end()));
    }
    bool full = page.size() >= limit && !stored->empty() &&
                std::atoll(stored->back().id.c_str()) > page.rbegin()->first;
    if (full || static_cast<int64_t>(stored->size()) < kPage) break;
    from = stored->back().id;
  }
  *next = page.size() >= limit ? page.rbegin()->first : 0;
  json out = json::array();
  for (auto& [id, job] : page) out.push_back(std::move(job));
  return out;
}

absl::Status ControlPlane::LoadJobs() {
  auto counters = store_->Get("counter", kCounters);
  if (!counters.ok()) return counters.status();
  if (counters->has_value()) {
    json c = json::parse((*counters)->json, nullptr, false);
    if (c.is_object()) {
      done_reclaims_ = c.value("reclaims", std::map<std::string, int64_t>());
      for (const json& w : c.value("workload", json::array())) {
        auto spec = JobSpecFromJson(w.value("spec", json::object()));
        if (!spec.ok()) continue;
        auto request = ToJobRequest(*spec, *catalog_);
        if (!request.ok()) continue;
        int64_t weight = w.value("weight", int64_t{0});
        done_workload_index_.try_emplace(request->replica, done_workload_.size());
        done_workload_.push_back({w["spec"], weight});
        auto [it, fresh] = workload_index_.try_emplace(request->replica, workload_.size());
        if (fresh) workload_.push_back({request->replica, 0});
        workload_[it->second].weight += static_cast<double>(weight);
      }
    }
  }
  auto last = store_->LastId("job.done");
  if (!last.ok()) return last.status();
  if (last->has_value()) next_job_id_ = std::atoll((*last)->c_str()) + 1;
  auto jobs = store_->Load("job");
  if (!jobs.ok()) return jobs.status();
  // A store written before finished jobs had their own kind keeps them as jobs: they move to
  // job.done now, a page at a time (each page whole, with the counters it changes).
  StoreBatch migrate;
  int64_t moved = 0;
  std::vector<absl::StatusOr<JobRecord>> decoded = DecodeJobs(*jobs);
  for (size_t i = 0; i < jobs->size(); ++i) {
    const StoredRecord& r = (*jobs)[i];
    absl::StatusOr<JobRecord>& job = decoded[i];
    if (!job.ok()) return job.status();
    next_job_id_ = std::max(next_job_id_, job->id + 1);
    if (IsFinal(job->state)) {
      migrate.puts.push_back({"job.done", DoneId(job->id), r.json});
      migrate.deletes.push_back({"job", r.id});
      Finish(*job, migrate);
      CountWorkload(job->spec);  // counted at submission by the server that ran it
      if (++moved % kPage == 0) {
        PutCounters(migrate);
        if (auto s = store_->Commit(std::exchange(migrate, {})); !s.ok()) return s.status();
      }
      continue;
    }
    if (!job->idempotency_key.empty() && !job->idempotency_scope.empty()) {
      idempotency_[IdempotencyId(*job)] = job->id;
    }
    CountWorkload(job->spec);
    // Earlier attempts' usage rows (written when each ended since they have been; a store from
    // before has them only at the job's end). Puts of the same rows: idempotent.
    for (const AttemptRecord& a : job->attempts) {
      for (const json& row : UsageRows(*job, now_(), a.attempt)) {
        migrate.puts.push_back({"usage", UsageRowId(row), row.dump()});
      }
    }
    jobs_.Add(*std::move(job));
  }
  if (!migrate.empty()) {
    PutCounters(migrate);
    if (auto s = store_->Commit(std::move(migrate)); !s.ok()) return s.status();
  }
  if (moved > 0) LogInfo("moved ", moved, " finished jobs to their own records (job.done)");
  return absl::OkStatus();
}

}  // namespace carve
