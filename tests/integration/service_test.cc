// Services (inference, recovery failover) against the real server and agents: a lost or drained
// replica is replaced alone, a planned drain never drops below the replica count, and scaling
// down reclaims the removed replicas with evidence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using namespace carve::it;  // NOLINT: the harness

class ServiceTest : public PlatformTest {
 protected:
  // A one-H200-per-replica service, in `queue` when given; returns once every replica serves.
  int64_t SubmitService(int replicas, const std::string& queue = "") {
    json spec = {{"kind", "inference"},
                 {"replicas", replicas},
                 {"command", {"sleep", "60"}},
                 {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
    if (!queue.empty()) spec["queue"] = queue;
    int64_t id = Submit(spec)["id"];
    EXPECT_TRUE(Eventually([&] {
      return Serving(Job(id)).size() == static_cast<size_t>(replicas);
    })) << Job(id).dump(2);
    return id;
  }

  // Indexes of the replicas that serve: running and not being replaced.
  static std::vector<int> Serving(const json& job) {
    std::vector<int> out;
    for (size_t i = 0; i < job["replicas"].size(); ++i) {
      const json& r = job["replicas"][i];
      if (r["state"] == "running" && !r.contains("retire")) out.push_back(static_cast<int>(i));
    }
    return out;
  }

  static int Running(const json& job) {
    int n = 0;
    for (const json& r : job["replicas"]) n += r["state"] == "running";
    return n;
  }

  void Post(const std::string& path, const json& body = json::object()) {
    auto r = Api().Post(path, body);
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
  }
};

// A drain moves each replica make-before-break: the old one serves until its replacement runs,
// and waits as long as there is no room for one.
TEST_F(ServiceTest, DrainNeverDropsBelowTheReplicaCount) {
  Post("/api/v1/nodes/gpu-b/cordon");
  int64_t id = SubmitService(2);  // both on gpu-a's two H200s
  json before = Job(id);
  ASSERT_EQ(before["replicas"][0]["node"], "gpu-a");
  ASSERT_EQ(before["replicas"][1]["node"], "gpu-a");
  Post("/api/v1/nodes/gpu-b/uncordon");
  Post("/api/v1/nodes/gpu-a/drain");
  // gpu-b has one H200: one replica moves, the other keeps serving on gpu-a meanwhile.
  int lowest = 2;
  ASSERT_TRUE(Eventually([&] {
    json j = Job(id);
    lowest = std::min(lowest, Running(j));
    int retired = 0;
    for (const json& r : j["replicas"]) retired += r["state"] == "retired";
    return retired == 1;
  })) << Job(id).dump(2);
  for (int i = 0; i < 10; ++i) {
    lowest = std::min(lowest, Running(Job(id)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  json mid = Job(id);
  EXPECT_GE(lowest, 2) << "a planned drain dropped the service below its replicas";
  EXPECT_EQ(mid["state"], "running");
  EXPECT_EQ(mid["attempt"], 0);
  ASSERT_EQ(mid["replicas"].size(), 4u);
  std::map<std::string, int> serving_on;
  for (int i : Serving(mid)) ++serving_on[mid["replicas"][i]["node"]];
  EXPECT_EQ(serving_on["gpu-b"], 1);
  int waiting = 0, draining = 0;
  for (const json& r : mid["replicas"]) {
    if (r["state"] == "retired") {
      EXPECT_EQ(r["reclaim"]["status"], "verified");
      EXPECT_THAT(r["retire"].get<std::string>(), HasSubstr("drain of node gpu-a"));
    }
    waiting += r["state"] == "pending" && r["node"] == "";
    draining += r["state"] == "running" && r.contains("retire");
  }
  EXPECT_EQ(waiting, 1);
  EXPECT_EQ(draining, 1) << "the replica without a replacement keeps serving";
  EXPECT_FALSE(EventsOf("job.replica-waiting").empty());
}

// Losing a node replaces only the replica that ran there; the other never stops.
TEST_F(ServiceTest, NodeLossReplacesOnlyTheLostReplica) {
  Post("/api/v1/nodes/gpu-a/cordon?gpu=1");  // one H200 on each node for the two replicas
  int64_t id = SubmitService(2);
  Post("/api/v1/nodes/gpu-a/uncordon?gpu=1");
  json before = Job(id);
  int on_a = before["replicas"][0]["node"] == "gpu-a" ? 0 : 1;
  ASSERT_EQ(before["replicas"][1 - on_a]["node"], "gpu-b");
  Kill(agents_[1], SIGKILL);  // gpu-b
  // One snapshot for both conditions: judged on two, the two original replicas (still serving
  // before the loss was noticed) and a later snapshot's pending replacement passed together, and
  // the replacement had no node yet (seen under load).
  json after;
  ASSERT_TRUE(Eventually([&] {
    after = Job(id);
    return Serving(after).size() == 2 && after["replicas"].size() == 3;
  })) << after.dump(2);
  EXPECT_EQ(after["state"], "running");
  EXPECT_EQ(after["attempt"], 0);
  EXPECT_EQ(after["replicas"][on_a]["pid"], before["replicas"][on_a]["pid"]);
  EXPECT_EQ(after["replicas"][1 - on_a]["state"], "lost");
  EXPECT_EQ(after["replicas"][2]["node"], "gpu-a");
  EXPECT_EQ(after["replicas"][2]["slot"], before["replicas"][1 - on_a]["slot"]);
  json failover = EventsOf("job.failover");
  ASSERT_EQ(failover.size(), 1u);
  EXPECT_THAT(failover[0]["reason"].get<std::string>(), HasSubstr("gpu-b stopped heartbeating"));
  EXPECT_TRUE(Node("gpu-b")["fenced"].contains("1")) << "the lost replica's H200 must stay fenced";
  // The node returns: its orphan is stopped and the device unfenced.
  agents_[1] = StartAgent(1);
  EXPECT_TRUE(Eventually([&] { return Node("gpu-b")["fenced"].empty(); })) << Node("gpu-b").dump(2);
}

TEST_F(ServiceTest, ScaleDownReclaimsTheRemovedReplicas) {
  int64_t id = SubmitService(3);
  auto bad = Api().Post(absl::StrCat("/api/v1/jobs/", id, "/scale"), json{{"replicas", 0}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not between 1 and 1000"));
  json batch = Submit({{"command", {"sleep", "30"}}});
  auto not_service = Api().Post(absl::StrCat("/api/v1/jobs/", batch["id"].get<int64_t>(), "/scale"),
                                json{{"replicas", 2}});
  ASSERT_FALSE(not_service.ok());
  EXPECT_THAT(not_service.status().message(), HasSubstr("only failover jobs scale"));
  EXPECT_EQ(Job(id)["spec"]["replicas"], 3) << "a refused scale changed the job";

  Post(absl::StrCat("/api/v1/jobs/", id, "/scale"), json{{"replicas", 1}});
  ASSERT_TRUE(Eventually([&] {
    json j = Job(id);
    int retired = 0;
    for (const json& r : j["replicas"]) retired += r["state"] == "retired";
    return retired == 2;
  })) << Job(id).dump(2);
  json down = Job(id);
  EXPECT_EQ(down["state"], "running");
  EXPECT_EQ(down["spec"]["replicas"], 1);
  EXPECT_EQ(Serving(down), std::vector<int>{0});
  for (int i : {1, 2}) {
    const json& r = down["replicas"][i];
    EXPECT_EQ(r["reclaim"]["status"], "verified") << r.dump(2);
    EXPECT_FALSE(r["reclaim"]["checks"].empty());
  }
  EXPECT_EQ(EventsOf("job.replica-retired").size(), 2u);
  // Their GPUs are free again: three more whole H200 jobs fit beside the remaining replica.
  for (int i = 0; i < 2; ++i) {
    json j = Submit(
        {{"command", {"sleep", "30"}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
    EXPECT_TRUE(Eventually([&] { return Job(j["id"])["state"] == "running"; }));
  }
  Post(absl::StrCat("/api/v1/jobs/", id, "/scale"), json{{"replicas", 2}});
  json waiting = Job(id);
  EXPECT_EQ(waiting["replicas"].size(), 4u);
  EXPECT_TRUE(Eventually([&] { return !EventsOf("job.replica-waiting").empty(); }))
      << "no H200 is free for the new replica";
}

// Two pools: a queue bound to pool a, with quota for exactly its service's two replicas.
const NodeList kPools = {{"pa-1", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"pa-2", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"pa-3", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"pb-1", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class ServicePoolTest : public ServiceTest {
 protected:
  const NodeList& Nodes() const override { return kPools; }
  std::vector<std::string> AgentFlags(int i) const override {
    return {"--label", i < 3 ? "pool=a" : "pool=b"};
  }
  void SetUp() override {
    ServiceTest::SetUp();
    if (HasFatalFailure()) return;
    ApiPost("/api/v1/apply",
            json::array(
                {{{"kind", "queue"}, {"name", "qa"}, {"pool", "a"}, {"quota", {{"gpus", 2}}}}}));
  }
  json Explain(int64_t id) { return ApiGet(absl::StrCat("/api/v1/jobs/", id, "/explain")); }
};

// A replica lost with its pool-a node is replaced in pool a only: pool b's free H200s never take
// it; it waits, saying the pool holds it, and lands once a pool-a node has room.
TEST_F(ServicePoolTest, FailoverReplicaStaysInItsQueuesPool) {
  Post("/api/v1/nodes/pa-3/cordon");
  int64_t id = SubmitService(2, "qa");  // on pa-1 and pa-2
  json before = Job(id);
  int on_2 = before["replicas"][0]["node"] == "pa-2" ? 0 : 1;
  ASSERT_EQ(before["replicas"][on_2]["node"], "pa-2") << before.dump(2);
  Kill(agents_[1], SIGKILL);  // pa-2
  ASSERT_TRUE(Eventually([&] {
    json j = Job(id);
    return j["replicas"].size() == 3 && j["replicas"][2]["node"] == "" &&
           absl::StrContains(j.value("explanation", ""), "pool");
  })) << Job(id).dump(2);
  json e = Explain(id);
  EXPECT_EQ(e["state"], "running");
  EXPECT_EQ(e["gate"], "placement") << e.dump(2);  // not quota: it holds what the lost one held
  EXPECT_GE(e["reasons"].value("pool", 0), 1) << e.dump(2);
  EXPECT_THAT(e["explanation"].get<std::string>(), HasSubstr("replacement of replica slot"));
  EXPECT_FALSE(EventsOf("job.replica-waiting").empty());
  EXPECT_TRUE(EventsOf("job.replica-scheduled").empty()) << "placed outside its pool";

  Post("/api/v1/nodes/pa-3/uncordon");
  ASSERT_TRUE(Eventually([&] {
    json j = Job(id);
    return Serving(j).size() == 2 && j["replicas"][2]["node"] == "pa-3";
  })) << Job(id).dump(2);
  EXPECT_EQ(Job(id)["explanation"], "");
}

// Scaling up past the queue's quota waits and says why; the other replicas keep serving.
TEST_F(ServicePoolTest, ScaleUpBeyondQuotaWaitsWithAnExplanation) {
  Post("/api/v1/nodes/pa-1/cordon");  // pa-3 stays free for the third replica
  int64_t id = SubmitService(2, "qa");
  Post("/api/v1/nodes/pa-1/uncordon");
  Post(absl::StrCat("/api/v1/jobs/", id, "/scale"), json{{"replicas", 3}});
  ASSERT_TRUE(Eventually([&] { return Explain(id).value("gate", "") == "quota"; }))
      << Explain(id).dump(2);
  json e = Explain(id);
  EXPECT_THAT(e["explanation"].get<std::string>(),
              HasSubstr("scale-up replica slot 2 waits: queue qa: gpus 2/2 used, needs 1"));
  json j = Job(id);
  EXPECT_EQ(j["replicas"][2]["node"], "");
  EXPECT_EQ(Serving(j).size(), 2u);
  // More quota: it starts.
  ApiPost(
      "/api/v1/apply",
      json::array({{{"kind", "queue"}, {"name", "qa"}, {"pool", "a"}, {"quota", {{"gpus", 3}}}}}));
  EXPECT_TRUE(Eventually([&] { return Serving(Job(id)).size() == 3; })) << Job(id).dump(2);
}

}  // namespace
}  // namespace carve
