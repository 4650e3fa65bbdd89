// The request model beyond CPU, memory and GPUs with the real server, agents and CLI: a node's
// agent offers an extra resource (`carve agent --resource`), a job file asks for it and for a
// CPU limit above its request, the job runs where the resource is and its replica's record
// says what the cgroup enforced; a second job waits and `carve explain` names the resource;
// spread limits keep an application's replicas on separate nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

const NodeList kNodes = {{"rdma-1", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"},
                         {"plain-2", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class ResourceModelTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNodes; }
  std::vector<std::string> AgentFlags(int i) const override {
    if (i == 0) return {"--resource", "rdma_gbps=400"};
    return {};
  }

  CliRun Cli(const std::string& args) {
    return RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                                 " ", args, " 2>&1"));
  }

  // Submits a job file with `body` after its command; the new job's id.
  int64_t SubmitFile(const std::string& name, const std::string& body) {
    const std::string path = (dir_ / (name + ".yaml")).string();
    std::ofstream(path) << "name: " << name << "\ncommand: [sleep, \"300\"]\n" << body;
    CliRun run = Cli("submit -q -f " + path);
    EXPECT_EQ(run.exit, 0) << run.out;
    int64_t id = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(run.out), &id)) << run.out;
    return id;
  }

  bool Running(int64_t id) { return Job(id).value("state", "") == "running"; }
};

TEST_F(ResourceModelTest, AnExtraResourceAndACpuLimitFromAJobFileToTheNodesCgroup) {
  EXPECT_EQ(Node("rdma-1")["extra"], json({{"rdma_gbps", 400}}));
  const std::string body =
      "resources:\n  gpus: 1\n  cpu: 2\n  limits: {cpu: 4}\n  extra: {rdma_gbps: 300}\n";
  const int64_t first = SubmitFile("first", body);
  ASSERT_TRUE(Eventually([&] { return Running(first); })) << Job(first).dump(2) << ServerLog();
  const json running = Job(first);
  EXPECT_EQ(running["replicas"][0]["node"], "rdma-1");
  // What the cgroup enforced: the limit's bandwidth, the request's weight (v1 here, v2 on GPU
  // nodes), or why nothing was.
  EXPECT_THAT(running["replicas"][0]["enforcement"].get<std::string>(),
              AnyOf(HasSubstr("cpu.cfs_quota_us=400000/100000, cpu.shares=2048"),
                    HasSubstr("cpu.max=400000 100000, cpu.weight=79"), HasSubstr("none: ")));

  const int64_t second = SubmitFile("second", body);
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(Job(second).value("explanation", ""), "insufficient-extra-resource");
  })) << Job(second).dump(2);
  CliRun explain = Cli(absl::StrCat("explain ", second));
  EXPECT_THAT(explain.out, HasSubstr("needs 300 of extra resource rdma_gbps on one node; best "
                                     "node rdma-1 has 100 free"));
  ASSERT_EQ(Cli(absl::StrCat("cancel ", first)).exit, 0);
  ASSERT_TRUE(Eventually([&] { return Running(second); })) << Job(second).dump(2);
  EXPECT_EQ(Job(second)["replicas"][0]["node"], "rdma-1");
}

TEST_F(ResourceModelTest, AServiceSpreadOverNodesAndABadFileRefused) {
  const int64_t web = SubmitFile(
      "web", "kind: inference\nreplicas: 2\nresources: {gpus: 1}\nspread: {max_per_node: 1}\n");
  ASSERT_TRUE(Eventually([&] { return Running(web); })) << Job(web).dump(2);
  const json job = Job(web);
  EXPECT_NE(job["replicas"][0]["node"], job["replicas"][1]["node"]) << job.dump(2);

  const std::string path = (dir_ / "bad.yaml").string();
  std::ofstream(path) << "command: [sleep, \"1\"]\nresources:\n  limits: {memory: 8Gi}\n";
  CliRun bad = Cli("submit -f " + path);
  EXPECT_NE(bad.exit, 0);
  EXPECT_THAT(bad.out, HasSubstr("resources.limits.memory: memory has no limit above its request"));
}

}  // namespace
}  // namespace carve::it
