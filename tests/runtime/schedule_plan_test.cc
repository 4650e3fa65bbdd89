// The scheduling cycle plans without the control plane's lock and applies what still holds (issue
// 12): API calls and heartbeats answer while the core plans, and a job cancelled or a node
// cordoned meanwhile is not bound by the stale plan. A real control plane and SQLite store; the
// cycle is held inside its planning step by Options::while_planning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const Principal kNode{"n1", Role::kNode};
// How long a call made while the cycle plans may take before the test calls it blocked. Far
// above any answer's time on a loaded machine; a blocked call never answers before the cycle
// is released.
constexpr auto kBlocked = std::chrono::seconds(30);

class SchedulePlanTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlane::Options options;
    options.plan_slice = 3;
    options.between_slices = [this](const std::string& step) {
      if (between_) between_(step);
    };
    options.while_planning = [this] {
      if (!hold_) return;
      entered_.set_value();
      release_.wait();
    };
    OpenPlane("schedule-plan", options, [] { return kT0; });
    RegisterH200Node("n1", 1, kAdmin);
  }

  int64_t Submit(const std::string& name) {
    auto job = cp_->Submit(
        {{"name", name}, {"command", {"sleep", "600"}}, {"resources", {{"gpus", 1}}}}, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }
  std::string State(int64_t id) { return (*cp_->GetJob(id))["state"]; }
  // The agent of n1 reports `job`'s one replica exited with code 0, its reclaim verified.
  absl::StatusOr<json> End(int64_t job) {
    return cp_->Heartbeat({{"node", "n1"},
                           {"replicas",
                            {{{"job", job},
                              {"replica", 0},
                              {"state", "exited"},
                              {"exit_code", 0},
                              {"reclaim", VerifiedReclaim()}}}}},
                          kNode);
  }

  // Runs one scheduling cycle and, while the core plans, `during` on another thread. Expects
  // `during` to finish while the cycle is still held; then lets the cycle finish.
  void WhilePlanning(const std::function<void()>& during) {
    hold_ = true;
    std::shared_future<void> entered = entered_.get_future().share();
    release_ = release_promise_.get_future().share();
    auto cycle = std::async(std::launch::async, [this] { return cp_->ScheduleOnce(); });
    ASSERT_EQ(entered.wait_for(kBlocked), std::future_status::ready) << "the cycle never planned";
    auto call = std::async(std::launch::async, during);
    EXPECT_EQ(call.wait_for(kBlocked), std::future_status::ready)
        << "a call made while the core planned waited for the cycle";
    release_promise_.set_value();
    call.get();
    auto scheduled = cycle.get();
    ASSERT_TRUE(scheduled.ok()) << scheduled.status();
    hold_ = false;
  }

  bool hold_ = false;
  std::function<void(const std::string& step)> between_;
  std::promise<void> entered_;
  std::promise<void> release_promise_;
  std::shared_future<void> release_;
};

TEST_F(SchedulePlanTest, CallsAnswerWhileTheCorePlans) {
  int64_t first = Submit("first");
  WhilePlanning([&] {
    EXPECT_TRUE(cp_->GetJob(first).ok());
    EXPECT_GT(Submit("second"), first);
    EXPECT_EQ(Jobs(false).size(), 2u);
    auto beat = cp_->Heartbeat({{"node", "n1"}, {"replicas", json::array()}}, kNode);
    EXPECT_TRUE(beat.ok()) << beat.status();
  });
  EXPECT_EQ(State(first), "scheduled");
}

TEST_F(SchedulePlanTest, AJobCancelledWhileThePlanIsMadeIsNotBound) {
  int64_t job = Submit("cancel-me");
  WhilePlanning([&] { EXPECT_TRUE(cp_->Cancel(job, kAdmin).ok()); });
  json after = *cp_->GetJob(job);
  EXPECT_EQ(after["state"], "cancelled");
  EXPECT_TRUE(after["replicas"].empty()) << after.dump();
  // The device it was planned on stays free for the next job.
  int64_t next = Submit("next");
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(State(next), "scheduled");
}

