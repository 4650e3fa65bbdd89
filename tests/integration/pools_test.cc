// Pools a user can set (issue 16): `carve label NODE k=v k-` puts nodes in pools through the
// CLI, `carve nodes --pool P` lists one pool, a queue bound to a pool keeps its jobs there, and
// an admin's labels outlive the agent's re-registration and the server's restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

// Three one-H200 nodes with no pool label, and one with two H200s that its agent puts in pool
// b (with a rack label an admin will take away).
const NodeList kNodes = {{"n-1", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"n-2", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"n-3", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"n-4", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class PoolsTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNodes; }
  std::vector<std::string> AgentFlags(int i) const override {
    if (i == 3) return {"--label", "pool=b", "--label", "rack=r1"};
    return {};
  }

  CliRun Cli(const std::string& args) {
    return RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                                 " ", args, " 2>&1"));
  }

  std::set<std::string> PoolNodes(const std::string& pool) {
    CliRun run = Cli("nodes -o json --pool " + pool);
    EXPECT_EQ(run.exit, 0) << run.out;
    std::set<std::string> names;
    json nodes = json::parse(run.out, nullptr, false);
    if (!nodes.is_array()) ADD_FAILURE() << run.out;
    for (const json& n : nodes.is_array() ? nodes : json::array()) names.insert(n["name"]);
    return names;
  }

  int64_t SubmitTo(const std::string& queue) {
    json spec = {{"command", {"sleep", "300"}},
                 {"queue", queue},
                 {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
    return Submit(spec)["id"];
  }
};

TEST_F(PoolsTest, ACliLabelPutsNodesInAPoolAndAQueueKeepsItsJobsThere) {
  CliRun labelled = Cli("label n-1 pool=a");
  ASSERT_EQ(labelled.exit, 0) << labelled.out << ServerLog();
  EXPECT_EQ(labelled.out, "node n-1: labels pool=a (pool a)\n");
  ASSERT_EQ(Cli("label n-2 pool=a tier=gold").exit, 0);
  EXPECT_EQ(PoolNodes("a"), (std::set<std::string>{"n-1", "n-2"}));
  EXPECT_EQ(PoolNodes("b"), (std::set<std::string>{"n-4"}));
  EXPECT_EQ(PoolNodes("default"), (std::set<std::string>{"n-3"}));
  CliRun table = Cli("nodes --pool a");
  EXPECT_THAT(table.out, HasSubstr("POOL")) << table.out;

  // A queue bound to pool a: two jobs fill it; the third waits for pool a although n-3 and
  // n-4 have three free H200s between them.
  ApiPost("/api/v1/apply", json::array({{{"kind", "queue"}, {"name", "qa"}, {"pool", "a"}}}));
  std::vector<int64_t> ids = {SubmitTo("qa"), SubmitTo("qa"), SubmitTo("qa")};
  ASSERT_TRUE(Eventually([&] {
    return Job(ids[0])["state"] == "running" && Job(ids[1])["state"] == "running" &&
           absl::StrContains(Job(ids[2]).value("explanation", ""), "pool");
  })) << Job(ids[2]).dump(2);
  std::set<std::string> on;
  for (int i : {0, 1}) on.insert(Job(ids[i])["replicas"][0]["node"].get<std::string>());
  EXPECT_EQ(on, (std::set<std::string>{"n-1", "n-2"}));
  EXPECT_EQ(Job(ids[2])["state"], "queued");

  // The admin's label survives the agent's re-registration, which brings no labels.
  const size_t before = EventsOf("node.re-registered").size();
  Kill(agents_[0], SIGTERM);
  agents_[0] = StartAgent(0);
  ASSERT_TRUE(Eventually([&] { return EventsOf("node.re-registered").size() > before; }));
  EXPECT_EQ(Node("n-1")["labels"], (json{{"pool", "a"}})) << Node("n-1").dump(2);
  EXPECT_EQ(Node("n-1")["pool"], "a");
}

TEST_F(PoolsTest, AnAdminRemovesAnAgentsLabelAndItStaysRemoved) {
  EXPECT_EQ(Node("n-4")["labels"], (json{{"pool", "b"}, {"rack", "r1"}}));
  CliRun removed = Cli("label n-4 rack- pool=c");
  ASSERT_EQ(removed.exit, 0) << removed.out << ServerLog();
  EXPECT_EQ(removed.out, "node n-4: labels pool=c (pool c)\n");
  // The agent registers again with rack=r1 and pool=b: the admin's word stands, and the
  // server's restart keeps it.
  const size_t before = EventsOf("node.re-registered").size();
  Kill(agents_[3], SIGTERM);
  agents_[3] = StartAgent(3);
  ASSERT_TRUE(Eventually([&] { return EventsOf("node.re-registered").size() > before; }));
  Kill(server_, SIGKILL);
  StartServer();
  json n = Node("n-4");
  EXPECT_EQ(n["labels"], (json{{"pool", "c"}})) << n.dump(2);
  EXPECT_EQ(n["agent_labels"], (json{{"pool", "b"}, {"rack", "r1"}}));
  EXPECT_EQ(n["admin_labels"], (json{{"pool", "c"}, {"rack", nullptr}}));
  // KEY- removes the label whoever set it: n-4 is in no pool now, and the agent's pool=b stays
  // hidden (the admin sets pool=b to have it back).
  CliRun none = Cli("label n-4 pool-");
  ASSERT_EQ(none.exit, 0) << none.out;
  EXPECT_EQ(none.out, "node n-4: labels none (pool default)\n");
  EXPECT_EQ(Node("n-4")["labels"], json::object());
}

TEST_F(PoolsTest, ABadLabelIsRefusedNamingItAndChangesNothing) {
  ASSERT_EQ(Cli("label n-1 pool=a").exit, 0);
  CliRun bad = Cli("label n-1 tier=gold 'rack=two words'");
  EXPECT_NE(bad.exit, 0);
  EXPECT_THAT(bad.out, HasSubstr("label rack: value \"two words\"")) << bad.out;
  CliRun key = Cli("label n-1 'Pool!=x'");
  EXPECT_NE(key.exit, 0);
  EXPECT_THAT(key.out, HasSubstr("label key \"Pool!\"")) << key.out;
  // Through the API too, with the document named; nothing of it applied.
  auto r = Api().Post(
      "/api/v1/apply",
      json::array(
          {{{"kind", "node"}, {"name", "n-1"}, {"labels", {{"tier", "gold"}, {"rack", 7}}}}}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("document 0: labels.rack"));
  EXPECT_EQ(Node("n-1")["labels"], (json{{"pool", "a"}}));
  CliRun missing = Cli("label n-9 pool=a");
  EXPECT_NE(missing.exit, 0);
  EXPECT_THAT(missing.out, HasSubstr("no registered node \"n-9\"")) << missing.out;
}

// Topology labels set with `carve label` feed compact placement: a two-replica gang that asks
// for `topology: compact` lands in one rack, n-1 and n-3, not on the first two nodes by name.
TEST_F(PoolsTest, RackLabelsSetByAnAdminKeepACompactGangInOneRack) {
  for (const char* args : {"label n-1 rack=r1", "label n-2 rack=r2", "label n-3 rack=r1"}) {
    CliRun run = Cli(args);
    ASSERT_EQ(run.exit, 0) << run.out;
  }
  ApiPost("/api/v1/nodes/n-4/cordon", json::object());
  json spec = {{"command", {"sleep", "300"}},
               {"kind", "training"},
               {"replicas", 2},
               {"topology", "compact"},
               {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
  int64_t id = Submit(spec)["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  const json job = Job(id);
  std::set<std::string> on;
  for (const json& r : job["replicas"]) on.insert(r["node"].get<std::string>());
  EXPECT_EQ(on, (std::set<std::string>{"n-1", "n-3"})) << job.dump(2);
}

// A pool defined by a label selector (`kind: pool`): the nodes with tier=gold and no pool label
// of their own are in it, and a queue bound to it places its job there.
TEST_F(PoolsTest, APoolDefinedByALabelSelectorHoldsTheNodesThatMatch) {
  ASSERT_EQ(Cli("label n-3 tier=gold").exit, 0);
  ASSERT_EQ(Cli("label n-4 tier=gold").exit, 0);  // its agent's pool=b label wins
  const std::filesystem::path file = dir_ / "gold.yaml";
  std::ofstream(file) << "kind: pool\nname: gold\nselector: {tier: gold}\n---\n"
                      << "kind: queue\nname: qg\npool: gold\n";
  CliRun applied = Cli("apply -f " + file.string());
  ASSERT_EQ(applied.exit, 0) << applied.out << ServerLog();
  EXPECT_EQ(PoolNodes("gold"), (std::set<std::string>{"n-3"}));
  EXPECT_EQ(PoolNodes("b"), (std::set<std::string>{"n-4"}));
  CliRun listed = Cli("get pools");
  EXPECT_THAT(listed.out, HasSubstr("gold                 selector {\"tier\":\"gold\"}"))
      << listed.out;
  int64_t id = SubmitTo("qg");
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; }))
      << Job(id).dump(2) << ServerLog();
  EXPECT_EQ(Job(id)["replicas"][0]["node"], "n-3");
}

}  // namespace
}  // namespace carve::it
