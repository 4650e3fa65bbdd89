// A service's replacement and scale-up replicas go through the same scheduling cycle as queued
// jobs: the queue's pool, its quota (a replacement takes back what its replica held) and an
// explanation when they wait. A real control plane and SQLite store with a controlled clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kSecond = 1'000'000;

class ServiceSchedulingTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlane::Options options;
    options.node_timeout_us = kSecond;
    options.lost_after_us = kSecond;
    OpenPlane(absl::StrCat("service-scheduling-", counter_++), options, [this] { return now_; });
  }

  void AddNode(const std::string& name, const std::string& pool, int h200) {
    RegisterH200Node(name, h200, kAdmin, {{"pool", pool}});
    alive_.push_back(name);
  }

  void ApplyQueue(int gpus) {
    auto r = cp_->Apply(
        json::array(
            {{{"kind", "queue"}, {"name", "qa"}, {"pool", "a"}, {"quota", {{"gpus", gpus}}}}}),
        kAdmin);
    ASSERT_TRUE(r.ok()) << r.status();
  }

  int64_t SubmitService(int replicas) {
    auto job = cp_->Submit({{"kind", "inference"},
                            {"queue", "qa"},
                            {"replicas", replicas},
                            {"command", {"sleep", "600"}},
                            {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}},
                           "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }

  json Job(int64_t id) { return *cp_->GetJob(id); }

  // One second passes; every node still alive heartbeats, reporting its replicas running, and
  // a scheduling cycle runs.
  void Tick() {
    now_ += kSecond / 4;
    for (const std::string& node : alive_) {
      json reports = json::array();
      for (const json& job : Jobs(false)) {
        for (size_t r = 0; r < job["replicas"].size(); ++r) {
          const json& rep = job["replicas"][r];
          if (rep["node"] != node || (rep["state"] != "running" && rep["state"] != "pending")) {
            continue;
          }
          reports.push_back({{"job", job["id"]},
                             {"replica", r},
                             {"state", "running"},
                             {"pid", 1000 + r},
                             {"started_us", now_}});
        }
      }
      auto hb = cp_->Heartbeat({{"node", node}, {"replicas", reports}}, kAdmin);
      ASSERT_TRUE(hb.ok()) << node << ": " << hb.status();
    }
    ASSERT_TRUE(cp_->ScheduleOnce().ok());
  }

  // Ticks until `done` holds (at most 40 ticks).
  template <typename Pred>
  bool TickUntil(Pred done) {
    for (int i = 0; i < 40 && !done(); ++i) Tick();
    return done();
  }

  static int Serving(const json& job) {
    int n = 0;
    for (const json& r : job["replicas"]) n += r["state"] == "running" && !r.contains("retire");
    return n;
  }

  static inline int counter_ = 0;
  int64_t now_ = kT0;
  std::vector<std::string> alive_;
};

// A node of pool a is lost: the replacement never lands on pool b's free GPUs; it waits and
// says why (the pool), without being refused for the quota its lost replica held, and lands
// once pool a has room.
TEST_F(ServiceSchedulingTest, ReplacementStaysInItsQueuesPool) {
  AddNode("a1", "a", 1);
  AddNode("a2", "a", 1);
  AddNode("b1", "b", 2);
  ApplyQueue(2);  // exactly the service's two replicas
  int64_t id = SubmitService(2);
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 2; })) << Job(id).dump(2);
  alive_.erase(std::find(alive_.begin(), alive_.end(), "a1"));  // a1 goes silent
  ASSERT_TRUE(TickUntil([&] { return Job(id)["replicas"].size() == 3; })) << Job(id).dump(2);
  for (int i = 0; i < 5; ++i) Tick();
  json waiting = Job(id);
  EXPECT_EQ(waiting["replicas"][2]["node"], "") << "a replacement left its queue's pool";
  EXPECT_EQ(waiting["replicas"][2]["replacement"], true);
  EXPECT_THAT(waiting["explanation"].get<std::string>(), HasSubstr("replacement of replica slot"));
  EXPECT_THAT(waiting["explanation"].get<std::string>(), HasSubstr("pool"));
  json e = *cp_->Explain(id);
  EXPECT_EQ(e["gate"], "placement") << e.dump(2);  // not quota: it holds what a1's replica held
  EXPECT_EQ(e["reasons"]["pool"], 1) << e.dump(2);
  EXPECT_EQ(e["state"], "running");

  AddNode("a3", "a", 1);
  ASSERT_TRUE(TickUntil([&] { return Job(id)["replicas"][2]["node"] == "a3"; })) << Job(id).dump(2);
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 2; })) << Job(id).dump(2);
  EXPECT_EQ(Job(id)["explanation"], "");
  EXPECT_FALSE(cp_->Explain(id)->contains("gates"));
}

