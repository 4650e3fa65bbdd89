// The real `carve agent` on the NVML backend, with the fake libnvidia-ml standing in for the
// driver (`--nvml-library`, scenario in FAKE_NVML_DIR: see tests/adapters/fake_nvml/
// fake_nvml_dir.cc): discovery and utilization reach the server, a reclaim lists the device's
// processes and attributes them by pid, and a critical XID event displaces the job on that GPU.
#include <cstdlib>

#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

class NvmlAgentTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return none_; }
  // The fake's GPUs (see fake_nvml_dir.cc).
  virtual std::string Gpus() const {
    return "GPU-nv0 81559 NVIDIA H100 80GB HBM3\nGPU-nv1 81559 NVIDIA H100 80GB HBM3\n";
  }

  void SetUp() override {
    PlatformTest::SetUp();
    nvml_ = dir_ / "nvml";
    for (const char* sub : {"processes", "utilization", "xid"}) {
      std::filesystem::create_directories(nvml_ / sub);
    }
    std::ofstream(nvml_ / "gpus") << Gpus();
    std::ofstream(nvml_ / "utilization/GPU-nv0") << "42\n";
    setenv("FAKE_NVML_DIR", nvml_.c_str(), 1);  // the agent inherits it
    agents_.push_back(Spawn({CARVE_BINARY, "agent", "--server", url_, "--token-file",
                             (dir_ / "data/agent.token").string(), "--node", "nv", "--nvml-library",
                             CARVE_FAKE_NVML, "--cpu", "16", "--memory", "64Gi", "--data",
                             (dir_ / "agents/nv").string(), "--heartbeat-ms", "100"},
                            (dir_ / "nv.log").string()));
    unsetenv("FAKE_NVML_DIR");
    ASSERT_TRUE(Eventually([&] { return !Node("nv").is_null(); }, 10))
        << Slurp((dir_ / "nv.log").string());
  }

  // This test's own pid as a device process on both GPUs: someone else's, for the job.
  void ForeignProcess() {
    std::ofstream(nvml_ / "processes" / std::to_string(getpid())) << "GPU-nv0 512\nGPU-nv1 512\n";
  }

  NodeList none_;
  std::filesystem::path nvml_;
};

json Check(const json& job, const std::string& name) {
  for (const json& c : job["replicas"][0]["reclaim"]["checks"]) {
    if (c["name"] == name) return c;
  }
  return json();
}

TEST_F(NvmlAgentTest, GpusAndTheirActivityComeFromNvml) {
  json node = Node("nv");
  ASSERT_EQ(node["gpus"].size(), 2u) << node.dump(2);
  EXPECT_EQ(node["gpus"][0]["model"], "H100-80GB");
  EXPECT_EQ(node["gpus"][0]["uuid"], "GPU-nv0");
  EXPECT_TRUE(Eventually([&] { return Node("nv")["gpus"][0]["utilization_pct"] == 42; }))
      << Node("nv").dump(2);
  EXPECT_EQ(Node("nv")["gpus"][1]["utilization_pct"], -1);  // the driver does not say
}