TEST_F(SchedulePlanTest, ANodeCordonedWhileThePlanIsMadeGetsNoBind) {
  int64_t job = Submit("cordoned");
  WhilePlanning([&] { EXPECT_TRUE(cp_->Cordon("n1", "cordon", -1, kAdmin).ok()); });
  EXPECT_EQ(State(job), "queued");
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  json after = *cp_->GetJob(job);
  EXPECT_EQ(after["state"], "queued");
  EXPECT_THAT(after["reason"].get<std::string>(), HasSubstr("waiting")) << after.dump();
}

// Queues applied while the core plans make the cycle void (nothing bound); what changed in it
// (a running job ended) is found by the next cycle, which plans on a cluster rebuilt from the
// records and binds the job that waited for the GPU.
TEST_F(SchedulePlanTest, AVoidCycleLeavesTheNextOneATrueCluster) {
  int64_t first = Submit("first");
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  ASSERT_EQ(State(first), "scheduled");
  int64_t second = Submit("second");
  WhilePlanning([&] {
    auto queue = cp_->Apply(json::array({{{"kind", "queue"}, {"name", "q2"}}}), kAdmin);
    EXPECT_TRUE(queue.ok()) << queue.status();
    auto ended = End(first);
    EXPECT_TRUE(ended.ok()) << ended.status();
  });
  EXPECT_EQ(State(first), "succeeded");
  EXPECT_EQ(State(second), "queued");  // the void cycle bound nothing
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(State(second), "scheduled");
  EXPECT_FALSE(cp_->LastCycle().cluster_kept);
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_TRUE(cp_->LastCycle().cluster_kept);
  EXPECT_EQ(cp_->LastCycle().cluster_drift, 0);
}

// Why a job waits is recorded once per change of the explanation, with the fix the core gives
// (the event is written from the explanation before it is kept for later cycles).
TEST_F(SchedulePlanTest, AWaitingJobIsExplainedOnceWithItsFix) {
  Submit("holder");
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  int64_t waiting = Submit("waiting");
  for (int cycle = 0; cycle < 3; ++cycle) ASSERT_TRUE(cp_->ScheduleOnce().ok());
  std::vector<json> waits;
  const json events = cp_->audit().Events(0, 1000).value();
  for (const json& e : events) {
    if (e["type"] == "job.waiting" && e["subject"] == absl::StrCat("job/", waiting)) {
      waits.push_back(e);
    }
  }
  ASSERT_EQ(waits.size(), 1u) << "one event per change of the explanation, not per cycle";
  EXPECT_FALSE(waits[0]["details"]["fix"].get<std::string>().empty()) << waits[0].dump();
  EXPECT_FALSE(waits[0]["details"]["gates"].empty()) << waits[0].dump();
  auto explained = cp_->Explain(waiting);
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_EQ((*explained)["fix"], waits[0]["details"]["fix"]) << explained->dump();
  // Cancelled before the next cycle: no longer explained as waiting.
  ASSERT_TRUE(cp_->Cancel(waiting, kAdmin).ok());
  EXPECT_FALSE(cp_->Explain(waiting)->contains("gates")) << cp_->Explain(waiting)->dump();
}

