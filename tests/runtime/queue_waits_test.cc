// Why jobs wait, recorded per job and per queue (runtime/control_plane_waits.cc), and the queue
// status kept as jobs enter and leave the queue. A real control plane and SQLite store on a
// virtual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

class QueueWaitsTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("queue-waits", ControlPlane::Options{}, [this] { return now_.load(); });
  }
  int64_t Submit(const std::string& name, int gpus) {
    json spec = {{"name", name}, {"command", {"sleep", "600"}}, {"resources", {{"gpus", gpus}}}};
    // Jobs bigger than any node are part of the mix: queued, not refused.
    auto job = cp_->Submit(spec, "", kAdmin, /*allow_unschedulable=*/true);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }
  void Quota(int gpus) {
    auto applied = cp_->Apply(
        json::array({{{"kind", "queue"}, {"name", "default"}, {"quota", {{"gpus", gpus}}}}}),
        kAdmin);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  void Cycle() {
    auto scheduled = cp_->ScheduleOnce();
    ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  }
  std::vector<std::string> Gates(int64_t id) {
    std::vector<std::string> out;
    auto e = cp_->Explain(id);
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) {
      for (const json& g : (*e)["gates"]) out.push_back(g["gate"]);
    }
    return out;
  }
  // The events of `type` about `subject`.
  std::vector<json> EventsOf(const std::string& type, const std::string& subject) {
    std::vector<json> out;
    const json events = cp_->audit().Events(0, 100000).value();
    for (const json& e : events) {
      if (e["type"] == type && e["subject"] == subject) out.push_back(e);
    }
    return out;
  }
  json QueueNamed(const std::string& name) {
    for (const json& q : cp_->QueueStatus(kAdmin)) {
      if (q["name"] == name) return q;
    }
    return json();
  }

  std::atomic<int64_t> now_{kT0};
};

// A queue crossing its quota adds or removes the quota gate of every waiting job of the queue at
// once. Each crossing rewrote every such job's record and wrote a job.waiting event per job
// (thousands per cycle at 100,000 queued jobs); it is now one event for the queue, and a job's
// record keeps its own reason (placement here), which stays true on both sides of the crossing.
TEST_F(QueueWaitsTest, AQueueCrossingItsQuotaIsRecordedOnceNotInEveryJob) {
  RegisterH200Node("n1", 4, kAdmin);
  Quota(8);
  int64_t small = Submit("small", 1);
  Cycle();
  ASSERT_EQ((*cp_->GetJob(small))["state"], "scheduled");
  std::vector<int64_t> big;  // 1 + 8 is over the quota, and no node has 8 GPUs
  for (int i = 0; i < 3; ++i) big.push_back(Submit(absl::StrCat("big", i), 8));
  Cycle();
  for (int64_t id : big) {
    EXPECT_EQ(Gates(id), (std::vector<std::string>{"quota", "placement"}));
    json record = *cp_->GetJob(id);
    EXPECT_EQ(record["explanation"].get<std::string>().find("quota"), std::string::npos)
        << record.dump();
  }
  std::vector<json> holds = EventsOf("queue.quota-holds", "queue/default");
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0]["details"]["jobs"], 3) << holds[0].dump();
  EXPECT_EQ(holds[0]["details"]["used"], "1") << holds[0].dump();

  ASSERT_TRUE(cp_->Cancel(small, kAdmin).ok());  // never started: its GPU is free at once
  // The big jobs cannot use the freed GPU, so they stay parked until a full cycle judges them.
  now_ += 6'000'000;
  Cycle();
  ASSERT_TRUE(cp_->LastCycle().full) << cp_->LastCycle().why;
  for (int64_t id : big) {
    EXPECT_EQ(Gates(id), (std::vector<std::string>{"placement"}));
    EXPECT_EQ(EventsOf("job.waiting", absl::StrCat("job/", id)).size(), 1u) << id;
  }
  EXPECT_EQ(EventsOf("queue.quota-frees", "queue/default").size(), 1u);
  Cycle();  // nothing changed: nothing recorded again
  EXPECT_EQ(EventsOf("queue.quota-holds", "queue/default").size(), 1u);
  EXPECT_EQ(EventsOf("queue.quota-frees", "queue/default").size(), 1u);
}

// The queue status counts queued jobs and their demand as jobs enter and leave the queued state
// (it walked and charged every queued job under the lock: 145 ms at 100,000 queued).
TEST_F(QueueWaitsTest, TheQueueStatusFollowsJobsInAndOutOfTheQueue) {
  RegisterH200Node("n1", 2, kAdmin);
  int64_t a = Submit("a", 1), b = Submit("b", 4), c = Submit("c", 1);
  json q = QueueNamed("default");
  EXPECT_EQ(q["pending"], 3) << q.dump();
  EXPECT_EQ(q["pending_demand"]["gpus"], "6") << q.dump();
  Cycle();  // a and c fit; b never can
  q = QueueNamed("default");
  EXPECT_EQ(q["pending"], 1) << q.dump();
  EXPECT_EQ(q["running"], 2) << q.dump();
  EXPECT_EQ(q["pending_demand"]["gpus"], "4") << q.dump();
  ASSERT_TRUE(cp_->Cancel(b, kAdmin).ok());
  ASSERT_TRUE(cp_->Cancel(a, kAdmin).ok());
  ASSERT_TRUE(cp_->Cancel(c, kAdmin).ok());
  Cycle();
  q = QueueNamed("default");
  EXPECT_EQ(q["pending"], 0) << q.dump();
  EXPECT_EQ(q["running"], 0) << q.dump();
  EXPECT_TRUE(q["pending_demand"].empty()) << q.dump();
}

// The queue status gives the waits of the jobs that started from each queue (submission to first
// placement): percentiles by nearest rank over the last 1,024.
TEST_F(QueueWaitsTest, TheQueueStatusGivesWaitPercentilesOfRecentStarts) {
  RegisterH200Node("n1", 4, kAdmin);
  Submit("a", 1);
  Submit("b", 1);
  now_ += 2'000'000;
  Cycle();
  int64_t c = Submit("c", 1);
  now_ += 5'000'000;  // (the node, which never heartbeats here, is not-ready after 10 s)
  Cycle();
  ASSERT_EQ((*cp_->GetJob(c))["state"], "scheduled") << cp_->GetJob(c)->dump(1);
  json waits = QueueNamed("default")["waits"];
  EXPECT_EQ(waits["jobs"], 3) << waits.dump();
  EXPECT_EQ(waits["p50_us"], 2'000'000);
  EXPECT_EQ(waits["p90_us"], 5'000'000);
  EXPECT_EQ(waits["max_us"], 5'000'000);
}

}  // namespace
}  // namespace carve
