#include "core/sched/queueing/cycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixture.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_queueing::Bound;
using testing_queueing::Gpus;
using testing_queueing::H200Cluster;
using testing_queueing::OneCycle;
using testing_queueing::Pending;
using testing_queueing::Queue;
using testing_queueing::WaitOf;

constexpr int64_t kMinute = 60'000'000;

// Places `request` for a running job on the cluster and describes it for the cycle.
RunningJob Running(Cluster& cluster, int64_t id, const std::string& queue, JobRequest request,
                   int64_t priority = 100, int64_t started_us = 0, int64_t max_runtime_us = 0) {
  auto policy = *MakePolicy("first-fit", {});
  Placer placer(&cluster, policy.get(), 0);
  PlaceResult r = placer.Place(request);
  EXPECT_TRUE(r.placed);
  RunningJob j;
  j.id = id;
  j.queue = queue;
  j.priority = priority;
  j.started_us = started_us;
  j.max_runtime_us = max_runtime_us;
  j.request = std::move(request);
  j.replicas = r.replicas;
  return j;
}

TEST(Order, PriorityThenFairShareThenAgeThenId) {
  OrderKey high{0, 200, 0.9, 50, 9}, low{0, 100, 0.0, 0, 1};
  EXPECT_TRUE(Before(high, low));
  EXPECT_EQ(WhyBefore(high, low), "priority 200 > 100");
  OrderKey poor{0, 100, 0.1, 50, 9}, rich{0, 100, 0.3, 0, 1};
  EXPECT_TRUE(Before(poor, rich));
  EXPECT_EQ(WhyBefore(poor, rich), "queue share 0.100 < 0.300");
  OrderKey old{0, 100, 0.1, 1, 9}, young{0, 100, 0.1, 2, 1};
  EXPECT_TRUE(Before(old, young));
  EXPECT_TRUE(Before({0, 100, 0.1, 1, 1}, {0, 100, 0.1, 1, 2}));
  EXPECT_FALSE(Before({0, 100, 0.1, 1, 1}, {0, 100, 0.1, 1, 1}));
}

TEST(Order, AgingRaisesAWaitingJob) {
  AgingOptions aging{kMinute, 1};
  EXPECT_EQ(EffectivePriority(0, 0, 0, aging), 0);
  EXPECT_EQ(EffectivePriority(0, 0, 150 * kMinute, aging), 150);
  EXPECT_EQ(EffectivePriority(5, 10, 5, aging), 5);  // clock skew: never below base
}

TEST(Cycle, FairShareAlternatesBetweenQueuesOfEqualPriority) {
  Cluster cluster = H200Cluster(1, 4);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "", 8), Queue("b", "", 8)};
  for (int i = 1; i <= 4; ++i) c.input.pending.push_back(Pending(i, "a", Gpus(1)));
  c.input.pending.push_back(Pending(5, "b", Gpus(1)));
  c.input.pending.push_back(Pending(6, "b", Gpus(1)));
  Decisions d = c.Run();
  std::vector<int64_t> bound;
  for (const Bind& b : d.binds) bound.push_back(b.job);
  EXPECT_THAT(bound, ElementsAre(1, 5, 2, 6));
}

TEST(Cycle, QuotaGateExplainsUsedNominalAndBorrowable) {
  Cluster cluster = H200Cluster(2, 8);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "", 4)};
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(3)));
  c.input.pending.push_back(Pending(2, "a", Gpus(2)));
  Decisions d = c.Run();
  const WaitExplanation* w = WaitOf(d, 2);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->gates.size(), 1u);
  const GateFacts& g = w->gates[0];
  EXPECT_EQ(g.gate, Gate::kQuota);
  EXPECT_EQ(g.queue, "a");
  EXPECT_EQ(g.quota.resource, "gpus");
  EXPECT_EQ(g.quota.used, 3000);
  EXPECT_EQ(g.quota.nominal, 4000);
  EXPECT_EQ(g.quota.requested, 2000);
  EXPECT_EQ(g.quota.borrowable, 0);
  EXPECT_EQ(g.summary, "queue a: gpus 3/4 used, needs 2, 0 borrowable");
  // The quota is all that holds it: a job's own reason keeps it (OwnSignature).
  EXPECT_EQ(w->OwnSignature(), w->Signature());
  EXPECT_EQ(w->OwnSummary(), g.summary);
  EXPECT_EQ(w->fix,
            "needs 1 more gpus in queue a: wait for its jobs to end, or raise its nominal quota "
            "or borrowing limit");
}

