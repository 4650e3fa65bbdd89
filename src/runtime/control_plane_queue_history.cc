// Each queue's quota, use, borrowing and lending over time (queue_history.h): sampled with the
// utilization tick, read back per step.
#include <set>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/log.h"
#include "runtime/queue_history.h"

namespace carve {

using json = nlohmann::json;

void ControlPlane::AccrueQueues(int64_t now, StoreBatch& batch) {
  QueueHistoryLedger& h = queue_history_;
  if (h.last_us == 0) {  // the first sample since the server started: its minute goes on
    h.last_us = h.persisted_us = now;
    const int64_t open = now - now % QueueHistoryLedger::kBucketUs;
    auto stored = store_->Get(QueueHistoryLedger::kKind, QueueHistoryLedger::Id(open));
    if (!stored.ok()) {
      LogWarn("queue history: the minute before the restart is not read: ",
              stored.status().message());
    } else if (*stored) {
      auto cells = QueueHistoryLedger::CellsFromJson(json::parse((*stored)->json, nullptr, false));
      if (cells.ok()) h.buckets[open] = *std::move(cells);
    }
    return;
  }
  if (now - h.last_us < QueueHistoryLedger::kSampleUs) return;
  std::set<std::string> names = {"default"};
  std::map<std::string, int> running;
  QuotaLedger ledger = ChargedQueues(&running);
  for (const QueueSpec& q : ledger.queues()) names.insert(q.name);
  for (const auto& [name, n] : running) names.insert(name);
  for (const std::string& name : names) {
    for (const auto& [resource, status] : ledger.Status(name)) {
      h.Accrue({name, resource}, h.last_us, now, status);
    }
  }
  h.last_us = now;
  h.Persist(now, batch);
}

absl::StatusOr<json> ControlPlane::QueueHistory(int64_t since_us, int64_t until_us, int64_t step_us,
                                                const Principal& who) const {
  constexpr int64_t kB = QueueHistoryLedger::kBucketUs;
  if (step_us < 0 || step_us % kB != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_us: ", step_us, " is not a whole number of minutes (", kB, " us)"));
  }
  std::map<int64_t, QueueHistoryLedger::Cells> buckets;
  int64_t from = 0, to = 0, stored_through = 0;
  {
    // Memory first: a bucket that leaves memory is in the store by the time AwaitCommitted ends.
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = now_();
    if (until_us <= 0 || until_us > now) until_us = now;
    if (since_us <= 0) since_us = until_us - 24 * 3600 * 1'000'000LL;
    from = since_us - since_us % kB;
    to = until_us % kB == 0 ? until_us : until_us - until_us % kB + kB;
    stored_through = queue_history_.persisted_us;
    for (auto it = queue_history_.buckets.lower_bound(from);
         it != queue_history_.buckets.end() && it->first < to; ++it) {
      buckets.insert(*it);
    }
  }
  constexpr int64_t kMaxRangeUs = 90LL * 24 * 3600 * 1'000'000;
  if (to - from > kMaxRangeUs) {
    return absl::InvalidArgumentError(
        "since_us..until_us: the range is longer than 90 days; ask for less");
  }
  if (step_us == 0) step_us = std::max<int64_t>(to - from, kB);
  // (span + step - 1 would overflow for a huge step)
  const int64_t pieces = QueueSteps(from, to, step_us);
  if (pieces > kMaxUtilizationSteps) {
    return absl::InvalidArgumentError(absl::StrCat("step_us: ", step_us, " cuts the range into ",
                                                   pieces, " pieces; at most ",
                                                   kMaxUtilizationSteps));
  }
  AwaitCommitted();
  auto stored = store_->List(QueueHistoryLedger::kKind, QueueHistoryLedger::Id(from - 1),
                             (to - from) / kB + 1);
  if (!stored.ok()) return stored.status();
  for (const StoredRecord& r : *stored) {
    json doc = json::parse(r.json, nullptr, false);
    const int64_t bucket = doc.is_object() ? doc.value("bucket_us", int64_t{-1}) : -1;
    if (bucket >= to) break;
    auto cells = QueueHistoryLedger::CellsFromJson(doc);
    if (!cells.ok())
      return absl::DataLossError(
          absl::StrCat("queue_usage ", r.id, ": ", cells.status().message()));
    buckets.emplace(bucket, *std::move(cells));  // memory's copy, newer, stays
  }
  std::set<std::string> visible;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [bucket, cells] : buckets) {
      for (const auto& [key, cell] : cells) {
        if (QueueVisible(key.first, who)) visible.insert(key.first);
      }
    }
  }
  json series = QueueSeries(buckets, from, to, step_us,
                            [&](const std::string& queue) { return visible.count(queue) > 0; });
  // What a restart keeps: samples up to here are in the store.
  series["stored_through_us"] = stored_through;
  return series;
}

}  // namespace carve
