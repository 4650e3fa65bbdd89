// R2: a reclaim that never reports. After a controller crash an 8-GPU job stayed `reclaiming`
// for over 6 minutes, `carve cancel` did nothing and its GPUs leaked. Now the reclaim times out
// into a quarantine of its devices with evidence, the job ends saying why, `carve cancel` says
// what the job still waits for, and an admin returns the devices with `carve apply`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

class ReclaimTimeoutTest : public PlatformTest {
 protected:
  // The server again on the same data, with `extra` flags.
  void RestartServerWith(const std::vector<std::string>& extra) {
    Kill(server_, SIGKILL);
    std::filesystem::remove(dir_ / "data/server");
    std::vector<std::string> args = {CARVE_BINARY,
                                     "server",
                                     "--data",
                                     (dir_ / "data").string(),
                                     "--listen",
                                     absl::StrCat("127.0.0.1:", port_),
                                     "--schedule-interval-ms",
                                     "50"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = Spawn(args, (dir_ / "server.log").string());
    ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_ / "data/server"); }))
        << Slurp((dir_ / "server.log").string());
    // Every node back: one whose registration had not reached the disk when the server was
    // killed registers again first (a job submitted before that could fit nowhere).
    ASSERT_TRUE(Eventually([&] {
      auto nodes = Api().Get("/api/v1/nodes");
      return nodes.ok() && nodes->size() == Nodes().size();
    }));
  }

  void TearDown() override {
    if (stopped_ > 0) kill(stopped_, SIGCONT);
    PlatformTest::TearDown();
  }

  pid_t stopped_ = 0;
};

TEST_F(ReclaimTimeoutTest, ASilentReclaimQuarantinesItsDevicesUntilAnAdminClearsThem) {
  // Nodes stay ready for the whole test: only the reclaim evidence is missing.
  RestartServerWith({"--reclaim-timeout-ms", "4000", "--node-timeout-ms", "120000"});
  ASSERT_FALSE(HasFatalFailure());
  // The command exits at once; a child ignoring SIGTERM keeps the agent's reclaim busy for its
  // stop grace (3 s), long enough to freeze the agent while the job is reclaiming.
  json job = Submit({{"command", {"sh", "-c", "(trap '' TERM; exec sleep 120) & exit 0"}},
                     {"resources", {{"gpus", 2}, {"gpu_model", "H200"}}}});
  int64_t id = job["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "reclaiming"; }))
      << Job(id).dump(2) << ServerLog() << "\n--- gpu-a ---\n"
      << Slurp((dir_ / "gpu-a.log").string());
  stopped_ = agents_[0];  // gpu-a: the only node with two H200
  ASSERT_EQ(Job(id)["replicas"][0]["node"], "gpu-a");
  ASSERT_TRUE(StopChild(stopped_));

  // Cancel answers what the job still waits for instead of doing nothing.
  auto cancel = Api().Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object());
  ASSERT_FALSE(cancel.ok()) << cancel->dump(2);
  EXPECT_EQ(cancel.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(cancel.status().message(), HasSubstr("is already stopping"));
  EXPECT_THAT(cancel.status().message(),
              HasSubstr("Waiting for the reclaim evidence of replica 0 from node gpu-a (devices "
                        "0, 1)"));
  EXPECT_THAT(cancel.status().message(), HasSubstr("within the reclaim timeout (4s)"));
  EXPECT_FALSE(Job(id)["cancel_requested"]);

  ASSERT_TRUE(Eventually([&] { return !EventsOf("job.reclaim-timed-out").empty(); }))
      << Job(id).dump(2);
  json done = WaitFinal(id);
  EXPECT_EQ(done["state"], "succeeded");  // its command's own end; the reclaim is not claimed
  EXPECT_THAT(done["reason"].get<std::string>(),
              HasSubstr("reclaim unverified: no reclaim evidence from node gpu-a within 4s; "
                        "devices quarantined"));
  json reclaim = done["replicas"][0]["reclaim"];
  EXPECT_EQ(reclaim["status"], "unverified");
  EXPECT_EQ(reclaim["timed_out"], true);
  EXPECT_EQ(reclaim["quarantine"], json::array({0, 1}));
  json quarantined = Node("gpu-a")["quarantined"];
  EXPECT_THAT(quarantined["0"].get<std::string>(),
              HasSubstr(absl::StrCat("job ", id, ": reclaim-report: no reclaim evidence")));
  EXPECT_TRUE(quarantined.contains("1"));
  json events = EventsOf("device.quarantined");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["actor"], "scheduler");
  EXPECT_EQ(events[0]["details"]["job"], id);

  // Nothing lands on the quarantined GPUs, even once the agent is back...
  kill(stopped_, SIGCONT);
  stopped_ = 0;
  json next =
      Submit({{"command", {"sleep", "60"}}, {"resources", {{"gpus", 2}, {"gpu_model", "H200"}}}});
  int64_t waiting = next["id"];
  ASSERT_TRUE(Eventually([&] { return !Job(waiting)["explanation"].get<std::string>().empty(); }))
      << Job(waiting).dump(2);
  EXPECT_EQ(Job(waiting)["state"], "queued");
  // ...and the late evidence changes nothing of what was recorded.
  EXPECT_EQ(Job(id)["replicas"][0]["reclaim"]["status"], "unverified");
  // An admin clears the quarantine; the devices serve again.
  auto cleared =
      Api().Post("/api/v1/apply", json::array({{{"kind", "node"},
                                                {"name", "gpu-a"},
                                                {"gpus",
                                                 {{{"index", 0}, {"state", "available"}},
                                                  {{"index", 1}, {"state", "available"}}}}}}));
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(EventsOf("device.cleared").size(), 2u);
  ASSERT_TRUE(Eventually([&] { return Job(waiting)["state"] == "running"; }))
      << Job(waiting).dump(2);
  EXPECT_TRUE(Node("gpu-a")["quarantined"].empty());
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", waiting, "/cancel"), json::object()).ok());
  EXPECT_EQ(WaitFinal(waiting)["state"], "cancelled");
}

}  // namespace
}  // namespace carve