// A queue crossing its quota adds or removes the quota gate of every waiting job of the queue at
// once; what a job's own record keeps (OwnSignature) must not move with it, or each crossing
// rewrites thousands of records.
TEST(Cycle, AJobsOwnReasonLeavesOutTheQuotaItsQueueMovesAtOnce) {
  auto wait_with_running = [](bool running) {
    Cluster cluster = H200Cluster(1, 4);
    OneCycle c(&cluster);
    c.input.queues = {Queue("a", "", 8)};
    if (running) c.input.running.push_back(Running(cluster, 1, "a", Gpus(1)));
    c.input.pending.push_back(Pending(2, "a", Gpus(8)));  // no node has 8
    Decisions d = c.Run();
    const WaitExplanation* w = WaitOf(d, 2);
    return w == nullptr ? WaitExplanation{} : *w;
  };
  WaitExplanation over = wait_with_running(true), under = wait_with_running(false);
  ASSERT_EQ(over.gates.size(), 2u);
  EXPECT_EQ(over.gates[0].gate, Gate::kQuota);
  ASSERT_EQ(under.gates.size(), 1u);
  EXPECT_EQ(under.gates[0].gate, Gate::kPlacement);
  EXPECT_NE(over.Signature(), under.Signature());
  EXPECT_EQ(over.OwnSignature(), under.OwnSignature());
  EXPECT_EQ(over.OwnSummary(), under.Summary());
}

TEST(Cycle, GangOfEightIsNeverPartiallyPlaced) {
  Cluster cluster = H200Cluster(5, 2);  // 10 GPUs on five nodes: 5 replicas of 2 fit
  Cluster before = cluster;
  OneCycle c(&cluster);
  c.input.pending.push_back(Pending(1, "q", Gpus(2, 8)));
  Decisions d = c.Run();
  EXPECT_TRUE(d.binds.empty());
  EXPECT_TRUE(cluster == before);  // nothing held
  const WaitExplanation* w = WaitOf(d, 1);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->gates.size(), 2u);
  EXPECT_EQ(w->gates[0].gate, Gate::kGang);
  EXPECT_EQ(w->gates[0].needed, 8);
  EXPECT_EQ(w->gates[0].placeable, 5);
  EXPECT_EQ(w->gates[1].gate, Gate::kPlacement);
  EXPECT_EQ(w->gates[1].nodes_considered, 5);
  EXPECT_EQ(w->gates[1].reasons.at("insufficient-whole-gpus"), 5);
  EXPECT_EQ(w->fix,
            "cannot fit this cluster even when every running job has ended: needs room for 3 "
            "more replica(s) next to the 5 that fit now");
}

// A job too big for the nodes it may use, while a taint (here a reservation's) keeps it off
// another: the fix does not claim it cannot fit the whole cluster.
TEST(Cycle, AJobKeptOffTaintedNodesIsNotToldTheClusterIsTooSmall) {
  Cluster cluster = H200Cluster(2, 4);
  cluster.mutable_node(NodeId(1)).taints.push_back({"carve.io/reservation", "launch"});
  OneCycle c(&cluster);
  c.input.pending.push_back(Pending(1, "q", Gpus(8)));
  Decisions d = c.Run();
  const WaitExplanation* w = WaitOf(d, 1);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->fix, ::testing::StartsWith("cannot fit the nodes its tolerations allow even "
                                            "when every running job has ended: "));
}

