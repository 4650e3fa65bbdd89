// A cycle in which nothing was released plans only new or changed work; jobs whose wait was
// settled stay parked with their explanations (runtime/scheduler_memory.h, issue 12). Each test
// pins one thing that must bring every job back: a release, a stale decision, a node or rule
// change, time; and that new work still respects the backfill reservation. A real control plane
// and SQLite store on a virtual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <utility>

#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

class IncrementalCycleTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlane::Options options;
    options.full_cycle_every_us = 60'000'000;
    options.while_planning = [this] {
      if (during_plan_) std::exchange(during_plan_, nullptr)();
    };
    OpenPlane("incremental", options, [this] { return now_.load(); });
  }
  void Node(int gpus) { RegisterH200Node("n1", gpus, kAdmin); }
  int64_t Submit(const std::string& name, int gpus, const std::string& max_runtime = "",
                 int priority = -1) {
    json spec = {{"name", name}, {"command", {"sleep", "600"}}, {"resources", {{"gpus", gpus}}}};
    if (!max_runtime.empty()) spec["max_runtime"] = max_runtime;
    if (priority >= 0) spec["priority"] = priority;
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }
  // A one-GPU job in `queue`.
  int64_t InQueue(const std::string& name, const std::string& queue) {
    json spec = {{"name", name},
                 {"queue", queue},
                 {"command", {"sleep", "600"}},
                 {"resources", {{"gpus", 1}}}};
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }
  void QuotaQueue(const std::string& name, int gpus) {
    json doc = {{"kind", "queue"}, {"name", name}, {"quota", {{"gpus", gpus}}}};
    auto applied = cp_->Apply(json::array({doc}), kAdmin);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  std::string State(int64_t id) { return (*cp_->GetJob(id))["state"]; }
  CycleStats Cycle() {
    now_ += 1000;  // each cycle at its own time: `judged.at_us` names the cycle
    auto scheduled = cp_->ScheduleOnce();
    EXPECT_TRUE(scheduled.ok()) << scheduled.status();
    return cp_->LastCycle();
  }
  json Explain(int64_t id) {
    auto e = cp_->Explain(id);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : json();
  }

  std::atomic<int64_t> now_{kT0};
  std::function<void()> during_plan_;
};

TEST_F(IncrementalCycleTest, SettledWaitsStayParkedUntilSomethingIsReleased) {
  Node(1);
  int64_t a = Submit("a", 1), b = Submit("b", 1);
  Submit("c", 1);
  int64_t e = Submit("e", 1), f = Submit("f", 1);
  CycleStats first = Cycle();
  EXPECT_TRUE(first.full);
  EXPECT_EQ(first.planned, 5u);
  EXPECT_EQ(State(a), "scheduled");

  // Nothing changed: b holds the backfill reservation, so it is planned in every cycle (new work
  // must respect it), and so is c, the first parked job of its queue and request (the first job
  // blocked on room holds the reservation: it could be owed it). e and f keep their verdicts.
  CycleStats second = Cycle();
  EXPECT_FALSE(second.full) << second.why;
  EXPECT_EQ(second.planned, 2u);
  EXPECT_EQ(second.parked, 2u);
  EXPECT_TRUE(Explain(b)["reserved"].get<bool>());
  json why = Explain(e);
  EXPECT_EQ(why["gate"], "placement") << why.dump();
  EXPECT_EQ(why["judged"]["cycle"], "full") << why.dump();
  EXPECT_EQ(why["judged"]["jobs_planned"], 5) << why.dump();

  int64_t d = Submit("d", 1);
  CycleStats third = Cycle();  // the new job, the reservation's holder and c are planned
  EXPECT_FALSE(third.full) << third.why;
  EXPECT_EQ(third.planned, 3u);
  EXPECT_EQ(third.parked, 2u);
  EXPECT_EQ(State(d), "queued");
  EXPECT_EQ(Explain(d)["judged"]["cycle"], "incremental");
  EXPECT_EQ(Explain(d)["judged"]["jobs_planned"], 3);
  EXPECT_EQ(Explain(e)["judged"]["cycle"], "full");
  EXPECT_EQ(Cycle().parked, 3u);  // e, f and d

  // a never started: cancelling it frees its GPU at once, which lets back in, of the parked jobs
  // that fit there, as many as it has room for (one) and one more: c and e, not f or d. b takes
  // the GPU; the reservation passes to c, so the next cycle says so.
  ASSERT_TRUE(cp_->Cancel(a, kAdmin).ok());
  CycleStats fourth = Cycle();
  EXPECT_FALSE(fourth.full) << fourth.why;
  EXPECT_EQ(fourth.planned, 3u);
  EXPECT_EQ(fourth.parked, 2u);
  EXPECT_EQ(State(b), "scheduled");
  EXPECT_EQ(Explain(e)["judged"]["at_us"], fourth.at_us);
  EXPECT_EQ(Explain(f)["judged"]["cycle"], "full");
  EXPECT_EQ(Cycle().why, "the reservation passed on");
}