// Scaling up beyond the queue's quota waits, says so, and starts once the quota allows it.
TEST_F(ServiceSchedulingTest, ScaleUpBeyondQuotaWaitsAndSaysWhy) {
  AddNode("a1", "a", 4);
  ApplyQueue(2);
  int64_t id = SubmitService(2);
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 2; })) << Job(id).dump(2);
  ASSERT_TRUE(cp_->Scale(id, 3, kAdmin).ok());
  for (int i = 0; i < 3; ++i) Tick();
  json j = Job(id);
  ASSERT_EQ(j["replicas"].size(), 3u);
  EXPECT_EQ(j["replicas"][2]["node"], "") << "a scale-up went past the queue's quota";
  EXPECT_THAT(j["explanation"].get<std::string>(),
              HasSubstr("scale-up replica slot 2 waits: queue qa: gpus 2/2 used, needs 1"));
  json e = *cp_->Explain(id);
  EXPECT_EQ(e["gate"], "quota") << e.dump(2);
  EXPECT_THAT(e["fix"].get<std::string>(), HasSubstr("needs 1 more gpus in queue qa"));
  EXPECT_EQ(e["slot"], 2);
  // The event says it once, with the same fix (it was written from a moved-from explanation).
  std::vector<json> events;
  const json log = cp_->audit().Events(0, 10000).value();
  for (const json& ev : log) {
    if (ev["type"] == "job.replica-waiting") events.push_back(ev);
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["details"]["fix"], e["fix"]) << events[0].dump();

  ApplyQueue(3);
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 3; })) << Job(id).dump(2);
  EXPECT_EQ(Job(id)["explanation"], "");
}

// A service stopped by the platform (here: a reservation of its node starts, and no other replica
// serves) places no new replica meanwhile: a scale-up replica waiting for quota stays unplaced
// when quota comes back. It was placed, holding GPUs it would never use (a hostile tenant's
// stopping service held a borrowable reservation's GPUs this way and starved the holder).
TEST_F(ServiceSchedulingTest, AStoppingServicePlacesNoNewReplica) {
  AddNode("a1", "a", 2);
  ApplyQueue(2);
  int64_t id = SubmitService(2);
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 2; })) << Job(id).dump(2);
  ASSERT_TRUE(cp_->Scale(id, 3, kAdmin).ok());
  Tick();
  ASSERT_EQ(Job(id)["replicas"][2]["node"], "");  // waits for quota
  const auto utc = [](int64_t us) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(us), absl::UTCTimeZone());
  };
  const int64_t start = (now_ / kSecond + 5) * kSecond;
  auto applied = cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                         {{"kind", "reservation"},
                                          {"name", "launch"},
                                          {"tenant", "acme"},
                                          {"nodes", {"a1"}},
                                          {"start", utc(start)},
                                          {"end", utc(start + 600 * kSecond)}}}),
                            kAdmin);
  ASSERT_TRUE(applied.ok()) << applied.status();
  AddNode("a2", "a", 1);
  now_ = start;
  ASSERT_TRUE(TickUntil([&] { return Job(id)["displaced"] != ""; })) << Job(id).dump(2);
  ApplyQueue(3);
  for (int i = 0; i < 5; ++i) Tick();
  EXPECT_EQ(Job(id)["replicas"][2]["node"], "") << "a stopping service's replica was placed";
}

// A service's replicas all reach max_runtime while a scale-up replica still waits for room: the
// job ends as timed out, and the waiting replica is retired with it (found by a hostile-tenant
// run: the job stayed running with nothing serving, and its waiting replicas could still be
// placed and start a fresh max_runtime).
TEST_F(ServiceSchedulingTest, AServiceThatRanPastMaxRuntimeEndsWithItsWaitingReplicas) {
  AddNode("a1", "a", 2);
  ApplyQueue(2);
  auto submitted = cp_->Submit({{"kind", "inference"},
                                {"queue", "qa"},
                                {"replicas", 2},
                                {"max_runtime", "2m"},
                                {"command", {"sleep", "600"}},
                                {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}},
                               "", kAdmin);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t id = (*submitted)["id"];
  ASSERT_TRUE(TickUntil([&] { return Serving(Job(id)) == 2; })) << Job(id).dump(2);
  ASSERT_TRUE(cp_->Scale(id, 4, kAdmin).ok());
  Tick();
  ASSERT_EQ(Job(id)["replicas"][2]["node"], "");  // waits for quota
  json exits = json::array();
  for (int r = 0; r < 2; ++r) {
    exits.push_back({{"job", id},
                     {"replica", r},
                     {"state", "exited"},
                     {"pid", 1000 + r},
                     {"started_us", kT0},
                     {"timed_out", true},
                     {"signal", 9},
                     {"reclaim", VerifiedReclaim(2)}});
  }
  ASSERT_TRUE(cp_->Heartbeat({{"node", "a1"}, {"replicas", exits}}, kAdmin).ok());
  ASSERT_TRUE(TickUntil([&] { return Job(id)["state"] != "running"; })) << Job(id).dump(2);
  json job = Job(id);
  EXPECT_EQ(job["state"], "timed-out") << job.dump(2);
  EXPECT_THAT(job["reason"].get<std::string>(), HasSubstr("max_runtime 2m"));
  for (int r = 2; r < 4; ++r) {
    EXPECT_EQ(job["replicas"][r]["state"], "retired") << job.dump(2);
    EXPECT_EQ(job["replicas"][r]["node"], "") << "a timed-out service's replica was placed";
  }
}

}  // namespace
}  // namespace carve
