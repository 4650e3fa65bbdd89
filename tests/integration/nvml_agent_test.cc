// The real `carve agent` on the NVML backend, with the fake libnvidia-ml standing in for the
// driver (`--nvml-library`, scenario in FAKE_NVML_DIR: see tests/adapters/fake_nvml/
// fake_nvml_dir.cc): discovery and utilization reach the server, a reclaim lists the device's
// processes and attributes them by pid, and a critical XID event displaces the job on that GPU.
#include <signal.h>

#include <cstdlib>
#include <string>
#include <vector>

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
  // More arguments for the agent.
  virtual std::vector<std::string> AgentArgs() { return {}; }

  void SetUp() override {
    PlatformTest::SetUp();
    nvml_ = dir_ / "nvml";
    for (const char* sub : {"processes", "utilization", "xid"}) {
      std::filesystem::create_directories(nvml_ / sub);
    }
    // Jobs run as their tenant's uid and list themselves as the driver's processes.
    std::filesystem::permissions(nvml_ / "processes",
                                 std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    std::ofstream(nvml_ / "gpus") << Gpus();
    std::ofstream(nvml_ / "utilization/GPU-nv0") << "42\n";
    setenv("FAKE_NVML_DIR", nvml_.c_str(), 1);  // the agent inherits it
    std::vector<std::string> argv = {CARVE_BINARY,     "agent",
                                     "--server",       url_,
                                     "--token-file",   (dir_ / "data/agent.token").string(),
                                     "--node",         "nv",
                                     "--nvml-library", CARVE_FAKE_NVML,
                                     "--cpu",          "16",
                                     "--memory",       "64Gi",
                                     "--data",         (dir_ / "agents/nv").string(),
                                     "--heartbeat-ms", "100"};
    for (std::string& arg : AgentArgs()) argv.push_back(std::move(arg));
    agents_.push_back(Spawn(argv, (dir_ / "nv.log").string()));
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
  // It was on the device (as its tenant's uid it could not list itself before 2026-12-05).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(nvml_ / "processes"),
                          std::filesystem::directory_iterator()),
            1);
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

// An agent on the fake NVML with a stand-in for nvidia-cuda-mps-control (the real one needs a
// GPU). Its daemon is a shell that lives while its pipe directory does; get_server_list names one
// server, 4242, whose clients are the pids in mps/clients; while mps/hang exists,
// get_server_list hangs (its pid in mps/hung) until the agent's 3 s limit kills it.
class NvmlMpsAgentTest : public NvmlAgentTest {
 protected:
  std::vector<std::string> AgentArgs() override {
    mps_ = dir_ / "mps";
    std::filesystem::create_directories(mps_);
    std::filesystem::permissions(mps_, std::filesystem::perms::all);  // jobs add their pids
    const std::string control = (dir_ / "mps-control").string();
    std::ofstream(control) << "#!/bin/sh\nstate=" << mps_.string() << R"sh(
if [ "$1" = "-d" ]; then
  sh -c 'while [ -d "$0" ]; do sleep 0.2; done' "$CUDA_MPS_PIPE_DIRECTORY" </dev/null >/dev/null 2>&1 &
  echo $! > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  exit 0
fi
read command
case "$command" in
  get_server_list)
    if [ -e "$state/hang" ]; then
      echo $$ > "$state/hung.new" && mv "$state/hung.new" "$state/hung" && exec sleep 60
    fi
    echo 4242 ;;
  "get_client_list 4242") cat "$state/clients" 2>/dev/null; true ;;
  quit) kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid")" ;;