// A cycle that explains many jobs records them in slices and answers calls in between; a job
// cancelled between two slices is not recorded as waiting by a later slice.
TEST_F(SchedulePlanTest, AJobCancelledBetweenSlicesOfExplanationsStaysCancelled) {
  Submit("holder");  // takes the only GPU: every later job waits
  std::vector<int64_t> waiting;
  for (int i = 0; i < 300; ++i) waiting.push_back(Submit(absl::StrCat("w", i)));
  int slices = 0;
  between_ = [&](const std::string& step) {
    if (step != "explain" || ++slices != 1) return;
    auto cancel =
        std::async(std::launch::async, [&] { return cp_->Cancel(waiting.back(), kAdmin); });
    ASSERT_EQ(cancel.wait_for(kBlocked), std::future_status::ready) << "the slice kept the lock";
    EXPECT_TRUE(cancel.get().ok());
  };
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_GE(slices, 2) << "300 explanations in one slice";
  json cancelled = *cp_->GetJob(waiting.back());
  EXPECT_EQ(cancelled["state"], "cancelled");
  EXPECT_THAT(cancelled["reason"].get<std::string>(), ::testing::Not(HasSubstr("waiting")))
      << cancelled.dump();
  const json events = cp_->audit().Events(0, 10000).value();
  for (const json& e : events) {
    EXPECT_FALSE(e["type"] == "job.waiting" && e["subject"] == absl::StrCat("job/", waiting.back()))
        << e.dump();
  }
  // The rest were explained, in the earlier and the later slices alike.
  EXPECT_THAT((*cp_->GetJob(waiting.front()))["reason"].get<std::string>(), HasSubstr("waiting"));
  EXPECT_THAT((*cp_->GetJob(waiting[waiting.size() - 2]))["reason"].get<std::string>(),
              HasSubstr("waiting"));
}

// A job bound by a cycle may end (its one replica exited, its reclaim verified, the final record
// committed and the job gone from memory) between two slices of that cycle's explanations; the
// cycle still keeps what it bound and releases it once the job is found gone.
TEST_F(SchedulePlanTest, AJobBoundThatEndsBetweenSlicesOfExplanationsIsReleased) {
  int64_t bound = Submit("short");  // takes the only GPU: every later job waits
  std::vector<int64_t> waiting;
  for (int i = 0; i < 300; ++i) waiting.push_back(Submit(absl::StrCat("w", i)));
  int slices = 0;
  between_ = [&](const std::string& step) {
    if (step != "explain" || ++slices != 1) return;
    auto ended = std::async(std::launch::async, [&] { return End(bound); });
    ASSERT_EQ(ended.wait_for(kBlocked), std::future_status::ready) << "the slice kept the lock";
    auto beat = ended.get();
    EXPECT_TRUE(beat.ok()) << beat.status();
  };
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_GE(slices, 2) << "300 explanations in one slice";
  EXPECT_EQ(State(bound), "succeeded");
  // Its GPU comes back: the next cycle binds the first waiting job.
  between_ = nullptr;
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(State(waiting.front()), "scheduled");
  EXPECT_EQ(cp_->LastCycle().cluster_drift, 0);
}

// The plan reads jobs in slices (here 3 per slice) and answers calls in between; what changed
// meanwhile is checked when the plan is applied: a job cancelled after it was read is not bound,
// one cancelled before it was read is not planned, and one submitted meanwhile is planned or
// waits for the next cycle.
TEST_F(SchedulePlanTest, JobsChangedBetweenSlicesOfThePlanAreCheckedWhenItIsApplied) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Submit(absl::StrCat("j", i)));
  int slices = 0;
  int64_t submitted = 0;
  between_ = [&](const std::string& step) {
    if (step != "plan" || ++slices != 1) return;
    auto calls = std::async(std::launch::async, [&] {
      EXPECT_TRUE(cp_->Cancel(ids.front(), kAdmin).ok());  // read: the plan binds it first
      EXPECT_TRUE(cp_->Cancel(ids.back(), kAdmin).ok());   // not read yet
      submitted = Submit("meanwhile");
    });
    ASSERT_EQ(calls.wait_for(kBlocked), std::future_status::ready) << "the slice kept the lock";
  };
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_GE(slices, 3);
  json first = *cp_->GetJob(ids.front());
  EXPECT_EQ(first["state"], "cancelled");
  EXPECT_TRUE(first["replicas"].empty()) << first.dump();
  EXPECT_EQ((*cp_->GetJob(ids.back()))["state"], "cancelled");
  const json events = cp_->audit().Events(0, 10000).value();
  for (const json& e : events) {
    EXPECT_FALSE(e["type"] == "job.waiting" && e["subject"] == absl::StrCat("job/", ids.back()))
        << e.dump();
  }
  // The GPU the stale bind would have taken goes to the next job in the next cycle.
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(State(ids[1]), "scheduled");
  EXPECT_EQ(State(submitted), "queued");
}

}  // namespace
}  // namespace carve