TEST(Cycle, PlacementGateSaysWhatWouldMakeItFit) {
  Cluster cluster = H200Cluster(2, 4);
  cluster.mutable_node(NodeId(1)).state = NodeState::kCordoned;
  Cluster scratch = cluster;
  RunningJob r = Running(scratch, 1, "q", Gpus(1));
  cluster = scratch;
  OneCycle c(&cluster);
  c.input.running.push_back(r);
  c.input.pending.push_back(Pending(2, "q", Gpus(4)));
  Decisions d = c.Run();
  const WaitExplanation* w = WaitOf(d, 2);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->gates.size(), 1u);
  EXPECT_EQ(w->gates[0].gate, Gate::kPlacement);
  EXPECT_EQ(w->gates[0].reasons.at("cordoned"), 1);
  EXPECT_EQ(w->gates[0].reasons.at("insufficient-whole-gpus"), 1);
  EXPECT_EQ(w->gates[0].reasons.count("node-not-ready"), 0u);
  EXPECT_EQ(w->fix, "needs 4 whole GPUs on one node; best node n0 has 3 free");
  EXPECT_TRUE(w->reserved);  // the first job blocked on placement holds the reservation
  EXPECT_EQ(d.reserved_job, 2);
  EXPECT_EQ(w->reserved_start_us, -1);  // job 1 declares no max runtime
}

TEST(Cycle, BackfillNeverDelaysTheReservedJob) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.now_us = 0;
  // Job 1 holds 6 GPUs until minute 10; job 2 needs all 8 and reserves minute 10.
  c.input.running.push_back(Running(cluster, 1, "q", Gpus(6), 100, 0, 10 * kMinute));
  c.input.running.back().preemptible = false;
  c.input.pending.push_back(Pending(2, "q", Gpus(8), 200, 1));
  // Job 3 (2 GPUs, 20 minutes) would still run at minute 10: it must wait.
  c.input.pending.push_back(Pending(3, "q", Gpus(2), 100, 2, 20 * kMinute));
  // Job 4 (2 GPUs, 5 minutes) ends before the reserved start: it backfills.
  c.input.pending.push_back(Pending(4, "q", Gpus(2), 100, 3, 5 * kMinute));
  Decisions d = c.Run();
  EXPECT_EQ(d.reserved_job, 2);
  EXPECT_EQ(d.reserved_start_us, 10 * kMinute);
  EXPECT_FALSE(Bound(d, 3));
  ASSERT_TRUE(Bound(d, 4));
  EXPECT_TRUE(d.binds[0].backfilled);
  const WaitExplanation* w = WaitOf(d, 3);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->gates.size(), 1u);
  EXPECT_EQ(w->gates[0].gate, Gate::kOrder);
  EXPECT_EQ(w->gates[0].reserved_job, 2);
  EXPECT_EQ(w->gates[0].reserved_start_us, 10 * kMinute);
  ASSERT_FALSE(w->ahead.empty());
  EXPECT_EQ(w->ahead[0].job, 2);
  EXPECT_EQ(w->ahead[0].why, "priority 200 > 100");
}

TEST(Cycle, BackfillUsesNodesTheReservedJobDoesNotNeed) {
  Cluster cluster = H200Cluster(3, 4);
  OneCycle c(&cluster);
  // n0 frees at minute 10; n1 and n2 are held by jobs without a declared end.
  c.input.running.push_back(Running(cluster, 1, "q", Gpus(4), 100, 0, 10 * kMinute));
  c.input.running.push_back(Running(cluster, 2, "q", Gpus(3)));
  c.input.running.push_back(Running(cluster, 3, "q", Gpus(2)));
  for (RunningJob& r : c.input.running) r.preemptible = false;
  c.input.pending.push_back(Pending(4, "q", Gpus(4), 200));  // only n0 can take it: minute 10
  c.input.pending.push_back(Pending(5, "q", Gpus(1)));       // no max runtime
  Decisions d = c.Run();
  EXPECT_EQ(d.reserved_job, 4);
  EXPECT_EQ(d.reserved_start_us, 10 * kMinute);
  ASSERT_TRUE(Bound(d, 5));  // it lands on n1, which the reserved job does not need
  EXPECT_EQ(d.binds[0].replicas[0].node, NodeId(1));
  EXPECT_TRUE(d.binds[0].backfilled);
}