// Every process NVML lists on the GPU is judged by its pid. The job's own, gone once it ends,
// leaves a verified reclaim; a process in no live replica's cgroup or process group (here: this
// test's own) is residue, whoever owns it, and quarantines the GPU.
TEST_F(NvmlAgentTest, ReclaimJudgesEveryDeviceProcessByPid) {
  std::string processes = (nvml_ / "processes").string();
  json job = Submit(
      {{"command",
        {"sh", "-c",
         absl::StrCat("echo \"$CUDA_VISIBLE_DEVICES 1024\" > ", processes, "/$$; sleep 0.3")}},
       {"resources", {{"gpus", 1}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded") << Logs(job["id"]);
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified") << done.dump(2);
  json processes_check = Check(done, "device-processes");
  EXPECT_TRUE(processes_check["ok"]);
  EXPECT_FALSE(processes_check.value("skipped", false)) << processes_check.dump();
  EXPECT_THAT(processes_check["observed"].get<std::string>(),
              HasSubstr("no process on the device but live replicas'"));
  EXPECT_THAT(Check(done, "device-memory")["observed"].get<std::string>(), HasSubstr("0 MiB"));

  ForeignProcess();
  json second = Submit({{"command", {"true"}}, {"resources", {{"gpus", 2}}}});
  json ended = WaitFinal(second["id"]);
  EXPECT_EQ(ended["replicas"][0]["reclaim"]["status"], "failed") << ended.dump(2);
  EXPECT_THAT(Check(ended, "device-processes")["observed"].get<std::string>(),
              HasSubstr(absl::StrCat("pid ", getpid(), " (uid ", getuid())));
  EXPECT_EQ(Node("nv")["quarantined"].size(), 2u) << Node("nv").dump(2);
}

TEST_F(NvmlAgentTest, CriticalXidDisplacesTheJobOnThatGpu) {
  json job = Submit({{"command", {"sleep", "60"}}, {"resources", {{"gpus", 1}}}});
  int64_t id = job["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  int device = Job(id)["replicas"][0]["grants"][0]["device"];
  std::string uuid = absl::StrCat("GPU-nv", device);
  std::ofstream(nvml_ / "xid/1") << uuid << " 79\n";
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.unhealthy").empty(); }))
      << Slurp((dir_ / "nv.log").string());
  json fault = EventsOf("device.unhealthy")[0];
  EXPECT_EQ(fault["subject"], absl::StrCat("node/nv/gpu/", device));
  EXPECT_EQ(fault["details"]["jobs"], json::array({id}));
  json gpu = Node("nv")["gpus"][device];
  EXPECT_EQ(gpu["health"], "unhealthy");
  EXPECT_EQ(gpu["health_reason"], "XID 79");
  EXPECT_EQ(Node("nv")["gpus"][1 - device]["health"], "healthy");
  ASSERT_TRUE(Eventually([&] { return Job(id)["attempt"] == 1; })) << Job(id).dump(2);
  EXPECT_THAT(Job(id)["attempts"][0]["cause"].get<std::string>(), HasSubstr("XID 79"));
}

// An A100 in MIG mode with no instances yet.
class NvmlMigAgentTest : public NvmlAgentTest {
 protected:
  std::string Gpus() const override { return "GPU-mig0 81920 mig NVIDIA A100-SXM4-80GB\n"; }
};

// A planned re-layout goes through NVML's GPU and compute instance calls, and a job then runs on
// an instance the driver made, with its MIG UUID.
TEST_F(NvmlMigAgentTest, RelayoutCreatesInstancesThroughNvml) {
  json gpu = Node("nv")["gpus"][0];
  EXPECT_EQ(gpu["model"], "A100-80GB");
  EXPECT_TRUE(gpu["mig_instances"].empty()) << gpu.dump(2);
  auto asked = Api().Post("/api/v1/nodes/nv/gpus/0/layout",
                          json{{"layout", json::array({"3g.40gb@0", "3g.40gb@4"})}});
  ASSERT_TRUE(asked.ok()) << asked.status();
  ASSERT_TRUE(Eventually([&] { return Node("nv")["relayouts"].empty(); })) << Node("nv").dump(2);
  gpu = Node("nv")["gpus"][0];
  ASSERT_EQ(gpu["mig_instances"].size(), 2u) << gpu.dump(2);
  EXPECT_EQ(gpu["mig_instances"][0]["id"], "nv/gpu0/3g.40gb@0");
  EXPECT_EQ(gpu["mig_instances"][1]["id"], "nv/gpu0/3g.40gb@4");
  EXPECT_EQ(EventsOf("device.relayout-done").size(), 1u);

  json job = Submit({{"command", {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}},
                     {"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded") << Logs(job["id"]);
  EXPECT_THAT(Logs(job["id"]), HasSubstr("MIG-fake-0-"));
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified") << done.dump(2);

  // An XID the driver attributes to one instance moves only the job on it.
  json hit = Submit({{"command", {"sleep", "60"}},
                     {"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}});
  json spared = Submit({{"command", {"sleep", "60"}},
                        {"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}});
  for (int64_t id : {hit["id"].get<int64_t>(), spared["id"].get<int64_t>()}) {
    ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  }
  int start = Job(hit["id"])["replicas"][0]["grants"][0]["start"];
  // The fake numbers GPU instances by creation: the one at slice 0 is 1, at slice 4 is 2.
  std::ofstream(nvml_ / "xid/1") << "GPU-mig0 94 " << (start == 0 ? 1 : 2) << "\n";
  // XID 94 (contained ECC error): the instance is suspect.
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.suspect").empty(); }))
      << Slurp((dir_ / "nv.log").string());
  json fault = EventsOf("device.suspect")[0];
  EXPECT_THAT(fault["reason"].get<std::string>(), HasSubstr("XID 94"));
  EXPECT_EQ(fault["subject"], absl::StrCat("node/nv/gpu/0/mig/", start)) << fault.dump(2);
  EXPECT_EQ(fault["details"]["jobs"], json::array({hit["id"]})) << fault.dump(2);
  EXPECT_EQ(Node("nv")["gpus"][0]["health"], "healthy");
  ASSERT_TRUE(Eventually([&] { return Job(hit["id"])["attempt"] == 1; }));
  json other = Job(spared["id"]);
  EXPECT_EQ(other["state"], "running");
  EXPECT_EQ(other["attempt"], 0);
}

}  // namespace
}  // namespace carve::it