// A release lets back in the parked jobs that could use it: those whose request fits the node
// that got devices back (or whose queue's cohort got quota back); the others stay parked.
TEST_F(IncrementalCycleTest, AReleaseBringsBackTheParkedJobsThatCanUseIt) {
  RegisterH200Node("n1", 1, kAdmin);
  RegisterH200Node("n2", 2, kAdmin);
  int64_t two = Submit("two", 2), one = Submit("one", 1);
  ASSERT_TRUE(Cycle().full);
  ASSERT_EQ(State(two), "scheduled");  // only n2 takes it
  ASSERT_EQ(State(one), "scheduled");
  int64_t r = Submit("r", 2), big = Submit("big", 2), small = Submit("small", 1);
  int64_t big2 = Submit("big2", 2), small2 = Submit("small2", 1);
  Cycle();  // r takes the reservation
  CycleStats parked = Cycle();
  ASSERT_FALSE(parked.full) << parked.why;
  // r, and big and small, the first of their requests (which could be owed the reservation).
  ASSERT_EQ(parked.planned, 3u);
  ASSERT_EQ(parked.parked, 2u);  // big2, small2
  ASSERT_TRUE(Explain(r)["reserved"].get<bool>());
  const json big2_judged = Explain(big2)["judged"];

  ASSERT_TRUE(cp_->Cancel(one, kAdmin).ok());  // n1's GPU: one GPU, never two
  CycleStats next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  // Planned on the last cycle's cluster, less what the cancelled job held (the fixture checks
  // every kept cluster against one rebuilt from the records).
  EXPECT_TRUE(next.cluster_kept);
  EXPECT_EQ(next.planned, 4u);  // r, big, small and small2: room for one small, and one more
  EXPECT_EQ(next.parked, 1u);   // big2: no room for two GPUs
  EXPECT_EQ(State(small), "scheduled");
  EXPECT_EQ(State(small2), "queued");
  EXPECT_EQ(Explain(big2)["judged"], big2_judged);

  ASSERT_TRUE(cp_->Cancel(two, kAdmin).ok());  // n2's two GPUs: r and big2 fit there
  next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  EXPECT_EQ(next.parked, 0u);
  EXPECT_EQ(State(r), "scheduled");
  EXPECT_EQ(Explain(big)["judged"]["at_us"], next.at_us);
  EXPECT_EQ(Explain(big2)["judged"]["at_us"], next.at_us);
}

// A release with room for one replica lets back, of each queue and request, the first parked
// jobs in the queue's order (priority, then submission): as many as it has room for, and the
// next, which could be owed the reservation; not every job that fits.
TEST_F(IncrementalCycleTest, AReleaseBringsBackNoMoreParkedJobsThanItHasRoomFor) {
  Node(2);
  int64_t a = Submit("a", 1, "", 300);  // above every waiting job: none of them preempts it
  Submit("b", 1, "", 300);
  ASSERT_TRUE(Cycle().full);
  ASSERT_EQ(State(a), "scheduled");
  int64_t p1 = Submit("p1", 1), p2 = Submit("p2", 1), p3 = Submit("p3", 1, "", 150);
  int64_t top = Submit("top", 1, "", 200);
  Cycle();  // top takes the reservation
  CycleStats parked = Cycle();
  ASSERT_FALSE(parked.full) << parked.why;
  ASSERT_EQ(parked.planned, 2u);  // top, and p3, the first of the parked jobs in order
  ASSERT_EQ(parked.parked, 2u);   // p1, p2
  ASSERT_TRUE(Explain(top)["reserved"].get<bool>());

  const json p2_judged = Explain(p2)["judged"];
  ASSERT_TRUE(cp_->Cancel(a, kAdmin).ok());  // one GPU back: room for one
  CycleStats next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  EXPECT_EQ(next.planned, 3u);  // top, p3 (room for one) and p1 (the next)
  EXPECT_EQ(next.parked, 1u);
  EXPECT_EQ(State(top), "scheduled");
  EXPECT_EQ(Explain(p3)["judged"]["at_us"], next.at_us);
  EXPECT_EQ(Explain(p1)["judged"]["at_us"], next.at_us);
  EXPECT_EQ(Explain(p2)["judged"], p2_judged);  // not judged again
}

