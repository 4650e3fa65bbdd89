// Shared GPUs under MPS, on simulated GPUs with the simulated MPS control program (the same
// contract as nvidia-cuda-mps-control): the agent starts and supervises one daemon per shared
// GPU, a share's caps reach the client and are enforced, the record says what enforced them, a
// dead daemon is a device fault, and one GPU serves one tenant's shares at a time.
#include <fstream>

#include "absl/strings/match.h"
#include "integration/harness.h"

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

// One shared L40S (48 GiB), so that every share lands on the same GPU.
const NodeList kShareNodes = {{"share-0", "gpus:\n  - {model: L40S, count: 1, mode: shared}\n"}};

class MpsTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kShareNodes; }

  json Shared(const std::string& compute, const std::string& memory, const std::string& script,
              const std::string& tenant = "default") {
    json resources = {{"mode", "shared"}, {"gpu_compute", compute}};
    if (!memory.empty()) resources["gpu_memory"] = memory;
    return Submit(
        {{"tenant", tenant}, {"command", {"sh", "-c", script}}, {"resources", resources}});
  }

  bool Running(int64_t id) { return Job(id)["state"] == "running"; }

  // What the scheduler says would let a waiting job run.
  std::string Fix(int64_t id) {
    auto explained = Api().Get(absl::StrCat("/api/v1/jobs/", id, "/explain"));
    return explained.ok() ? explained->value("fix", "") : "";
  }

  void ApplyTenants() {
    ASSERT_TRUE(Api()
                    .Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                                        {{"kind", "tenant"}, {"name", "globex"}}}))
                    .ok());
  }

  // Simulated device memory: the job "allocates" MiB on its GPU (see ports/devices.h).
  static std::string Allocate(int mib, int seconds) {
    return absl::StrCat("echo ", mib, " > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/alloc.$$; ",
                        "echo allocated; sleep ", seconds, "; echo done");
  }
};

