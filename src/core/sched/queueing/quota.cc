#include "core/sched/queueing/quota.h"

#include <algorithm>
#include <limits>

namespace carve {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max() / 4;

int64_t Get(const ResourceList& list, const std::string& name, int64_t fallback) {
  auto it = list.find(name);
  return it == list.end() ? fallback : it->second;
}

}  // namespace

QuotaLedger::QuotaLedger(std::vector<QueueSpec> queues) : queues_(std::move(queues)) {
  std::sort(queues_.begin(), queues_.end(),
            [](const QueueSpec& a, const QueueSpec& b) { return a.name < b.name; });
  for (size_t i = 0; i < queues_.size(); ++i) {
    index_[queues_[i].name] = i;
    if (!queues_[i].cohort.empty()) cohorts_[queues_[i].cohort].push_back(i);
  }
}

const QueueSpec* QuotaLedger::Find(const std::string& queue) const {
  auto it = index_.find(queue);
  return it == index_.end() ? nullptr : &queues_[it->second];
}

void QuotaLedger::Charge(const std::string& queue, const ResourceList& amount, int64_t sign) {
  AddResources(used_[queue], amount, sign);
  ++revision_;
}

const ResourceList& QuotaLedger::Used(const std::string& queue) const {
  auto it = used_.find(queue);
  return it == used_.end() ? empty_ : it->second;
}

int64_t QuotaLedger::UsedOf(const std::string& queue, const std::string& resource) const {
  return Get(Used(queue), resource, 0);
}

int64_t QuotaLedger::LendingLimit(const QueueSpec& q, const std::string& resource) const {
  int64_t nominal = Get(q.nominal, resource, 0);
  return std::min(nominal, Get(q.lending_limit, resource, nominal));
}

int64_t QuotaLedger::Pool(const QueueSpec& q, const std::string& resource) const {
  int64_t pool = 0;
  for (size_t m : cohorts_.at(q.cohort)) {
    if (queues_[m].nominal.count(resource)) pool += LendingLimit(queues_[m], resource);
  }
  return pool;
}

int64_t QuotaLedger::PoolUsedByOthers(const QueueSpec& q, const std::string& resource) const {
  int64_t used = 0;
  for (size_t m : cohorts_.at(q.cohort)) {
    const QueueSpec& member = queues_[m];
    if (member.name == q.name || !member.nominal.count(resource)) continue;
    int64_t guaranteed = member.nominal.at(resource) - LendingLimit(member, resource);
    used += std::max<int64_t>(0, UsedOf(member.name, resource) - guaranteed);
  }
  return used;
}

// The most `q` could add of `resource` now. Each member keeps nominal - lending_limit for itself;
// the rest of every member's nominal forms the cohort's pool, which members use beyond their
// own reserved part, each up to nominal + borrowing_limit.
int64_t QuotaLedger::Available(const QueueSpec& q, const std::string& resource) const {
  int64_t nominal = q.nominal.at(resource);
  int64_t used = UsedOf(q.name, resource);
  if (q.cohort.empty()) return std::max<int64_t>(0, nominal - used);
  int64_t ceiling = nominal + Get(q.borrowing_limit, resource, kUnlimited);
  int64_t guaranteed = nominal - LendingLimit(q, resource);
  int64_t pool_left = Pool(q, resource) - PoolUsedByOthers(q, resource);
  int64_t by_pool = std::max(guaranteed - used, pool_left + guaranteed - used);
  return std::max<int64_t>(0, std::min(ceiling - used, by_pool));
}

QuotaVerdict QuotaLedger::Check(const std::string& queue, const ResourceList& demand) const {
  QuotaVerdict v;
  const QueueSpec* q = Find(queue);
  if (q == nullptr) return v;
  for (const auto& [resource, amount] : demand) {
    if (amount <= 0 || !q->nominal.count(resource)) continue;
    int64_t available = Available(*q, resource);
    if (amount <= available) continue;
    v.fits = false;
    v.resource = resource;
    v.requested = amount;
    v.used = UsedOf(queue, resource);
    v.nominal = q->nominal.at(resource);
    v.available = available;
    v.borrowable = std::max<int64_t>(0, available - std::max<int64_t>(0, v.nominal - v.used));
    v.reclaimable = !q->cohort.empty() && v.used + amount <= v.nominal;
    return v;
  }
  return v;
}