TEST(Cycle, PreemptsLowerPriorityInTheSameQueueOnly) {
  Cluster cluster = H200Cluster(1, 4);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "", 4), Queue("b", "", 4)};
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(2), 0, 5));
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(2), 0, 5));
  c.input.pending.push_back(Pending(3, "a", Gpus(2), 1000));
  // Job 3 is within queue a's quota but no GPU is free: it preempts job 1 of its own queue.
  c.input.queues[0].nominal["gpus"] = 4000;
  Decisions d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 1);
  EXPECT_EQ(d.preemptions[0].preemptor, 3);
  EXPECT_EQ(d.preemptions[0].kind, "priority");
  EXPECT_EQ(d.preemptions[0].reason, "preempted by job 3 of higher priority (1000 > 0) in queue a");
  const WaitExplanation* w = WaitOf(d, 3);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->gates.back().gate, Gate::kPreemption);
  EXPECT_THAT(w->gates.back().victims, ElementsAre(1));
}

TEST(Cycle, PreemptionChoosesTheSmallestSetLeastProgressFirst) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.now_us = 100 * kMinute;
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(4), 0, 10 * kMinute));  // old
  c.input.running.push_back(Running(cluster, 2, "a", Gpus(2), 0, 90 * kMinute));  // young
  c.input.running.push_back(Running(cluster, 3, "a", Gpus(2), 0, 80 * kMinute));
  c.input.pending.push_back(Pending(4, "a", Gpus(2), 500));
  Decisions d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 2);  // least progress lost
}

TEST(Cycle, NotPreemptibleAndStoppingJobsAreNeverVictims) {
  Cluster cluster = H200Cluster(1, 4);
  OneCycle c(&cluster);
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(2), 0));
  c.input.running.back().preemptible = false;
  c.input.running.push_back(Running(cluster, 2, "a", Gpus(2), 0));
  c.input.running.back().stopping = true;
  c.input.running.back().preempted_by = 3;
  c.input.pending.push_back(Pending(3, "a", Gpus(2), 1000));
  Decisions d = c.Run();
  EXPECT_TRUE(d.preemptions.empty());  // job 2 already stops for it: nothing more
  const WaitExplanation* w = WaitOf(d, 3);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->gates.back().gate, Gate::kPreemption);
  EXPECT_THAT(w->gates.back().victims, ElementsAre(2));
}

TEST(Cycle, AJobThatCanNeverFitPassesTheReservationOn) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.running.push_back(Running(cluster, 1, "q", Gpus(4), 100, 0, 10 * kMinute));
  c.input.running.back().preemptible = false;
  c.input.pending.push_back(Pending(2, "q", Gpus(16), 300));  // more than any node has
  c.input.pending.push_back(Pending(3, "q", Gpus(8), 200));
  Decisions d = c.Run();
  EXPECT_FALSE(WaitOf(d, 2)->reserved);
  EXPECT_EQ(d.reserved_job, 3);
  EXPECT_EQ(d.reserved_start_us, 10 * kMinute);
}

TEST(Cycle, ABorrowingQueueDoesNotPreemptItsOwnJobsToBorrowMore) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "c", 2), Queue("b", "c", 6)};
  // a runs 4 (2 borrowed from b's idle quota); b's 4 more fill the node.
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(4), 0, 1));
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(4), 100, 2));
  c.input.pending.push_back(Pending(3, "a", Gpus(4), 1000));  // a would still borrow
  Decisions d = c.Run();
  EXPECT_TRUE(d.preemptions.empty());
  c.input.pending[0].request = Gpus(2);  // within a's nominal once job 1 is gone: allowed
  cluster = H200Cluster(1, 8);
  c.input.running.clear();
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(4), 0, 1));
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(4), 100, 2));
  d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 1);
  EXPECT_EQ(d.preemptions[0].kind, "priority");
}

