// Work reaches agents as it is decided (issue 12): agents whose heartbeat period is a minute
// start a placed job and stop a cancelled one within seconds, because they wait on the server
// for work (GET /api/v1/agents/wait) and heartbeat as soon as it is there.
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

}  // namespace
}  // namespace carve
