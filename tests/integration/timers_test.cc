// Time-driven reclamation against the real server and agents: GPUs held without device activity
// (flagged, and stopped where the queue says so) and maintenance windows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using namespace carve::it;  // NOLINT: the harness

// A command that keeps its simulated GPUs busy (as NVML would report a running kernel).
const json kBusy = {"sh", "-c",
                    "for d in $(echo $CUDA_VISIBLE_DEVICES | tr , ' '); do echo 90 > "
                    "$CARVE_SIM_GPU_DIR/$d/utilization; done; sleep 60"};

TEST_F(PlatformTest, IdleGpusAreFlaggedAndStoppedWhereTheQueueSaysSo) {
  auto bad =
      Api().Post("/api/v1/apply",
                 json::array({{{"kind", "queue"}, {"name", "notebooks"}, {"idle_after", "soon"}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("idle_after"));
  auto queues = [](const json& idle_policy) {
    json notebooks = {{"kind", "queue"}, {"name", "notebooks"}};
    json research = {{"kind", "queue"}, {"name", "research"}};
    if (!idle_policy.is_null()) {
      notebooks.update(idle_policy);
      research["idle_after"] = idle_policy["idle_after"];
    }
    return json::array({notebooks, research});
  };
  auto h200 = [](const std::string& queue, const json& command) {
    return json{{"queue", queue},
                {"command", command},
                {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
  };
  // The busy job's GPU is seen busy before the idle policy exists: a sample taken before its
  // command wrote the utilization is idle, and on a loaded machine the write can come later than
  // idle_after (which would rightly stop it).
  ASSERT_TRUE(Api().Post("/api/v1/apply", queues(json())).ok());
  int64_t busy = Submit(h200("notebooks", kBusy))["id"];
  ASSERT_TRUE(Eventually([&] {
    json job = Job(busy);
    if (job["state"] != "running") return false;
    json rep = job["replicas"][0];
    int device = rep["grants"][0]["device"];
    return Node(rep["node"])["gpus"][device]["utilization_pct"] == 90;
  }));
  ASSERT_TRUE(
      Api().Post("/api/v1/apply", queues({{"idle_after", "1s"}, {"idle_action", "stop"}})).ok());
  int64_t stopped = Submit(h200("notebooks", {"sleep", "60"}))["id"];
  int64_t flagged = Submit(h200("research", {"sleep", "60"}))["id"];

  json done = WaitFinal(stopped);
  EXPECT_EQ(done["state"], "cancelled");
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("no activity for"));
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified");
  ASSERT_TRUE(Eventually([&] { return Job(flagged)["idle_flagged_us"] != 0; }));
  EXPECT_EQ(Job(flagged)["state"], "running") << "research only flags idle jobs";
  json idle = EventsOf("job.idle");
  ASSERT_EQ(idle.size(), 2u) << idle.dump(2);
  for (const json& e : idle) EXPECT_NE(e["subject"], absl::StrCat("job/", busy));
  EXPECT_EQ(Job(busy)["state"], "running");
  EXPECT_EQ(Job(busy)["idle_flagged_us"], 0);
}

// A sanitized job monitor takes about half a second to start (ASan, on 2 busy cores): the short
// job gets room to end inside its max_runtime, and the window starts late enough for it.
constexpr const char* kWindowIn = kSanitized ? "6s" : "3s";
constexpr const char* kShortRuntime = kSanitized ? "3s" : "1s";

TEST_F(PlatformTest, MaintenanceWindowKeepsLongJobsOffThenDrainsAndReturns) {
  // Already on gpu-a (its L40S are the only ones) when the window is planned.
  int64_t early = Submit(
      {{"command", {"sleep", "60"}},
       {"resources", {{"mode", "shared"}, {"gpu_compute", "50%"}, {"gpu_model", {"L40S"}}}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(early)["state"] == "running"; }));
  auto bad = Api().Post("/api/v1/nodes/gpu-a/maintenance", json{{"lasts", "-1s"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Node("gpu-a")["maintenance"].is_null()) << "a refused window changed the node";
  ASSERT_TRUE(Api()
                  .Post("/api/v1/nodes/gpu-a/maintenance",
                        json{{"starts_in", kWindowIn}, {"lasts", "2s"}, {"reason", "firmware"}})
                  .ok());
  auto h200 = [](const json& extra) {
    json spec = {{"command", {"sleep", "60"}},
                 {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
    spec.update(extra);
    return spec;
  };
  int64_t first = Submit(h200(json::object()))["id"];
  ASSERT_TRUE(Eventually([&] { return Job(first)["state"] == "running"; }));
  EXPECT_EQ(Job(first)["replicas"][0]["node"], "gpu-b")
      << "an unbounded job landed before a window";
  int64_t waits = Submit(h200(json::object()))["id"];
  int64_t short_job =
      Submit(h200({{"max_runtime", kShortRuntime}, {"command", {"sleep", "0.2"}}}))["id"];
  json quick = WaitFinal(short_job);
  EXPECT_EQ(quick["state"], "succeeded");
  EXPECT_EQ(quick["replicas"][0]["node"], "gpu-a") << "a job that ends in time may use the node";
  EXPECT_EQ(Job(waits)["state"], "queued");
  EXPECT_THAT(Job(waits)["reason"].get<std::string>(), HasSubstr("taint"));

  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.maintenance-started").empty(); }));
  json started = EventsOf("node.maintenance-started")[0];
  EXPECT_EQ(started["details"]["jobs"], json::array({early}));
  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.maintenance-ended").empty(); }));
  // Back in service: the drained job runs again and the waiting one gets the node.
  EXPECT_TRUE(Eventually([&] { return Job(waits)["state"] == "running"; })) << Job(waits).dump(2);
  EXPECT_EQ(Job(waits)["replicas"][0]["node"], "gpu-a");
  EXPECT_TRUE(Eventually([&] { return Job(early)["state"] == "running"; }));
  EXPECT_EQ(Job(early)["attempt"], 1);
  EXPECT_THAT(Job(early)["attempts"][0]["cause"].get<std::string>(), HasSubstr("firmware"));
}

// A silent node is not-ready first; its jobs are lost only after lost_after more silence, or as
// soon as an admin declares it dead (which also releases its fenced devices).
TEST_F(PlatformTest, AnAdminDeclaresASilentNodeDead) {
  int64_t id = Submit({{"command", {"sleep", "60"}},
                       {"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; }));
  ASSERT_EQ(Job(id)["replicas"][0]["node"], "gpu-b");
  auto alive = Api().Post("/api/v1/nodes/gpu-a/dead", json::object());
  ASSERT_FALSE(alive.ok());
  EXPECT_THAT(alive.status().message(), HasSubstr("is heartbeating"));
  Kill(agents_[1], SIGKILL);
  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.not-ready").empty(); }));
  ASSERT_TRUE(Api().Post("/api/v1/nodes/gpu-b/dead", json::object()).ok());
  json node = Node("gpu-b");
  EXPECT_EQ(node["state"], "dead");
  EXPECT_TRUE(node["fenced"].empty());
  json dead = EventsOf("node.declared-dead");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0]["actor"], "user:admin");
  EXPECT_EQ(dead[0]["details"]["unfenced"][0]["job"], id);
  EXPECT_EQ(EventsOf("job.lost").size(), 1u);
  EXPECT_EQ(Job(id)["attempt"], 1) << "requeued by its policy";
  // The agent comes back: the node is ready again and the orphan replica is stopped.
  agents_[1] = StartAgent(1);
  EXPECT_TRUE(Eventually([&] { return Node("gpu-b")["state"] == "ready"; }));
}

}  // namespace
}  // namespace carve