TEST(Cycle, APreemptorIsNominatedAndHoldsItsClaimForTheRestOfTheCycle) {
  Cluster cluster = H200Cluster(1, 4);
  OneCycle c(&cluster);
  c.input.running.push_back(Running(cluster, 1, "q", Gpus(2), 0, 1));
  c.input.pending.push_back(Pending(2, "q", Gpus(4), 500, 10));  // needs job 1's two GPUs too
  c.input.pending.push_back(Pending(3, "q", Gpus(2), 100, 20));  // would fit the free two
  Decisions d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_FALSE(Bound(d, 3));  // the free GPUs are job 2's claim
  ASSERT_NE(WaitOf(d, 3), nullptr);
  ASSERT_FALSE(WaitOf(d, 3)->gates.empty());
  EXPECT_EQ(WaitOf(d, 3)->gates[0].gate, Gate::kPlacement);
  // Next cycle: job 1 has stopped; job 2, nominated, goes first even against a higher priority.
  Cluster after = H200Cluster(1, 4);
  OneCycle next(&after);
  next.input.pending.push_back(Pending(4, "q", Gpus(4), 900, 30));
  next.input.pending.push_back(Pending(2, "q", Gpus(4), 500, 10));
  next.input.pending.back().nominated_us = 5;
  Decisions n = next.Run();
  ASSERT_TRUE(Bound(n, 2));
  EXPECT_FALSE(Bound(n, 4));
  EXPECT_EQ(n.binds[0].job, 2);
  EXPECT_EQ(WhyBefore({5, 500, 0, 10, 2}, {0, 900, 0, 30, 4}),
            "it preempted jobs to start and goes first");
}

TEST(Cycle, NoPreemptionWhenItWouldNotMakeThePreemptorFit) {
  Cluster cluster = H200Cluster(2, 4);
  OneCycle c(&cluster);
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(2), 0));
  c.input.running.push_back(Running(cluster, 2, "a", Gpus(4), 1000));  // n1, higher priority
  c.input.running.back().preemptible = false;
  // 8 GPUs on one node cannot exist: no victim set helps, so none is taken.
  c.input.pending.push_back(Pending(3, "a", Gpus(8), 500));
  Decisions d = c.Run();
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_THAT(WaitOf(d, 3)->fix, HasSubstr("cannot fit this cluster even when every running"));
}

TEST(Cycle, ReclaimTakesBackLentQuotaFromBorrowersOnly) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "c", 4), Queue("b", "c", 4)};
  // b borrowed: 6 GPUs on a nominal of 4; a runs 2 (its own).
  c.input.running.push_back(Running(cluster, 1, "b", Gpus(4), 100, 1));
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(2), 100, 2));
  c.input.running.push_back(Running(cluster, 3, "a", Gpus(2), 0, 3));
  c.input.pending.push_back(Pending(4, "a", Gpus(2), 0));
  Decisions d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 2);  // the borrower, least progress; not a's own job 3
  EXPECT_EQ(d.preemptions[0].kind, "reclaim");
  EXPECT_EQ(d.preemptions[0].reason,
            "preempted by job 4 for queue a's guarantee: queue b runs on borrowed capacity");
  const WaitExplanation* w = WaitOf(d, 4);
  ASSERT_EQ(w->gates.size(), 3u);
  EXPECT_EQ(w->gates[0].gate, Gate::kQuota);
  EXPECT_TRUE(w->gates[0].quota.reclaimable);
  EXPECT_EQ(w->gates[1].gate, Gate::kPlacement);
  EXPECT_EQ(w->gates[2].gate, Gate::kPreemption);
}