// A job that waits for both its queue's quota and room stays parked when only devices come
// back (the quota still holds it), and comes back once its queue's quota does.
TEST_F(IncrementalCycleTest, AJobWaitingForQuotaAndRoomComesBackOnceBothCameBack) {
  Node(2);
  QuotaQueue("q", 1);
  int64_t x = InQueue("x", "q");
  int64_t z = Submit("z", 1, "", 300);  // the default queue, no quota: the other GPU
  int64_t y = InQueue("y", "q");        // q's quota and both GPUs are taken
  ASSERT_TRUE(Cycle().full);
  ASSERT_EQ(State(x), "scheduled");
  ASSERT_EQ(State(z), "scheduled");
  CycleStats parked = Cycle();
  ASSERT_FALSE(parked.full) << parked.why;
  ASSERT_EQ(parked.parked, 1u);

  ASSERT_TRUE(cp_->Cancel(z, kAdmin).ok());  // a GPU comes back, q's quota does not
  CycleStats next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  EXPECT_EQ(next.planned, 0u);
  EXPECT_EQ(next.parked, 1u);
  EXPECT_EQ(Explain(y)["judged"]["cycle"], "full");

  ASSERT_TRUE(cp_->Cancel(x, kAdmin).ok());  // q's quota comes back
  next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  EXPECT_EQ(State(y), "scheduled");
}

// When quota and devices come back in the same cycle, such a job comes back at once.
TEST_F(IncrementalCycleTest, AJobWaitingForQuotaAndRoomComesBackWhenBothComeBackTogether) {
  Node(1);
  QuotaQueue("q", 1);
  int64_t x = InQueue("x", "q");
  int64_t y = InQueue("y", "q");
  ASSERT_TRUE(Cycle().full);
  ASSERT_EQ(State(x), "scheduled");
  CycleStats parked = Cycle();
  ASSERT_FALSE(parked.full) << parked.why;
  ASSERT_EQ(parked.parked, 1u);

  ASSERT_TRUE(cp_->Cancel(x, kAdmin).ok());  // its GPU and q's quota
  CycleStats next = Cycle();
  EXPECT_FALSE(next.full) << next.why;
  EXPECT_EQ(State(y), "scheduled");
}

TEST_F(IncrementalCycleTest, NewWorkStillRespectsTheReservation) {
  Node(2);
  int64_t held = Submit("held", 1, "1h");
  ASSERT_TRUE(Cycle().full);
  ASSERT_EQ(State(held), "scheduled");
  int64_t big = Submit("big", 2);
  Cycle();
  ASSERT_TRUE(Explain(big)["reserved"].get<bool>()) << Explain(big).dump();
  ASSERT_EQ(Cycle().why, "the reservation passed on");

  // One GPU is free, but a job without a max runtime there would delay big past held's end.
  int64_t small = Submit("small", 1);
  CycleStats st = Cycle();
  EXPECT_FALSE(st.full) << st.why;
  EXPECT_EQ(State(small), "queued");
  json why = Explain(small);
  EXPECT_EQ(why["gate"], "order") << why.dump();
  // One that ends before held does may use it meanwhile.
  int64_t quick = Submit("quick", 1, "10m");
  EXPECT_FALSE(Cycle().full);
  EXPECT_EQ(State(quick), "scheduled");
}

TEST_F(IncrementalCycleTest, NodeRuleAndTimeChangesMakeTheNextCycleFull) {
  Node(1);
  Submit("a", 1);
  int64_t b = Submit("b", 1);
  ASSERT_TRUE(Cycle().full);
  ASSERT_FALSE(Cycle().full);

  ASSERT_TRUE(cp_->Cordon("n1", "cordon", -1, kAdmin).ok());
  CycleStats cordoned = Cycle();
  EXPECT_EQ(cordoned.why, "a node changed");
  EXPECT_FALSE(cordoned.cluster_kept) << "a changed node is built again, with its holdings";
  CycleStats after = Cycle();
  ASSERT_FALSE(after.full);
  EXPECT_TRUE(after.cluster_kept);
  ASSERT_TRUE(cp_->Cordon("n1", "uncordon", -1, kAdmin).ok());
  EXPECT_EQ(Cycle().why, "a node changed");

  auto applied = cp_->Apply(
      json::array({{{"kind", "queue"}, {"name", "research"}, {"quota", {{"gpus", 4}}}}}), kAdmin);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(Cycle().why, "queues, projects or classes changed");

  ASSERT_FALSE(Cycle().full);
  now_ += 61'000'000;
  EXPECT_EQ(Cycle().why, "interval");
  EXPECT_EQ(State(b), "queued");
}

TEST_F(IncrementalCycleTest, ADecisionFoundStaleMakesTheNextCycleFull) {
  Node(2);
  int64_t a = Submit("a", 2), b = Submit("b", 1), c = Submit("c", 1);
  // Cancelled while the plan that binds it is made: the bind is not applied, and c was judged
  // (and parked) on a cluster where a held both GPUs.
  during_plan_ = [&] { ASSERT_TRUE(cp_->Cancel(a, kAdmin).ok()); };
  Cycle();
  EXPECT_EQ(State(a), "cancelled");
  EXPECT_EQ(State(c), "queued");
  CycleStats next = Cycle();
  EXPECT_TRUE(next.full);
  EXPECT_EQ(State(b), "scheduled");
  EXPECT_EQ(State(c), "scheduled");
}

