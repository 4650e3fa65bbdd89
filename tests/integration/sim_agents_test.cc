// `carve sim agents` and `carve sim submit` against a real server (issue 17): simulated nodes
// join with the join token, run the jobs a real scheduler places on them on a virtual workload,
// and their records say nothing was checked; a second run registers the same nodes with the
// credentials the first one kept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const NodeList kNoNodes = {};

class SimAgentsTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoNodes; }

  pid_t Swarm(const std::string& log) {
    return Spawn({CARVE_BINARY, "--server", url_, "sim", "agents", "--nodes", "12", "--profile",
                  "mixed", "--heartbeat-ms", "100", "--report-s", "1", "--join-token-file",
                  (dir_ / "data/agent.token").string(), "--credentials",
                  (dir_ / "swarm.credentials").string(), "--json", (dir_ / "swarm.json").string()},
                 (dir_ / log).string());
  }

  size_t OnlineNodes() {
    auto nodes = Api().Get("/api/v1/nodes");
    size_t n = 0;
    for (const json& node : nodes.ok() ? *nodes : json::array()) {
      n += node.value("state", "") == "ready";
    }
    return n;
  }
};

TEST_F(SimAgentsTest, VirtualNodesRunPlacedJobsAndSayNothingWasChecked) {
  pid_t swarm = Swarm("swarm.log");
  ASSERT_TRUE(Eventually([&] { return OnlineNodes() == 12; }))
      << ApiGet("/api/v1/nodes").dump(2) << Slurp((dir_ / "swarm.log").string());
  // The mixed profile: 8×H100, 8×A100-80GB, 8×H200, 4×L40S in turn.
  json nodes = ApiGet("/api/v1/nodes");
  std::map<std::string, size_t> gpus;
  for (const json& node : nodes) gpus[node["name"]] = node["gpus"].size();
  EXPECT_EQ(gpus["sim-00001"], 8u);
  EXPECT_EQ(gpus["sim-00004"], 4u);

  CliRun load = RunShell(absl::StrCat(CARVE_BINARY, " --server ", url_, " --token ", token_,
                                      " sim submit --jobs 40 --clients 4 --command 'sleep 1'"));
  ASSERT_EQ(load.exit, 0) << load.out;
  EXPECT_THAT(load.out, HasSubstr("40 jobs in"));
  EXPECT_THAT(load.out, HasSubstr("0 failed"));
  json jobs = ApiGet("/api/v1/jobs?limit=100");
  ASSERT_EQ(jobs.size(), 40u);
  for (const json& j : jobs) {
    json done = WaitFinal(j["id"], 60);
    ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
    const json& replica = done["replicas"][0];
    EXPECT_THAT(replica["node"].get<std::string>(), StartsWith("sim-"));
    EXPECT_EQ(replica["exit_code"], 0) << replica.dump(2);
    EXPECT_EQ(replica["reclaim"]["status"], "unchecked") << replica.dump(2);
    EXPECT_THAT(replica["reclaim"]["reason"].get<std::string>(), HasSubstr("nothing was checked"));
    EXPECT_THAT(replica["enforcement"].get<std::string>(), HasSubstr("no process runs"));
  }
  // An unchecked reclaim is not a failed one: no device was quarantined.
  for (const json& node : ApiGet("/api/v1/nodes")) {
    EXPECT_TRUE(node.value("quarantined", json::object()).empty()) << node.dump(2);
  }
  Kill(swarm, SIGINT);
  ASSERT_TRUE(Eventually([&] { return Dead(swarm); }));
  json run = json::parse(Slurp((dir_ / "swarm.json").string()));
  int64_t beats = 0, started = 0;
  for (const json& w : run["windows"]) {
    beats += w["heartbeats"].get<int64_t>();
    started += w["replicas_started"].get<int64_t>();
    EXPECT_EQ(w["heartbeats_failed"], 0) << w.dump(2);
  }
  EXPECT_GT(beats, 0);
  EXPECT_EQ(started, 40);

  // Run again: the nodes are already joined, and register with the credentials kept.
  pid_t again = Swarm("swarm-2.log");
  ASSERT_TRUE(Eventually([&] {
    return Slurp((dir_ / "swarm-2.log").string()).find("12 nodes registered") != std::string::npos;
  })) << Slurp((dir_ / "swarm-2.log").string());
  Kill(again, SIGINT);
  ASSERT_TRUE(Eventually([&] { return Dead(again); }));
}

// At a thousand nodes the waits the server refused (429: a quarter of its workers already wait)
// were asked again every heartbeat, more requests than the heartbeats themselves. A refused
// agent now asks again after the Retry-After (10 s).
TEST_F(SimAgentsTest, AnAgentRefusedAWaitAsksAgainAfterTheRetryAfterNotEveryHeartbeat) {
  pid_t swarm =
      Spawn({CARVE_BINARY, "--server", url_, "sim", "agents", "--nodes", "40", "--heartbeat-ms",
             "100", "--report-s", "1", "--duration-s", "4", "--join-token-file",
             (dir_ / "data/agent.token").string(), "--credentials",
             (dir_ / "swarm.credentials").string(), "--json", (dir_ / "swarm.json").string()},
            (dir_ / "swarm.log").string());
  ASSERT_TRUE(Eventually([&] { return Dead(swarm); })) << Slurp((dir_ / "swarm.log").string());
  json run = json::parse(Slurp((dir_ / "swarm.json").string()));
  int64_t refused = 0, answered = 0;
  for (const json& w : run["windows"]) {
    refused += w["waits_refused"].get<int64_t>();
    answered += w["waits_answered"].get<int64_t>();
  }
  // 16 of the 64 workers wait: 24 nodes are refused once each (every 100 ms before: ~900).
  EXPECT_GT(refused, 0) << run.dump(2);
  EXPECT_LE(refused, 40) << run.dump(2);
  EXPECT_GT(answered, 0) << run.dump(2);
}

TEST_F(SimAgentsTest, AMissingJoinTokenOrBadProfileIsRefusedNamingIt) {
  CliRun no_token = RunShell(absl::StrCat("CARVE_JOIN_TOKEN= ", CARVE_BINARY, " --server ", url_,
                                          " sim agents --nodes 2 --join-token-file ",
                                          (dir_ / "none").string(), " 2>&1"));
  EXPECT_NE(no_token.exit, 0);
  EXPECT_THAT(no_token.out, HasSubstr("no join token"));
  CliRun profile = RunShell(absl::StrCat(CARVE_BINARY, " --server ", url_,
                                         " sim agents --nodes 2 --profile tpu --join-token-file ",
                                         (dir_ / "data/agent.token").string(), " 2>&1"));
  EXPECT_NE(profile.exit, 0);
  EXPECT_THAT(profile.out, HasSubstr("--profile tpu: not a profile"));
  EXPECT_EQ(ApiGet("/api/v1/nodes").size(), 0u);  // nothing registered
}

}  // namespace
}  // namespace carve::it