esac
)sh";
    std::filesystem::permissions(control, std::filesystem::perms::owner_all);
    return {"--mps-control", control, "--mps-dir", (dir_ / "m").string()};
  }

  // A share whose process holds 1 GiB of its GPU (in the fake's process list) until cancelled;
  // `client`: the MPS server lists it as a client first, as CUDA connects before it allocates.
  json Share(bool client) {
    std::string script;
    if (client) script = absl::StrCat("echo $$ >> ", (mps_ / "clients").string(), "; ");
    absl::StrAppend(&script, "echo \"$CUDA_VISIBLE_DEVICES 1024\" > ",
                    (nvml_ / "processes").string(), "/$$; exec sleep 60");
    return Submit({{"command", {"sh", "-c", script}},
                   {"resources", {{"mode", "shared"}, {"gpu_compute", "50%"}}}});
  }
  json Record(const json& job) { return Job(job["id"])["replicas"][0]["gpu_isolation"]; }

  void SetUp() override {
    NvmlAgentTest::SetUp();
    // GPU 0 serves shares (an admin's node document, as scripts/gpu-check does on an H200).
    auto applied = Api().Post(
        "/api/v1/apply",
        json::array(
            {{{"kind", "node"}, {"name", "nv"}, {"gpus", {{{"index", 0}, {"mode", "shared"}}}}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(Eventually([&] { return Node("nv")["gpus"][0]["mode"] == "shared"; }))
        << Node("nv").dump(2);
  }

  std::filesystem::path mps_;
};

// CUDA runs without MPS, silently, when it cannot reach the daemon, and then no cap applies. A
// share whose process is in the MPS server's client list keeps `enforced: mps` with the client
// named; one whose process holds GPU memory outside every client list is recorded as not
// enforced, with the process, and the server writes job.share-not-enforced (an H200 showed the
// record claiming `mps` while no cap applied, 2026-12-04).
TEST_F(NvmlMpsAgentTest, AShareOutsideEveryClientListIsRecordedAsNotEnforced) {
  ASSERT_EQ(Node("nv")["gpus"][0]["share_enforcement"], "mps") << Node("nv").dump(2);
  json client = Share(true);
  json bypass = Share(false);
  ASSERT_TRUE(Eventually([&] { return Record(client).contains("client"); }))
      << Job(client["id"]).dump(2) << Logs(client["id"]) << Slurp((dir_ / "nv.log").string());
  EXPECT_EQ(Record(client)["enforced"], "mps");
  EXPECT_THAT(Record(client)["client"]["checked"].get<std::string>(), HasSubstr("get_client_list"));
  ASSERT_TRUE(Eventually([&] { return Record(bypass)["enforced"] == "none"; }))
      << Job(bypass["id"]).dump(2);
  json record = Record(bypass);
  EXPECT_EQ(record["bypassed"]["memory_mib"], 1024) << record.dump(2);
  EXPECT_THAT(record["why"].get<std::string>(), HasSubstr("no MPS server lists it as a client"));
  EXPECT_FALSE(record.contains("limits")) << record.dump(2);
  EXPECT_TRUE(record.contains("requested_not_enforced")) << record.dump(2);
  ASSERT_TRUE(Eventually([&] { return EventsOf("job.share-not-enforced").size() == 1; }));
  EXPECT_EQ(EventsOf("job.share-not-enforced")[0]["subject"],
            absl::StrCat("job/", bypass["id"].get<int64_t>()));
  EXPECT_EQ(Record(client)["enforced"], "mps");  // checked again each round, still a client
}

// Reading the client lists takes a control command per server, each allowed 3 s: it ran on the
// heartbeat thread (and a get_server_list went into each share's record at its launch), so a
// hung MPS control held every heartbeat (and, past the node timeout, would have had the node
// declared lost or the agent fence itself). It runs on its own thread now: heartbeats go on
// while the control program hangs, and nothing is concluded from it.
TEST_F(NvmlMpsAgentTest, AHungMpsControlDoesNotHoldTheHeartbeat) {
  std::ofstream(mps_ / "hang") << "";
  json job = Share(true);
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(mps_ / "hung"); }))
      << Job(job["id"]).dump(2) << Slurp((dir_ / "nv.log").string());
  const pid_t hung = std::stoi(Slurp((mps_ / "hung").string()));
  int64_t seen = Node("nv")["last_heartbeat_us"];
  int beats = 0;
  ASSERT_TRUE(Eventually([&] {
    const int64_t last = Node("nv")["last_heartbeat_us"];
    if (last != seen) ++beats;
    seen = last;
    return beats >= 2;
  }));
  EXPECT_EQ(::kill(hung, 0), 0)
      << "the hung control program was gone before two heartbeats went out: they waited for it";
  EXPECT_EQ(Record(job)["enforced"], "mps") << Record(job).dump(2);
  EXPECT_FALSE(Record(job).contains("bypassed"));
}

}  // namespace
}  // namespace carve::it
