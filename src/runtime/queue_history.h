// Each queue's quota, use, borrowing and lending over time (the dashboard's queues page; GET
// /api/v1/queues/history). The control plane samples every queue's quota ledger (what its placed
// jobs hold against it) at most every kSampleUs and attributes the time since the previous
// sample to what it sees, per queue and resource, into one-minute buckets stored as kind
// "queue_usage" (id: the bucket's start), as utilization.h does for GPUs. A step's figure is the
// time-weighted average over the time sampled in it, in the resource's own unit.
#ifndef CARVE_RUNTIME_QUEUE_HISTORY_H_
#define CARVE_RUNTIME_QUEUE_HISTORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/sched/queueing/quota.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"

namespace carve {

// Integrals over the time sampled: each figure in resource units times seconds.
struct QueueCell {
  double seconds = 0;
  double used = 0;
  double quota = 0;
  double borrowed = 0;
  double lent = 0;
  bool limited = false;  // the queue had a quota for the resource at some sample

  void Add(const QueueCell& o);
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(QueueCell, seconds, used, quota, borrowed, lent,
                                                limited)

struct QueueHistoryLedger {
  static constexpr int64_t kBucketUs = 60'000'000;
  static constexpr int64_t kSampleUs = 5'000'000;
  static constexpr int64_t kPersistUs = 10'000'000;
  static constexpr char kKind[] = "queue_usage";
  using Key = std::pair<std::string, std::string>;  // queue, resource
  using Cells = std::map<Key, QueueCell>;

  int64_t last_us = 0;               // the last sample (0: none since the server started)
  int64_t persisted_us = 0;          // the last time buckets went to the store
  std::map<int64_t, Cells> buckets;  // the open bucket, and closed ones until stored
  std::set<int64_t> dirty;

  // Adds `status` held over [from, to) into the buckets it covers.
  void Accrue(const Key& key, int64_t from, int64_t to, const QueueResourceStatus& status);
  // When due (a bucket closed, or kPersistUs since the last time): puts the changed buckets into
  // `batch` and forgets the closed ones (they are read from the store from then on).
  void Persist(int64_t now, StoreBatch& batch);
  static std::string Id(int64_t bucket);
  static nlohmann::json BucketJson(int64_t bucket, const Cells& cells);
  static absl::StatusOr<Cells> CellsFromJson(const nlohmann::json& j);
};

// How many steps of `step` cut [from, to) (the last may be shorter), without overflow.
int64_t QueueSteps(int64_t from, int64_t to, int64_t step);

// The series of [from, to) in steps of `step` (from, to and step whole buckets): per queue that
// `visible` lets through and per resource, each step's average used, quota, borrowed and lent
// (null where nothing was sampled; quota, borrowed and lent only for a limited resource).
nlohmann::json QueueSeries(const std::map<int64_t, QueueHistoryLedger::Cells>& buckets,
                           int64_t from, int64_t to, int64_t step,
                           const std::function<bool(const std::string&)>& visible);

// A resource amount in its own unit ("GPUs", "cores", "MiB", "instances") from ledger units.
double NaturalAmount(const std::string& resource, double units);
std::string NaturalUnit(const std::string& resource);

}  // namespace carve

#endif  // CARVE_RUNTIME_QUEUE_HISTORY_H_
