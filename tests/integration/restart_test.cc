// R1: the server comes back with the same state after every kind of `carve apply` document and
// after every admin operation. (After `carve apply` of a node document, as examples/config.yaml
// has, or a `carve relayout`, every restart used to abort: the GPU mode overrides were written as
// an array of pairs and read back as an object. Priority classes were not reloaded at all.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/cgroups/cgroups.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kRestartNodes = {
    {"gpu-a",
     "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"
     "  - {model: L40S, count: 2, mode: shared}\n"},
    {"mig-a",
     "gpus:\n  - {model: A100-40GB, count: 1, mode: partition, layout: [3g.20gb@0, "
     "3g.20gb@4]}\n"},
};

class RestartTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kRestartNodes; }

  // What must survive a restart, as the admin sees it; heartbeats and activity aside.
  json State() {
    json nodes = *Api().Get("/api/v1/nodes");
    for (json& n : nodes) {
      n.erase("last_heartbeat_us");
      for (json& g : n["gpus"]) {
        g.erase("utilization_pct");
        g.erase("mig_live");  // from the agent's last heartbeat, kept in memory only
      }
    }
    json jobs = json::array();
    const json all = *Api().Get("/api/v1/jobs?all=true");
    for (const json& j : all) jobs.push_back({j["id"], j["state"], j["spec"], j["reason"]});
    return {{"nodes", nodes},
            {"jobs", jobs},
            {"tenants", *Api().Get("/api/v1/tenants")},
            {"projects", *Api().Get("/api/v1/projects")},
            {"queues", *Api().Get("/api/v1/queues")},
            {"users", *Api().Get("/api/v1/users")},
            {"tokens", *Api().Get("/api/v1/tokens")}};
  }

  // SIGKILL the server, start it on the same data, and check it kept `what` came before.
  void RestartAndCompare(const std::string& after) {
    SCOPED_TRACE("restart after " + after);
    json before = State();
    Kill(server_, SIGKILL);
    StartServer();
    ASSERT_FALSE(HasFatalFailure()) << "the server did not come back after " << after << ": "
                                    << Slurp((dir_ / "server.log").string());
    ASSERT_TRUE(Eventually([&] { return Api().Get("/api/v1/nodes").ok(); }))
        << Slurp((dir_ / "server.log").string());
    json now = State();
    EXPECT_EQ(now, before) << "before: " << before.dump(1) << "\nafter: " << now.dump(1);
    auto chain = Api().Get("/api/v1/audit/verify");
    ASSERT_TRUE(chain.ok()) << chain.status();
    EXPECT_EQ((*chain)["ok"], true) << chain->dump();
  }

  void Apply(const json& doc) {
    auto r = Api().Post("/api/v1/apply", json::array({doc}));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  void Post(const std::string& path, const json& body = json::object()) {
    auto r = Api().Post(path, body);
    ASSERT_TRUE(r.ok()) << path << ": " << r.status();
  }
};