TEST_F(MpsTest, ShareRunsAsAnMpsClientAndItsRecordSaysWhatEnforcedItsCaps) {
  json node = Node("share-0");
  EXPECT_EQ(node["gpus"][0]["share_enforcement"], "mps (simulated)") << node.dump(2);
  json job = Shared("50%", "8Gi",
                    "echo pipe=$CUDA_MPS_PIPE_DIRECTORY limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "
                    "threads=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  json done = WaitFinal(job["id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  json record = done["replicas"][0]["gpu_isolation"];
  EXPECT_EQ(record["enforced"], "mps (simulated)") << record.dump(2);
  EXPECT_GT(record["daemon"]["pid"].get<int64_t>(), 0);
  EXPECT_EQ(record["daemon"]["state"], "alive");
  EXPECT_EQ(record["limits"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=8192M");
  EXPECT_EQ(record["limits"]["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50");
  std::string pipe = record["daemon"]["pipe_dir"];
  EXPECT_THAT(Logs(job["id"]), HasSubstr(absl::StrCat("pipe=", pipe, " limit=0=8192M threads=50")));
}

// Every tenant's uid must reach the daemon's pipe: made under the agent's umask (077), the GPU's
// directory above it was 0700, a tenant's CUDA could not connect and ran without MPS, silently,
// its caps not applied (found on an H200, 2026-12-04). The pipe and log directories are writable
// by every uid (sticky, as /tmp): the daemon starts each uid's MPS server there.
TEST_F(MpsTest, EveryTenantsUidCanReachTheDaemon) {
  json done = WaitFinal(Shared("50%", "8Gi", "true")["id"]);
  const json record = done["replicas"][0]["gpu_isolation"];
  using std::filesystem::perms;
  const std::string pipe = record["daemon"]["pipe_dir"];
  const std::string gpu = pipe.substr(0, pipe.rfind('/'));
  for (const std::string& dir : {pipe, gpu + "/log"}) {
    EXPECT_EQ(std::filesystem::status(dir).permissions(), perms::all | perms::sticky_bit) << dir;
  }
  // And every directory on the way there may be entered by any uid.
  for (std::string dir = gpu; dir.size() > 1; dir = dir.substr(0, dir.rfind('/'))) {
    EXPECT_NE(std::filesystem::status(dir).permissions() & perms::others_exec, perms::none) << dir;
    if (dir.rfind('/') == 0) break;
  }
}

// The MPS directory's default is a name anyone can compute under /tmp: one planted there as a
// symlink is refused, naming it, and the GPU's shares run without caps only if best-effort.
class MpsPlantedDirTest : public MpsTest {
 protected:
  void SetUp() override {
    planted_ =
        std::filesystem::path(::testing::TempDir()) / absl::StrCat("carve-planted-", getpid());
    std::filesystem::remove_all(planted_);
    std::filesystem::create_directories(planted_ / "target");
    std::filesystem::create_directory_symlink(planted_ / "target", planted_ / "mps");
    agent_args_ = {"--mps-dir", (planted_ / "mps").string()};
    MpsTest::SetUp();
  }
  void TearDown() override {
    MpsTest::TearDown();
    std::filesystem::remove_all(planted_);
  }
  std::filesystem::path planted_;
};

TEST_F(MpsPlantedDirTest, ASymlinkPlantedAsTheMpsDirectoryIsRefused) {
  const std::string enforcement = Node("share-0")["gpus"][0]["share_enforcement"];
  EXPECT_THAT(enforcement, HasSubstr("not a directory of the agent's own user")) << enforcement;
  EXPECT_EQ(std::filesystem::status(planted_ / "target").permissions() &
                std::filesystem::perms::others_write,
            std::filesystem::perms::none)
      << "the planted target was made writable by every uid";
}

// No memory request is no license to take the whole GPU: the share's memory follows its compute.
TEST_F(MpsTest, ShareWithoutMemoryRequestIsCappedAnyway) {
  json job = Shared("25%", "", "echo limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  json done = WaitFinal(job["id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  int64_t granted = done["replicas"][0]["grants"][0]["memory_mib"];
  EXPECT_EQ(granted, 46068 / 4) << done.dump(2);  // a quarter of the L40S (46068 MiB)
  EXPECT_THAT(Logs(job["id"]), HasSubstr(absl::StrCat("limit=0=", granted, "M")));
  EXPECT_EQ(done["replicas"][0]["gpu_isolation"]["limits"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"],
            absl::StrCat("0=", granted, "M"));
}

// The first row: a job with an 8 GiB share allocating 16 GiB. The daemon refuses it.
TEST_F(MpsTest, AllocationOverTheCapIsRefusedAndWithinItWorks) {
  json over = Shared("50%", "8Gi", Allocate(16384, 30));
  json ended = WaitFinal(over["id"], 30);
  EXPECT_EQ(ended["state"], "failed") << ended.dump(2);
  EXPECT_EQ(ended["replicas"][0]["signal"], 9) << ended.dump(2);
  EXPECT_THAT(Logs(over["id"]), ::testing::Not(HasSubstr("done")));
  std::filesystem::path pipe =
      ended["replicas"][0]["gpu_isolation"]["daemon"]["pipe_dir"].get<std::string>();
  EXPECT_THAT(Slurp((pipe.parent_path() / "log/control.log").string()),
              HasSubstr("allocation of 16384 MiB exceeds its pinned device memory limit of 8192 "
                        "MiB: out of memory"));
  json within = Shared("50%", "8Gi", Allocate(6144, 1));
  json ok = WaitFinal(within["id"], 30);
  EXPECT_EQ(ok["state"], "succeeded") << ok.dump(2);
  EXPECT_THAT(Logs(within["id"]), HasSubstr("done"));
}

// The daemon dying is a device fault: the jobs on that GPU are moved off by their policy, the
// event names them, and a new daemon runs before the GPU is healthy again.
TEST_F(MpsTest, DaemonDeathIsADeviceFaultAndTheDaemonIsRestarted) {
  json job = Shared("30%", "4Gi", "sleep 60");
  int64_t id = job["id"];
  ASSERT_TRUE(Eventually([&] { return Running(id); })) << Job(id).dump(2);
  int64_t daemon = Job(id)["replicas"][0]["gpu_isolation"]["daemon"]["pid"];
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(kill(static_cast<pid_t>(daemon), SIGKILL), 0);
  json fault;
  ASSERT_TRUE(Eventually([&] {
    json events = EventsOf("device.unhealthy");
    if (events.empty()) return false;
    fault = events.back();
    return true;
  })) << EventsOf("").dump(2);
  EXPECT_THAT(fault.dump(), HasSubstr("mps daemon died"));
  EXPECT_THAT(fault["details"]["jobs"], ::testing::Contains(id)) << fault.dump(2);
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.healthy").empty(); }));
  EXPECT_EQ(Node("share-0")["gpus"][0]["health"], "healthy");
  // The job ran again (batch: requeue) under the new daemon.
  ASSERT_TRUE(Eventually([&] { return Running(id) && Job(id)["attempt"] == 1; }, 30))
      << Job(id).dump(2);
  int64_t restarted = Job(id)["replicas"][0]["gpu_isolation"]["daemon"]["pid"];
  EXPECT_NE(restarted, daemon);
  EXPECT_EQ(Job(id)["replicas"][0]["gpu_isolation"]["daemon"]["restarts"], 1);
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object()).ok());
  EXPECT_EQ(WaitFinal(id)["state"], "cancelled");
}

// One MPS server serves one Unix user at a time: a second tenant's share never lands on a GPU
// that serves the first tenant's shares (there it would hang in CUDA initialisation); it waits,
// says why, and runs once they are gone.
TEST_F(MpsTest, SecondTenantsShareWaitsUntilTheFirstTenantsSharesEnd) {
  ApplyTenants();
  std::string release = (dir_ / "release").string();
  json first = Shared(
      "30%", "4Gi", "while [ ! -e " + release + " ]; do sleep 0.1; done; echo first done", "acme");
  int64_t a = first["id"];
  ASSERT_TRUE(Eventually([&] { return Running(a); })) << Job(a).dump(2);
  json same = Shared("30%", "4Gi", "echo same tenant", "acme");
  EXPECT_EQ(WaitFinal(same["id"])["state"], "succeeded");  // packs beside it
  json second = Shared("30%", "4Gi", "echo second ran", "globex");
  int64_t b = second["id"];
  ASSERT_TRUE(Eventually([&] {
    return Fix(b).find("serves tenant acme's shares") != std::string::npos;
  })) << Job(b).dump(2)
      << Fix(b);
  EXPECT_THAT(Job(b)["reason"].get<std::string>(), HasSubstr("gpu-serves-other-tenant"));
  EXPECT_EQ(Job(b)["state"], "queued");
  EXPECT_TRUE(Running(a));
  std::ofstream(release) << "go\n";
  EXPECT_EQ(WaitFinal(a)["state"], "succeeded");
  json done = WaitFinal(b);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_GE(done["started_us"].get<int64_t>(), Job(a)["ended_us"].get<int64_t>());
}

// Without a daemon, a shared GPU's caps cannot be enforced: the node says why, an enforced share
// is not placed there (and says why), a best-effort share runs and its record says so.
TEST_F(MpsTest, WithoutADaemonOnlyBestEffortSharesRunAndTheirRecordSaysSo) {
  std::string yaml = (dir_ / "nomps.yaml").string();
  std::ofstream(yaml) << "gpus:\n  - {model: T4, count: 1, mode: shared}\n";
  agents_.push_back(Spawn({CARVE_BINARY,     "agent",
                           "--server",       url_,
                           "--token-file",   (dir_ / "data/agent.token").string(),
                           "--node",         "nomps",
                           "--devices",      yaml,
                           "--cpu",          "4",
                           "--memory",       "8Gi",
                           "--data",         (dir_ / "agents/nomps").string(),
                           "--heartbeat-ms", "100",
                           "--mps-control",  "/nonexistent/nvidia-cuda-mps-control"},
                          (dir_ / "nomps.log").string()));
  ASSERT_TRUE(Eventually([&] { return !Node("nomps").is_null(); }))
      << Slurp((dir_ / "nomps.log").string());
  std::string why = Node("nomps")["gpus"][0].value("share_enforcement", "");
  EXPECT_THAT(why, HasSubstr("none: cannot start the MPS control daemon"));
  json enforced =
      Submit({{"command", {"true"}},
              {"resources", {{"mode", "shared"}, {"gpu_compute", "20%"}, {"gpu_model", {"T4"}}}}});
  ASSERT_TRUE(Eventually([&] {
    return Fix(enforced["id"]).find("cannot enforce share caps") != std::string::npos;
  })) << Job(enforced["id"]).dump(2)
      << Fix(enforced["id"]);
  EXPECT_THAT(Job(enforced["id"])["reason"].get<std::string>(), HasSubstr("gpu-caps-not-enforced"));
  json best = Submit({{"command", {"sh", "-c", "echo pipe=[$CUDA_MPS_PIPE_DIRECTORY]"}},
                      {"isolation", "best-effort"},
                      {"resources",
                       {{"mode", "shared"},
                        {"gpu_compute", "20%"},
                        {"gpu_memory", "2Gi"},
                        {"gpu_model", {"T4"}}}}});
  json done = WaitFinal(best["id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  json record = done["replicas"][0]["gpu_isolation"];
  EXPECT_EQ(record["enforced"], "none") << record.dump(2);
  EXPECT_EQ(record["isolation"], "best-effort");
  EXPECT_THAT(record["why"].get<std::string>(), HasSubstr("cannot start"));
  EXPECT_FALSE(record.contains("limits")) << "nothing may show a cap that was not applied";
  EXPECT_EQ(record["requested_not_enforced"]["memory_mib"], 2048);
  EXPECT_THAT(Logs(best["id"]), HasSubstr("pipe=[]"));
  EXPECT_EQ(Job(enforced["id"])["state"], "queued");
}

TEST_F(MpsTest, IsolationFieldIsChecked) {
  auto bad = Api().Post("/api/v1/jobs", {{"command", {"true"}}, {"isolation", "loose"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("isolation"));
}

}  // namespace
