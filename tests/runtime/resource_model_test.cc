// The request model beyond CPU, memory and GPUs, through a real control plane and SQLite store on
// a virtual clock: named extra resources (`resources.extra`, `carve agent --resource`) are taken
// and given back, and a job that asks too much waits with an explanation naming the resource;
// an application's replicas spread over nodes (`spread: {max_per_node, app}`, counted per
// tenant); a CPU limit above the request is what the agent enforces while placement counts the
// request.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class ResourceModelTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane(absl::StrCat("resource-model-", counter_++), {}, [this] { return now_; });
    ASSERT_TRUE(cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                        {{"kind", "tenant"}, {"name", "globex"}}}),
                           kAdmin)
                    .ok());
  }

  // Registers `name` with 4 H200s and the extra resources `extra`.
  void AddNode(const std::string& name, const json& extra = json::object()) {
    json body = {{"name", name},           {"cpu_milli", 64000}, {"memory_mib", 262144},
                 {"backend", "simulated"}, {"extra", extra},     {"gpus", H200Gpus(name, 4)}};
    auto node = cp_->Register(body, kAdmin);
    ASSERT_TRUE(node.ok()) << node.status();
  }

  absl::StatusOr<int64_t> Submit(json spec) {
    spec["command"] = {"sleep", "600"};
    if (!spec.contains("resources")) spec["resources"] = {{"gpus", 1}};
    auto job = cp_->Submit(spec, "", kAdmin);
    if (!job.ok()) return job.status();
    return (*job)["id"].get<int64_t>();
  }

  json Job(int64_t id) { return *cp_->GetJob(id); }

  std::set<std::string> NodesOf(int64_t id) {
    std::set<std::string> nodes;
    const json job = Job(id);
    for (const json& r : job["replicas"]) nodes.insert(r.value("node", ""));
    return nodes;
  }

  // The agent of the job's only replica reports it exited and its devices came back.
  void End(int64_t id) {
    const json job = Job(id);
    const std::string node = job["replicas"][0]["node"];
    json report = {{"job", id},
                   {"replica", 0},
                   {"state", "exited"},
                   {"pid", 100 + id},
                   {"started_us", kT0},
                   {"exit_code", 0},
                   {"reclaim", VerifiedReclaim(4)}};
    ASSERT_TRUE(cp_->Heartbeat({{"node", node}, {"replicas", {report}}}, kAdmin).ok());
  }

  static inline int counter_ = 0;
  int64_t now_ = kT0;
};

TEST_F(ResourceModelTest, AJobTakesWhatANodeOffersAndWaitsNamingTheResourceWhenItIsGone) {
  AddNode("rdma-node", {{"rdma_gbps", 400}});
  AddNode("plain-node");
  json spec = {{"resources", {{"gpus", 1}, {"extra", {{"rdma_gbps", 300}}}}}};
  auto first = Submit(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Submit(spec);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(NodesOf(*first), std::set<std::string>{"rdma-node"});
  const json waiting = Job(*second);
  EXPECT_EQ(waiting["state"], "queued") << waiting.dump(2);
  EXPECT_THAT(waiting["explanation"].get<std::string>(),
              HasSubstr("2 insufficient-extra-resource"));
  auto explained = cp_->Explain(*second);
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_THAT(explained->dump(),
              HasSubstr("needs 300 of extra resource rdma_gbps on one node; best node "
                        "rdma-node has 100 free"));
  EXPECT_EQ(Job(*second)["spec"]["resources"]["extra"], json({{"rdma_gbps", 300}}));
  End(*first);
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(NodesOf(*second), std::set<std::string>{"rdma-node"}) << Job(*second).dump(2);
}

TEST_F(ResourceModelTest, AnApplicationSpreadsOverNodesAndOnlyItsTenantsReplicasCount) {
  AddNode("n1");
  AddNode("n2");
  json three = {{"tenant", "acme"},
                {"kind", "inference"},
                {"replicas", 3},
                {"spread", {{"max_per_node", 1}}}};
  // A gang of 3 with at most one per node never fits two nodes: refused at submission.
  auto too_many = Submit(three);
  EXPECT_THAT(too_many.status().message(),
              HasSubstr("no node could run this job even with the whole cluster idle (a replica "
                        "fits, but not 3 at once: 0/2 nodes fit replica 2: 2 spread-limit)"));
  json web = {{"tenant", "acme"},
              {"kind", "inference"},
              {"replicas", 2},
              {"spread", {{"max_per_node", 1}, {"app", "web"}}}};
  auto first = Submit(web);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(NodesOf(*first), (std::set<std::string>{"n1", "n2"}));
  // Another job of acme's web: every node runs one already.
  web["replicas"] = 1;
  auto second = Submit(web);
  // globex's "web" is another application.
  web["tenant"] = "globex";
  auto other = Submit(web);
  ASSERT_TRUE(second.ok() && other.ok());
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(Job(*second)["state"], "queued");
  auto explained = cp_->Explain(*second);
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_THAT(explained->dump(),
              HasSubstr("at most 1 replica(s) of app web of tenant acme per node, and each "
                        "of the 2 eligible nodes runs that many already"));
  EXPECT_EQ(NodesOf(*other).size(), 1u) << Job(*other).dump(2);
  EXPECT_EQ(Job(*first)["spec"]["spread"], json({{"max_per_node", 1}, {"app", "web"}}));
}

// No tenant can write another's application key: tenant "job"'s app "2" once counted as the
// replicas of job 2 of any tenant (a red team's find), so acme's job 2 waited for ever behind
// replicas it could not see.
TEST_F(ResourceModelTest, NoTenantsAppNameReachesAnotherTenantsJob) {
  AddNode("n1");
  AddNode("n2");
  ASSERT_TRUE(cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "job"}}}), kAdmin).ok());
  auto squatter = Submit({{"tenant", "job"},
                          {"kind", "inference"},
                          {"replicas", 2},
                          {"spread", {{"max_per_node", 1}, {"app", "2"}}}});
  ASSERT_TRUE(squatter.ok()) << squatter.status();
  auto victim =
      Submit({{"tenant", "acme"}, {"kind", "inference"}, {"spread", {{"max_per_node", 1}}}});
  ASSERT_TRUE(victim.ok()) << victim.status();
  ASSERT_EQ(*victim, 2);
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  EXPECT_EQ(NodesOf(*squatter).size(), 2u);
  EXPECT_EQ(NodesOf(*victim).size(), 1u) << Job(*victim).dump(2);
}