TEST_F(RestartTest, EveryKindOfApplyDocumentSurvivesARestart) {
  ASSERT_NO_FATAL_FAILURE(
      Apply({{"kind", "tenant"}, {"name", "acme"}, {"description", "a tenant"}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a tenant"));
  ASSERT_NO_FATAL_FAILURE(Apply(
      {{"kind", "priority-class"}, {"name", "urgent"}, {"priority", 777}, {"preemptible", false}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a priority class"));
  json urgent = Submit({{"command", {"true"}}, {"priority_class", "urgent"}});
  EXPECT_EQ(urgent["spec"]["priority"], 777) << "the priority class was lost in the restart";
  EXPECT_EQ(urgent["spec"]["preemptible"], false);
  WaitFinal(urgent["id"]);
  ASSERT_NO_FATAL_FAILURE(Apply({{"kind", "queue"},
                                 {"name", "training"},
                                 {"tenants", {"acme"}},
                                 {"cohort", "research"},
                                 {"quota", {{"gpus", 2}}},
                                 {"borrowing_limit", {{"gpus", 1}}}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a queue"));
  ASSERT_NO_FATAL_FAILURE(Apply({{"kind", "project"},
                                 {"name", "vision"},
                                 {"tenant", "acme"},
                                 {"queues", {"training"}},
                                 {"priority_classes", {"standard", "urgent"}},
                                 {"max_priority", 300},
                                 {"allow_non_preemptible", true}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a project"));
  // The README's walk-through: examples/config.yaml turns an L40S exclusive.
  ASSERT_NO_FATAL_FAILURE(Apply(
      {{"kind", "node"}, {"name", "gpu-a"}, {"gpus", {{{"index", 3}, {"mode", "exclusive"}}}}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a node document"));
  EXPECT_EQ(Node("gpu-a")["gpus"][3]["mode"], "exclusive");
  // The override also outlives the agent: a re-registering node gets it again.
  Kill(agents_[0], SIGTERM);
  agents_[0] = StartAgent(0);
  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.re-registered").empty(); }));
  EXPECT_EQ(Node("gpu-a")["gpus"][3]["mode"], "exclusive");
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("a re-registration with a mode override"));
}

TEST_F(RestartTest, EveryAdminOperationSurvivesARestart) {
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/cordon"));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("cordon"));
  EXPECT_EQ(Node("gpu-a")["cordoned_by"], "admin");
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/uncordon"));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("uncordon"));
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/drain?gpu=1"));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("drain of one GPU"));
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/drain"));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("drain"));
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/uncordon"));
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/gpu-a/maintenance",
                               {{"starts_in", "1h"}, {"lasts", "2h"}, {"reason", "firmware"}}));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("maintenance"));
  EXPECT_EQ(Node("gpu-a")["maintenance"]["phase"], "scheduled");
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/mig-a/gpus/0/layout", {{"layout", {"7g.40gb"}}}));
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.relayout-done").empty(); }))
      << Node("mig-a").dump(2);
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("relayout"));
  EXPECT_EQ(Node("mig-a")["gpus"][0]["mig_instances"].size(), 1u);
  ASSERT_NO_FATAL_FAILURE(Apply({{"kind", "tenant"}, {"name", "acme"}}));
  ASSERT_NO_FATAL_FAILURE(Apply({{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}}));
  ASSERT_NO_FATAL_FAILURE(
      Post("/api/v1/users",
           {{"name", "alice"}, {"role", "member"}, {"tenant", "acme"}, {"project", "vision"}}));
  auto token = Api().Post("/api/v1/tokens", {{"user", "alice"}, {"expires_in", "1d"}});
  ASSERT_TRUE(token.ok()) << token.status();
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("user and token creation"));
  auto whoami = ApiClient(url_, (*token)["token"]).Get("/api/v1/whoami");
  ASSERT_TRUE(whoami.ok()) << "the token was lost in the restart: " << whoami.status();
  // Declare a silent node dead.
  Kill(agents_[1], SIGKILL);
  ASSERT_TRUE(Eventually([&] { return Node("mig-a")["state"] == "not-ready"; }));
  ASSERT_NO_FATAL_FAILURE(Post("/api/v1/nodes/mig-a/dead"));
  ASSERT_NO_FATAL_FAILURE(RestartAndCompare("declare-dead"));
  EXPECT_EQ(Node("mig-a")["state"], "dead");
  agents_[1] = StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return Node("mig-a")["state"] == "ready"; }));
}

// A replica that ended while its agent was down left its cgroup behind, and every such restart
// added to the leak (182 groups were found under /sys/fs/cgroup/memory/carve on a development
// machine): the restarted agent removes its own groups that no adopted replica uses.
TEST_F(RestartTest, ARestartedAgentRemovesTheGroupsOfReplicasThatEndedWhileItWasDown) {
  const std::filesystem::path pid_file = Shared() / "job.pid";
  json job =
      Submit({{"name", "ends-while-the-agent-is-down"},
              {"command", {"sh", "-c", "echo $$ > " + pid_file.string() + "; exec sleep 300"}},
              {"resources", {{"gpus", 1}}},
              // Not run again once it is lost (as job-1-r0, in a group of the same name).
              {"recovery", {{"policy", "none"}}}});
  ASSERT_TRUE(job.contains("id")) << job.dump();
  ASSERT_TRUE(Eventually([&] { return !Slurp(pid_file.string()).empty(); }))
      << Logs(job["id"].get<int64_t>());
  // The server knows it runs (an assignment not yet reported would be handed to the restarted
  // agent again).
  const int64_t id = job["id"].get<int64_t>();
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump();
  const pid_t pid = std::stoi(Slurp(pid_file.string()));
  // Its group's name, from /proc/PID/cgroup ("4:memory:/carve/gpu-a-...-job-1-r0"), and its
  // directories in every hierarchy the agent uses.
  std::string name;
  std::ifstream cgroup_file(absl::StrCat("/proc/", pid, "/cgroup"));
  for (std::string line; name.empty() && std::getline(cgroup_file, line);) {
    if (size_t at = line.find(":/carve/"); at != std::string::npos) name = line.substr(at + 8);
  }
  if (name.empty()) GTEST_SKIP() << "the job runs in no cgroup of Carve's here";
  std::unique_ptr<Cgroups> cgroups = Cgroups::Detect("carve");
  std::vector<std::string> primary = cgroups->GroupsNamed(name);
  ASSERT_EQ(primary.size(), 1u) << name;
  std::vector<std::filesystem::path> groups;
  for (const std::string& dir : cgroups->DirsOf(primary[0])) groups.emplace_back(dir);
  ASSERT_FALSE(groups.empty()) << primary[0];

  Kill(agents_[0], SIGKILL);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] {
    for (const auto& g : groups) {
      if (!Slurp((g / "cgroup.procs").string()).empty()) return false;
    }
    return true;
  })) << "the replica's processes did not leave its groups";
  for (const auto& g : groups) ASSERT_TRUE(std::filesystem::exists(g)) << g;

  agents_[0] = StartAgent(0);
  EXPECT_TRUE(Eventually([&] {
    for (const auto& g : groups) {
      if (std::filesystem::exists(g)) return false;
    }
    return true;
  })) << Slurp((dir_ / "gpu-a.log").string())
      << "\ngroups: " << primary[0] << " (" << groups.size() << " directories; left: " <<
      [&] {
        std::string left;
        for (const auto& g : groups) {
          if (std::filesystem::exists(g)) left += g.string() + " ";
        }
        return left;
      }()
      << ")";
  EXPECT_THAT(Slurp((dir_ / "gpu-a.log").string()), HasSubstr("removed 1 empty cgroup(s)"));
}

}  // namespace
}  // namespace carve
