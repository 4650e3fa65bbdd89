#ifndef CARVE_CORE_SCHED_QUEUEING_QUOTA_H_
#define CARVE_CORE_SCHED_QUEUEING_QUOTA_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "core/sched/queueing/resources.h"

namespace carve {

// A queue of one pool. Per resource: `nominal` is guaranteed; a queue in a cohort may use up to
// `borrowing_limit` more than nominal from what the other members do not use, and lends at most
// `lending_limit` of its own unused nominal (the rest stays reserved for it). A resource absent
// from `nominal` is not limited by the queue; absent limits mean "no limit" (borrowing) and
// "all of nominal" (lending). A queue without a cohort can neither borrow nor lend.
struct QueueSpec {
  std::string name;
  std::string pool;  // empty: any pool
  std::string cohort;
  double weight = 1.0;  // fair-share weight, > 0
  ResourceList nominal;
  ResourceList borrowing_limit;
  ResourceList lending_limit;
};

// Why a demand does or does not fit a queue's quota: the first resource that does not fit.
struct QuotaVerdict {
  bool fits = true;
  std::string resource;
  int64_t requested = 0;
  int64_t used = 0;
  int64_t nominal = 0;
  int64_t borrowable = 0;  // what the queue could take above its nominal now
  int64_t available = 0;   // what the queue could take in all now
  // The demand fits the queue's own nominal: what blocks it is quota lent to cohort members,
  // which preemption of their borrowing jobs can take back.
  bool reclaimable = false;
};

// One queue's standing in one resource, for `carve queues`.
struct QueueResourceStatus {
  int64_t nominal = 0;
  int64_t used = 0;
  int64_t borrowed = 0;  // used above nominal
  int64_t lent = 0;      // of its nominal, what cohort members use now
  int64_t borrowable = 0;
  bool limited = false;
};

// Tracks what each queue uses against its quota, with cohort borrowing and lending. Pure and
// deterministic; queues not declared are unlimited. Not thread-safe.
class QuotaLedger {
 public:
  explicit QuotaLedger(std::vector<QueueSpec> queues);

  const QueueSpec* Find(const std::string& queue) const;
  const std::vector<QueueSpec>& queues() const { return queues_; }

  void Charge(const std::string& queue, const ResourceList& amount, int64_t sign = 1);
  // Counts the charges: a verdict taken at one revision holds for as long as it is current.
  uint64_t revision() const { return revision_; }
  const ResourceList& Used(const std::string& queue) const;

  // Whether `demand` fits the queue now (nominal, borrowing and lending limits, and what the
  // cohort has left).
  QuotaVerdict Check(const std::string& queue, const ResourceList& demand) const;
  // Whether `queue` uses more than its nominal of any resource in `charge` (or any resource it
  // holds no quota for): its jobs then run on borrowed capacity and may be reclaimed.
  bool Borrowing(const std::string& queue, const ResourceList& charge) const;
  // Whether the queue's usage plus `demand` stays within its nominal for every limited resource
  // of `demand`, with at least one limited: the queue's guarantee covers the demand.
  bool WithinNominal(const std::string& queue, const ResourceList& demand) const;
  // Whether the queue holds quota for any resource of `demand`.
  bool Guarantees(const std::string& queue, const ResourceList& demand) const;
  // Weighted dominant share: max over resources of used / capacity, divided by the weight.
  double DominantShare(const std::string& queue, const ResourceList& capacity) const;

  std::map<std::string, QueueResourceStatus> Status(const std::string& queue) const;

 private:
  int64_t Available(const QueueSpec& q, const std::string& resource) const;
  int64_t LendingLimit(const QueueSpec& q, const std::string& resource) const;
  int64_t UsedOf(const std::string& queue, const std::string& resource) const;
  // Of the cohort's lendable pool for `resource`, what members other than `except` use.
  int64_t PoolUsedByOthers(const QueueSpec& q, const std::string& resource) const;
  int64_t Pool(const QueueSpec& q, const std::string& resource) const;

  std::vector<QueueSpec> queues_;
  // Looked up for every job and victim of a cycle: hashed, not ordered (no iteration needs an
  // order); used_ keeps its values in place (Used hands out references).
  absl::flat_hash_map<std::string, size_t> index_;
  absl::flat_hash_map<std::string, std::vector<size_t>> cohorts_;
  absl::node_hash_map<std::string, ResourceList> used_;
  ResourceList empty_;
  uint64_t revision_ = 0;
};

}  // namespace carve

#endif  // CARVE_CORE_SCHED_QUEUEING_QUOTA_H_