TEST(Cycle, BorrowingQueueCannotReclaimFromOthers) {
  Cluster cluster = H200Cluster(1, 8);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "c", 4), Queue("b", "c", 4)};
  c.input.running.push_back(Running(cluster, 1, "a", Gpus(4), 0, 1));
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(4), 0, 2));
  c.input.pending.push_back(Pending(3, "b", Gpus(2), 0));  // b would exceed its nominal
  Decisions d = c.Run();
  EXPECT_TRUE(d.preemptions.empty());
}

// A reservation's holder takes its room back from the jobs borrowing the reserved nodes, of any
// queue or priority, and from no other job.
TEST(Cycle, AReservationsHolderPreemptsItsBorrowersOnly) {
  Cluster cluster = H200Cluster(1, 4);
  OneCycle c(&cluster);
  c.input.queues = {Queue("a", "", 8), Queue("b", "", 8)};
  c.input.running.push_back(Running(cluster, 1, "b", Gpus(2), 500, 1));  // borrows, priority 500
  c.input.running.back().borrows = "launch";
  c.input.running.push_back(Running(cluster, 2, "b", Gpus(2), 0, 2));  // another's: no borrower
  c.input.running.back().borrows = "other";
  PendingJob holder = Pending(3, "a", Gpus(2), 0);
  holder.holds = {"launch"};
  c.input.pending.push_back(holder);
  Decisions d = c.Run();
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, 1);
  EXPECT_EQ(d.preemptions[0].kind, "reservation");
  EXPECT_EQ(d.preemptions[0].reason,
            "preempted by job 3, which holds reservation launch: this job borrowed its nodes");
  // Without the reservation, job 3 (priority 0, another queue, within quota) preempts nothing.
  Cluster again = H200Cluster(1, 4);
  OneCycle plain(&again);
  plain.input.queues = c.input.queues;
  plain.input.running.push_back(Running(again, 1, "b", Gpus(2), 500, 1));
  plain.input.running.back().borrows = "launch";
  plain.input.running.push_back(Running(again, 2, "b", Gpus(2), 0, 2));
  plain.input.pending.push_back(Pending(3, "a", Gpus(2), 0));
  EXPECT_TRUE(plain.Run().preemptions.empty());
}

TEST(Cycle, CompactTopologyPrefersOneNodeThenOneRack) {
  Cluster cluster = H200Cluster(4, 4,
                                {{{"rack", "r1"}, {"nvlink-domain", "d1"}},
                                 {{"rack", "r2"}, {"nvlink-domain", "d2"}},
                                 {{"rack", "r2"}, {"nvlink-domain", "d3"}},
                                 {{"rack", "r1"}, {"nvlink-domain", "d4"}}});
  Cluster scratch = cluster;
  // n0 and n3 (rack r1) have 2 free each; n1, n2 (rack r2) have 3 free each.
  std::vector<RunningJob> running;
  for (int node : {0, 1, 2, 3}) {
    JobRequest r = Gpus(node == 0 || node == 3 ? 2 : 1);
    r.replica.node_selector["nvlink-domain"] = absl::StrCat("d", node + 1);
    running.push_back(Running(scratch, 10 + node, "q", r));
  }
  cluster = scratch;
  OneCycle c(&cluster);
  c.input.running = running;
  PendingJob p = Pending(1, "q", Gpus(2, 2));
  p.topology = Topology::kCompact;
  c.input.pending.push_back(p);
  PendingJob q = Pending(2, "q", Gpus(3, 2));
  q.topology = Topology::kCompact;
  c.input.pending.push_back(q);
  Decisions d = c.Run();
  ASSERT_EQ(d.binds.size(), 2u);
  // Job 1 (2x2) fits no single node or NVLink domain; rack r1 has exactly its 4 free GPUs.
  EXPECT_EQ(cluster.node(d.binds[0].replicas[0].node).labels.at("rack"),
            cluster.node(d.binds[0].replicas[1].node).labels.at("rack"));
  EXPECT_EQ(cluster.node(d.binds[0].replicas[0].node).labels.at("rack"), "r1");
  EXPECT_EQ(cluster.node(d.binds[1].replicas[0].node).labels.at("rack"), "r2");
}

}  // namespace
}  // namespace carve
