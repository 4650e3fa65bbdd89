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
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !IsFinal(it->second.state)) continue;
    const JobRecord& job = it->second;
    auto key = idempotency_.find(IdempotencyId(job));
    if (key != idempotency_.end() && key->second == id) idempotency_.erase(key);
    nominated_.erase(id);
    jobs_.erase(it);
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

json ControlPlane::ListJobs(bool all) const {
  std::map<int64_t, json> live;
  {
    // Memory first: a job that ends meanwhile is in the store by the time it leaves memory.
    std::lock_guard<std::mutex> lock(mu_);
    if (all) {
      for (const auto& [id, job] : jobs_) live[id] = job.ToJson();
    } else {
      for (const auto& [id, live_job] : active_) live[id] = live_job.job->ToJson();
    }
  }
  json out = json::array();
  auto next = live.begin();
  if (all) {
    ForEachStored("job.done", "", [&](const StoredRecord& r) {
      int64_t id = std::atoll(r.id.c_str());
      for (; next != live.end() && next->first < id; ++next) out.push_back(std::move(next->second));
      if (next != live.end() && next->first == id) return;  // memory's copy is as new
      out.push_back(json::parse(r.json, nullptr, false));
    });
  }
  for (; next != live.end(); ++next) out.push_back(std::move(next->second));
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
    Index(jobs_[job->id] = *std::move(job));
  }
  if (!migrate.empty()) {
    PutCounters(migrate);
    if (auto s = store_->Commit(std::move(migrate)); !s.ok()) return s.status();
  }
  if (moved > 0) LogInfo("moved ", moved, " finished jobs to their own records (job.done)");
  return absl::OkStatus();
}

}  // namespace carve