bool QuotaLedger::Borrowing(const std::string& queue, const ResourceList& charge) const {
  const QueueSpec* q = Find(queue);
  bool guaranteed = false;
  for (const auto& [resource, amount] : charge) {
    auto nominal = q == nullptr ? ResourceList::const_iterator() : q->nominal.find(resource);
    if (amount <= 0 || q == nullptr || nominal == q->nominal.end()) continue;
    if (UsedOf(queue, resource) > nominal->second) return true;
    guaranteed = true;
  }
  // Nothing of what it holds is covered by a quota: it runs on no guarantee at all.
  return !guaranteed;
}

bool QuotaLedger::WithinNominal(const std::string& queue, const ResourceList& demand) const {
  const QueueSpec* q = Find(queue);
  if (q == nullptr) return false;
  bool covered = false;
  for (const auto& [resource, amount] : demand) {
    auto nominal = q->nominal.find(resource);
    if (amount <= 0 || nominal == q->nominal.end()) continue;
    if (UsedOf(queue, resource) + amount > nominal->second) return false;
    covered = true;
  }
  return covered;
}

bool QuotaLedger::Guarantees(const std::string& queue, const ResourceList& demand) const {
  const QueueSpec* q = Find(queue);
  if (q == nullptr) return false;
  return std::any_of(demand.begin(), demand.end(),
                     [&](const auto& d) { return d.second > 0 && q->nominal.count(d.first) > 0; });
}

double QuotaLedger::DominantShare(const std::string& queue, const ResourceList& capacity) const {
  double share = 0;
  for (const auto& [resource, amount] : Used(queue)) {
    auto cap = capacity.find(resource);
    if (cap == capacity.end() || cap->second <= 0) continue;
    share = std::max(share, static_cast<double>(amount) / static_cast<double>(cap->second));
  }
  const QueueSpec* q = Find(queue);
  double weight = q == nullptr || q->weight <= 0 ? 1.0 : q->weight;
  return share / weight;
}

std::map<std::string, QueueResourceStatus> QuotaLedger::Status(const std::string& queue) const {
  std::map<std::string, QueueResourceStatus> out;
  const QueueSpec* q = Find(queue);
  for (const auto& [resource, amount] : Used(queue)) out[resource].used = amount;
  if (q == nullptr) return out;
  for (const auto& [resource, nominal] : q->nominal) {
    QueueResourceStatus& s = out[resource];
    s.limited = true;
    s.nominal = nominal;
    s.used = UsedOf(queue, resource);
    s.borrowed = std::max<int64_t>(0, s.used - nominal);
    s.borrowable =
        std::max<int64_t>(0, Available(*q, resource) - std::max<int64_t>(0, nominal - s.used));
    if (q->cohort.empty()) continue;
    // What the cohort borrows is attributed to lenders in name order, each up to its unused
    // lendable quota: deterministic, and the sum of `lent` equals the sum of `borrowed`.
    int64_t borrowed = 0;
    for (size_t m : cohorts_.at(q->cohort)) {
      const QueueSpec& member = queues_[m];
      auto n = member.nominal.find(resource);
      if (n != member.nominal.end()) {
        borrowed += std::max<int64_t>(0, UsedOf(member.name, resource) - n->second);
      }
    }
    for (size_t m : cohorts_.at(q->cohort)) {
      const QueueSpec& member = queues_[m];
      if (!member.nominal.count(resource)) continue;
      int64_t unused =
          std::max<int64_t>(0, member.nominal.at(resource) - UsedOf(member.name, resource));
      int64_t lendable = std::min(unused, LendingLimit(member, resource));
      int64_t lent = std::min(lendable, borrowed);
      borrowed -= lent;
      if (member.name == queue) s.lent = lent;
    }
  }
  return out;
}

}  // namespace carve
