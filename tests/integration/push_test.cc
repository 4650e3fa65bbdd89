// Work reaches agents as it is decided (issue 12): agents whose heartbeat period is a minute
// start a placed job and stop a cancelled one within seconds, because they wait on the server
// for work (GET /api/v1/agents/wait) and heartbeat as soon as it is there. Ends come back as
// fast: the agent reports a replica's exit and its reclaim record as they happen, and the server
// places queued work on the freed GPUs at once.
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "integration/harness.h"

namespace carve {
namespace {

using namespace carve::it;  // NOLINT: the harness

const NodeList kOneNode = {{"gpu-a", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class PushTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kOneNode; }
  void SetUp() override {
    heartbeat_ms_ = "60000";
    PlatformTest::SetUp();
  }
};

TEST_F(PushTest, APlacedJobStartsAndACancelledOneStopsBeforeTheNextHeartbeat) {
  // Registration's first heartbeat is behind us: the next is a minute away.
  const std::string pid_file = (Shared() / "pid").string();
  json job = Submit({{"command", {"sh", "-c", "echo $$ > " + pid_file + "; exec sleep 300"}},
                     {"resources", {{"gpus", 1}}}});
  int64_t id = job["id"];
  pid_t pid = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        return absl::SimpleAtoi(absl::StripAsciiWhitespace(Slurp(pid_file)), &pid) && pid > 0;
      },
      15))
      << "the agent did not start the job before its next heartbeat\n"
      << ServerLog();
  ASSERT_EQ(ApiPost(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object())["id"], id);
  EXPECT_TRUE(Eventually([&] { return kill(pid, 0) != 0; }, 15))
      << "the agent did not stop the cancelled job before its next heartbeat";
}

TEST_F(PushTest, WaitingForWorkNeedsTheNodesOwnCredential) {
  auto answer = Api().Get("/api/v1/agents/wait?node=gpu-a&after=0&timeout_ms=0");
  ASSERT_TRUE(answer.ok()) << answer.status();  // the admin may
  EXPECT_TRUE(answer->contains("version"));
  auto bad = Api().Get("/api/v1/agents/wait?node=gpu-a&after=-1");
  EXPECT_FALSE(bad.ok());
}

const NodeList kOneGpu = {{"gpu-a", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"}};

// Ends travel as fast as work: the agent heartbeats as soon as a replica's process exits (a
// pidfd says so) and again once its reclaim record is made, and the server runs a cycle as soon
// as a heartbeat reports an end. Heartbeats, scheduling intervals and node timeouts here are
// ten minutes long, so nothing below happens at a periodic tick.
class EndPushTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kOneGpu; }
  void SetUp() override {
    heartbeat_ms_ = "600000";
    node_timeout_ms_ = "600000";
    PlatformTest::SetUp();
  }
};

TEST_F(EndPushTest, AShortJobsEndIsReportedBeforeTheNextHeartbeat) {
  int64_t id = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}}}})["id"];
  json job = WaitFinal(id, 60);
  EXPECT_EQ(job["state"], "succeeded") << job.dump(2) << ServerLog();
  EXPECT_TRUE(job["replicas"][0]["reclaim"].is_object()) << job.dump(2);
}

class FreedGpuTest : public EndPushTest {
 protected:
  void SetUp() override {
    schedule_interval_ms_ = "600000";  // cycles run only when kicked
    EndPushTest::SetUp();
  }
};

TEST_F(FreedGpuTest, AQueuedJobTakesTheGpuAsSoonAsTheJobBeforeItEnds) {
  // One GPU: the second job waits for the first's, and gets it when the first ends (a
  // submission kicks a cycle, but nothing is submitted after the second job).
  int64_t first = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}}}})["id"];
  int64_t second = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}}}})["id"];
  json a = WaitFinal(first, 60);
  json b = WaitFinal(second, 60);
  ASSERT_EQ(a["state"], "succeeded") << a.dump(2) << ServerLog();
  ASSERT_EQ(b["state"], "succeeded") << b.dump(2) << ServerLog();
  // The second was placed on the GPU the first gave back, after the first ended.
  EXPECT_GE(b["scheduled_us"].get<int64_t>(), a["ended_us"].get<int64_t>())
      << a.dump(2) << b.dump(2);
}

}  // namespace
}  // namespace carve
