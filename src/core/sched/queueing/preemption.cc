#include "core/sched/queueing/preemption.h"

#include <algorithm>
#include <string_view>
#include <tuple>

namespace carve {
namespace {

// Releases a set of jobs, tries the preemptor, and puts everything back.
class FitProbe {
 public:
  FitProbe(Placer& placer, QuotaLedger& ledger, const Preemptor& p,
           const std::vector<VictimCandidate>& candidates)
      : placer_(placer), ledger_(ledger), p_(p), candidates_(candidates) {}

  std::vector<ReplicaPlacement> placement;  // of the last probe that fit

  bool Fits(const std::vector<size_t>& set) {
    std::vector<size_t> gone = set;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const VictimCandidate& c = candidates_[i];
      if (c.stopping && (c.claimed_by == 0 || c.claimed_by == p_.job->id)) gone.push_back(i);
    }
    for (size_t i : gone) {
      placer_.Release(candidates_[i].job->replicas);
      if (!candidates_[i].uncharged) {
        ledger_.Charge(candidates_[i].job->queue, candidates_[i].charge, -1);
      }
    }
    bool fits = ledger_.Check(p_.job->queue, p_.demand).fits;
    // Priority preemption inside a queue with quota stays within its nominal (as in Kueue): a
    // queue that borrows takes nothing from its own jobs to borrow more, or reclaim and priority
    // preemption would undo each other.
    bool by_priority = std::any_of(set.begin(), set.end(), [&](size_t i) {
      return candidates_[i].job->queue == p_.job->queue;
    });
    if (fits && by_priority && ledger_.Guarantees(p_.job->queue, p_.demand)) {
      fits = ledger_.WithinNominal(p_.job->queue, p_.demand);
    }
    if (fits) {
      PlaceResult r = placer_.Place(p_.job->request);
      fits = r.placed;
      if (fits) placer_.Release(r.replicas);
      placement = std::move(r.replicas);
    }
    for (size_t i : gone) {
      for (const ReplicaPlacement& rp : candidates_[i].job->replicas) placer_.Apply(rp);
      if (!candidates_[i].uncharged) {
        ledger_.Charge(candidates_[i].job->queue, candidates_[i].charge, 1);
      }
    }
    return fits;
  }

 private:
  Placer& placer_;
  QuotaLedger& ledger_;
  const Preemptor& p_;
  const std::vector<VictimCandidate>& candidates_;
};

}  // namespace

VictimSet FindVictims(Placer& placer, QuotaLedger& ledger, const Preemptor& preemptor,
                      const std::vector<VictimCandidate>& candidates, int max_candidates) {
  VictimSet out;
  FitProbe probe(placer, ledger, preemptor, candidates);
  bool any_stopping =
      std::any_of(candidates.begin(), candidates.end(), [&](const VictimCandidate& c) {
        return c.stopping && (c.claimed_by == 0 || c.claimed_by == preemptor.job->id);
      });
  if (any_stopping && probe.Fits({})) {
    out.fits = true;  // the jobs already stopping are enough
    out.placement = std::move(probe.placement);
    return out;
  }
  const PendingJob& p = *preemptor.job;
  bool reclaim = ledger.WithinNominal(p.queue, preemptor.demand);
  struct Ranked {
    bool borrower;
    int64_t priority;
    int64_t started_us;
    int64_t id;
    size_t index;
    const char* kind;
  };
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const RunningJob& c = *candidates[i].job;
    if (candidates[i].stopping || !c.preemptible || c.id == JobOf(p)) continue;
    bool borrower = ledger.Borrowing(c.queue, candidates[i].charge);
    bool same_queue = c.queue == p.queue;
    bool by_priority = same_queue && c.priority < p.priority;
    bool by_reclaim = !same_queue && reclaim && borrower;
    bool by_reservation =
        !c.borrows.empty() && std::find(p.holds.begin(), p.holds.end(), c.borrows) != p.holds.end();
    if (!by_priority && !by_reclaim && !by_reservation) continue;
    const char* kind = by_reservation ? "reservation" : by_reclaim ? "reclaim" : "priority";
    ranked.push_back({borrower || by_reservation, c.priority, c.started_us, c.id, i, kind});
  }
  // Borrowers of the preemptor's reservations first (the candidates are cut to a limit next),
  // then borrowers, then lowest priority, then least progress lost (latest start), then id.
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    const bool ra = a.kind == std::string_view("reservation");
    const bool rb = b.kind == std::string_view("reservation");
    return std::make_tuple(!ra, !a.borrower, a.priority, -a.started_us, -a.id) <
           std::make_tuple(!rb, !b.borrower, b.priority, -b.started_us, -b.id);
  });
  if (static_cast<int>(ranked.size()) > max_candidates) ranked.resize(max_candidates);
  std::vector<size_t> set;
  std::vector<std::string> kinds;
  bool fits = false;
  for (const Ranked& r : ranked) {
    set.push_back(r.index);
    kinds.push_back(r.kind);
    if ((fits = probe.Fits(set))) break;
  }
  if (!fits) return out;
  // Drop every victim the preemptor fits without, latest chosen first.
  for (size_t k = set.size(); k-- > 0;) {
    std::vector<size_t> without = set;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(k));
    if (!probe.Fits(without)) continue;
    set = std::move(without);
    kinds.erase(kinds.begin() + static_cast<std::ptrdiff_t>(k));
  }
  out.fits = probe.Fits(set);  // true: it did with this set; this finds the placement again
  out.placement = std::move(probe.placement);
  out.victims = set;
  out.kinds = std::move(kinds);
  return out;
}

}  // namespace carve