TEST_F(ResourceModelTest, BadExtraResourcesAndSpreadsAreRefusedNamingTheField) {
  for (const json& app : {json("has space"), json(5), json("-bad")}) {
    auto bad = Submit({{"spread", {{"max_per_node", 1}, {"app", app}}}});
    EXPECT_THAT(bad.status().message(), HasSubstr("spread.app: ")) << app;
  }
  auto zero = Submit({{"resources", {{"gpus", 1}, {"extra", {{"rdma_gbps", 0}}}}}});
  EXPECT_EQ(zero.status().message(),
            "resources.extra.rdma_gbps: 0 is out of range [1, "
            "9223372036854775807]");
  auto text = Submit({{"resources", {{"extra", {{"rdma_gbps", "lots"}}}}}});
  EXPECT_EQ(text.status().message(), "resources.extra.rdma_gbps: must be an integer");
  auto name = Submit({{"resources", {{"extra", {{"-bad", 1}}}}}});
  EXPECT_THAT(name.status().message(), HasSubstr("resources.extra: \"-bad\": "));
  auto no_max = Submit({{"spread", {{"app", "web"}}}});
  EXPECT_EQ(no_max.status().message(),
            "spread.max_per_node: is required (the most replicas on one node)");
  auto unknown = Submit({{"spread", {{"max_per_node", 1}, {"zone", "a"}}}});
  EXPECT_THAT(unknown.status().message(), HasSubstr("spread.zone: unknown field"));
  auto node = cp_->Register({{"name", "n9"},
                             {"cpu_milli", 64000},
                             {"memory_mib", 262144},
                             {"backend", "simulated"},
                             {"extra", {{"rdma_gbps", -5}}},
                             {"gpus", H200Gpus("n9", 1)}},
                            kAdmin);
  EXPECT_EQ(node.status().message(), "extra.rdma_gbps: -5 is out of range [1, 1000000000000000]");
}

// Requests are placed and charged; a CPU limit is what the agent is told to enforce.
TEST_F(ResourceModelTest, ACpuLimitIsWhatTheAgentEnforcesAndTheRequestWhatIsPlaced) {
  AddNode("n1");  // 64 CPUs, 256 GiB
  auto plain = Submit({{"resources", {{"gpus", 1}, {"cpu", "8"}}}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  json burst = {
      {"resources", {{"gpus", 1}, {"cpu", "40"}, {"memory", "64Gi"}, {"limits", {{"cpu", "64"}}}}}};
  auto first = Submit(burst);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Submit(burst);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  auto beat = cp_->Heartbeat({{"node", "n1"}, {"replicas", json::array()}}, kAdmin);
  ASSERT_TRUE(beat.ok()) << beat.status();
  std::map<int64_t, json> told;
  for (const json& a : (*beat)["assignments"]) told[a["job"].get<int64_t>()] = a;
  ASSERT_EQ(told.size(), 2u) << beat->dump(2);
  EXPECT_EQ(told[*first]["cpu_milli"], 64000);
  EXPECT_EQ(told[*first]["memory_mib"], 65536);
  // Every replica's weight under contention follows its request, with a limit or without.
  EXPECT_EQ(told[*first]["cpu_request_milli"], 40000);
  EXPECT_EQ(told[*plain]["cpu_milli"], 8000);
  EXPECT_EQ(told[*plain]["cpu_request_milli"], 8000);
  EXPECT_THAT(Job(*second)["explanation"].get<std::string>(), HasSubstr("insufficient-cpu"));
  EXPECT_EQ(Job(*first)["spec"]["resources"]["limits"], json({{"cpu", "64"}}));
  auto below = Submit({{"resources", {{"cpu", "8"}, {"limits", {{"cpu", "4"}}}}}});
  EXPECT_EQ(below.status().message(),
            "resources.limits.cpu: \"4\" must be at least the request (8) and at most 4096");
  auto memory = Submit({{"resources", {{"limits", {{"memory", "64Gi"}}}}}});
  EXPECT_THAT(memory.status().message(),
              HasSubstr("resources.limits.memory: memory has no limit above its request"));
}

}  // namespace
}  // namespace carve
