// A node cut off from the server (its network cable: scripts/poc-dev-faults node-down) whose
// agent fences itself (carve agent --fence-after-ms) stops its replicas before the server
// declares them lost and runs their jobs elsewhere: no job runs twice at once, and when the node
// returns its word on when it stopped them is recorded (node.fenced-itself).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using namespace carve::it;  // NOLINT: the harness

// Whether `pid` is a live process (a zombie waiting for its parent is not).
bool Running(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

class FenceTest : public PlatformTest {
 protected:
  void SetUp() override {
    agent_args_ = {"--fence-after-ms", "3000"};
    PlatformTest::SetUp();
  }

  std::filesystem::path CutOffFile(const std::string& node) const {
    return dir_ / "jobs" / node / "simgpu" / "cut-off";
  }

  // A one-H200 job running `command` (recovery requeue) placed on gpu-b, gpu-a's H200s cordoned
  // meanwhile (and after, with `keep_a_cordoned`): its record once it runs.
  json RunOnB(const json& command, bool keep_a_cordoned = false) {
    Post("/api/v1/nodes/gpu-a/cordon?gpu=0");
    Post("/api/v1/nodes/gpu-a/cordon?gpu=1");
    int64_t id = Submit({{"command", command},
                         {"recovery", {{"policy", "requeue"}}},
                         {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}})["id"];
    json job;
    EXPECT_TRUE(Eventually([&] {
      job = Job(id);
      return job["state"] == "running" && job["replicas"][0].value("pid", 0) > 0;
    })) << job.dump(2);
    if (!keep_a_cordoned) {
      Post("/api/v1/nodes/gpu-a/uncordon?gpu=0");
      Post("/api/v1/nodes/gpu-a/uncordon?gpu=1");
    }
    EXPECT_EQ(job["replicas"][0]["node"], "gpu-b") << job.dump(2);
    return job;
  }

  void Post(const std::string& path) { ApiPost(path, json::object()); }
};

TEST_F(FenceTest, ACutOffNodeStopsItsReplicasBeforeTheirJobsRunElsewhere) {
  json before = RunOnB(json::array({"sleep", "600"}));
  const int64_t id = before["id"];
  const int64_t pid = before["replicas"][0]["pid"];
  ASSERT_TRUE(Running(pid));
  EXPECT_EQ(Node("gpu-b")["self_fence"]["after_ms"], 3000) << Node("gpu-b").dump(2);

  std::ofstream(CutOffFile("gpu-b").string()) << "";
  // The moment the server declares the job lost, its process on the cut-off node is gone: the
  // agent stopped it after 3 s of silence, the server waits 3 s + the 3 s grace + 1 s.
  json lost;
  ASSERT_TRUE(Eventually([&] {
    lost = EventsOf("node.lost");
    return !lost.empty();
  })) << ServerLog();
  EXPECT_FALSE(Running(pid)) << "job " << id << "'s process " << pid
                             << " still runs on the cut-off node when its job is lost";
  EXPECT_THAT(lost[0]["reason"].get<std::string>(), HasSubstr("promised to stop them itself"));
  EXPECT_EQ(lost[0]["details"]["self_fence"]["after_ms"], 3000) << lost[0].dump(2);
  EXPECT_EQ(lost[0]["details"]["jobs"], json::array({id})) << lost[0].dump(2);

  // Its next attempt runs on gpu-a, alone.
  json again;
  ASSERT_TRUE(Eventually([&] {
    again = Job(id);
    return again["state"] == "running" && again["attempt"] == 1;
  })) << again.dump(2);
  EXPECT_EQ(again["replicas"][0]["node"], "gpu-a");

  // The node returns and says when it stopped the replica: before the loss.
  std::filesystem::remove(CutOffFile("gpu-b"));
  json fenced;
  ASSERT_TRUE(Eventually([&] {
    fenced = EventsOf("node.fenced-itself");
    return !fenced.empty();
  })) << ServerLog();
  const json& details = fenced[0]["details"];
  EXPECT_EQ(details["before_lost"], true) << fenced[0].dump(2);
  ASSERT_EQ(details["replicas"].size(), 1u) << fenced[0].dump(2);
  EXPECT_EQ(details["replicas"][0]["job"], id);
  EXPECT_LT(details["replicas"][0]["fenced_us"].get<int64_t>(), details["lost_us"].get<int64_t>());
  EXPECT_EQ(fenced[0]["subject"], "node/gpu-b");
  EXPECT_TRUE(Eventually([&] { return Node("gpu-b")["fenced"].empty(); })) << Node("gpu-b").dump(2);
}

// Without self-fencing a lost node's process runs on; when the node returns the server stops it,
// and the job's next attempt, placed on that same node (the only one with room), must run as its
// own: the old process's reports name attempt 0. Matched by (job, replica, node) alone, the old
// process's end was applied to the new attempt, which then "ended" before it started.
class NodeReturnTest : public FenceTest {
 protected:
  void SetUp() override { PlatformTest::SetUp(); }
};

TEST_F(NodeReturnTest, AJobLostWithItsNodeRunsAgainThereAsItsOwnAttempt) {
  json job = RunOnB(json::array({"sh", "-c",
                                 "if [ \"$CARVE_ATTEMPT\" = 0 ]; then sleep 600; "
                                 "else echo attempt $CARVE_ATTEMPT; fi"}),
                    true);
  const int64_t id = job["id"];
  const int64_t old_pid = job["replicas"][0]["pid"];
  std::ofstream(CutOffFile("gpu-b").string()) << "";
  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.lost").empty(); })) << ServerLog();
  EXPECT_TRUE(Running(old_pid)) << "no self-fencing here: the old process runs on";
  std::filesystem::remove(CutOffFile("gpu-b"));
  json done = WaitFinal(id, 60);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["attempt"], 1) << done.dump(2);
  EXPECT_EQ(done["replicas"][0]["node"], "gpu-b");
  EXPECT_NE(done["replicas"][0]["pid"], old_pid) << done.dump(2);
  EXPECT_THAT(Logs(id), HasSubstr("attempt 1"));
  EXPECT_TRUE(Eventually([&] { return !Running(old_pid); })) << "the server stops the old one";
}

// The promise delays the loss of a node's jobs, so it is bounded (an hour, and a 10 min grace).
TEST_F(FenceTest, ARegistrationOutsideTheBoundsOfSelfFencingIsRefused) {
  for (const json& fence :
       {json{{"after_ms", -1}, {"grace_ms", 0}}, json{{"after_ms", 3'600'001}, {"grace_ms", 0}},
        json{{"after_ms", 1000}, {"grace_ms", 600'001}}}) {
    json body = {{"name", "gpu-z"},   {"cpu_milli", 1000},     {"memory_mib", 1024},
                 {"backend", "nvml"}, {"gpus", json::array()}, {"self_fence", fence}};
    std::ifstream in((dir_ / "data/agent.token").string());
    std::string join;
    in >> join;
    auto r = ApiClient(url_, join, ca_).Post("/api/v1/agents/register", body);
    ASSERT_FALSE(r.ok()) << fence.dump();
    EXPECT_THAT(r.status().message(), HasSubstr("self_fence: after_ms must be 0 to 3600000"));
  }
  EXPECT_TRUE(Node("gpu-z").is_null()) << "a refused registration left a node";
}

}  // namespace
}  // namespace carve