// A job bound in an incremental cycle keeps no explanation: requeued later and judged to wait
// for the same reason as before it was bound, its record says so again (a job.waiting event).
TEST_F(IncrementalCycleTest, ARequeuedJobIsExplainedAgain) {
  RegisterH200Node("n1", 1, kAdmin);
  RegisterH200Node("n2", 2, kAdmin);
  int64_t two = Submit("two", 2), one = Submit("one", 1);
  ASSERT_TRUE(Cycle().full);
  int64_t r = Submit("r", 2), small = Submit("small", 1);
  Cycle();
  Cycle();  // the reservation was taken in an incremental cycle: small, parked, is judged again
  ASSERT_FALSE(Cycle().full);
  ASSERT_TRUE(Explain(r)["reserved"].get<bool>());
  ASSERT_EQ(Explain(small)["gate"], "placement") << Explain(small).dump();
  ASSERT_TRUE(cp_->Cancel(one, kAdmin).ok());
  ASSERT_FALSE(Cycle().full);
  ASSERT_EQ(State(small), "scheduled");
  ASSERT_EQ(State(two), "scheduled");

  // A job of higher priority preempts small before it started: small is queued again at once,
  // and waits for the same reason as when it was last judged waiting.
  json urgent = {{"name", "urgent"},
                 {"command", {"sleep", "600"}},
                 {"priority", 1000},
                 {"resources", {{"gpus", 1}}}};
  auto u = cp_->Submit(urgent, "", kAdmin);
  ASSERT_TRUE(u.ok()) << u.status();
  CycleStats pre = Cycle();
  ASSERT_FALSE(pre.full) << pre.why;
  ASSERT_EQ(State(small), "queued");
  CycleStats st = Cycle();
  ASSERT_FALSE(st.full) << st.why;
  ASSERT_EQ(State((*u)["id"].get<int64_t>()), "scheduled");
  json job = *cp_->GetJob(small);
  EXPECT_EQ(job["state"], "queued");
  EXPECT_FALSE(job["explanation"].get<std::string>().empty()) << job.dump();
  EXPECT_EQ(Explain(small)["judged"]["at_us"], st.at_us) << Explain(small).dump();
}

// A running job told to stop (cancelled) releases nothing yet, but a full cycle lets a waiting
// job that fits once it is gone claim what it will need (no later job takes that meanwhile):
// the parked job must be judged again, before new work takes its room.
TEST_F(IncrementalCycleTest, ARunningJobStoppingBringsBackTheJobsThatWaitForIt) {
  RegisterH200Node("n1", 2, kAdmin);
  RegisterH200Node("n2", 4, kAdmin);
  auto submit = [&](const std::string& name, int gpus, int priority, bool preemptible,
                    const std::string& max_runtime) {
    json spec = {{"name", name},
                 {"command", {"sleep", "600"}},
                 {"priority", priority},
                 {"preemptible", preemptible},
                 {"resources", {{"gpus", gpus}}}};
    if (!max_runtime.empty()) spec["max_runtime"] = max_runtime;
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  };
  int64_t y = submit("y", 4, 100, false, "1h");
  Cycle();
  ASSERT_EQ(State(y), "scheduled");
  int64_t x = submit("x", 1, 100, false, "");
  Cycle();
  ASSERT_EQ(State(x), "scheduled");
  json running = {
      {"job", x}, {"replica", 0}, {"state", "running"}, {"pid", 1}, {"started_us", kT0}};
  ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}, {"replicas", {running}}}, kAdmin).ok());
  ASSERT_EQ(State(x), "running");
  // r holds the reservation (on n2); p fits n1 only once x is gone, and nothing preemptible
  // stands in its way: it is parked.
  int64_t r = submit("r", 3, 150, true, ""), p = submit("p", 2, 100, true, "");
  submit("p2", 2, 100, true, "");  // behind p: parked
  Cycle();
  Cycle();
  CycleStats st = Cycle();
  ASSERT_FALSE(st.full) << st.why;
  ASSERT_EQ(st.parked, 1u);
  ASSERT_TRUE(Explain(r)["reserved"].get<bool>());
  ASSERT_EQ(Explain(p)["gate"], "placement");

  ASSERT_TRUE(cp_->Cancel(x, kAdmin).ok());  // it ran: its devices come back with the evidence
  int64_t l = submit("l", 1, 100, true, "10m");
  EXPECT_EQ(Cycle().why, "a running job began stopping");
  EXPECT_EQ(State(l), "queued") << Explain(l).dump();  // n1's free GPU is p's
}

}  // namespace
}  // namespace carve
