// Residue judged by the device, not by the job's own pids; versions bound to every record. Real
// `carve server` and `carve agent` processes on simulated GPUs (ports/devices.h): each kind of
// leftover is planted, the reclaim must fail with the device's evidence, the device is
// quarantined, and `carve apply` with `state: available` is refused until the residue is gone.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

// Moves `pid` out of every cgroup (the replica's included) into each hierarchy's root: what a job
// running as root could do, and what the test (root) does for a job that runs as its tenant's
// user and so cannot itself.
void EscapeCgroups(pid_t pid) {
  for (const auto& dir : std::filesystem::directory_iterator("/sys/fs/cgroup")) {
    std::ofstream(dir.path() / "cgroup.procs") << pid << "\n";
  }
  std::ofstream("/sys/fs/cgroup/cgroup.procs") << pid << "\n";
}

// The uid a live process runs as.
uid_t UidOf(pid_t pid) {
  struct stat st {};
  return stat(absl::StrCat("/proc/", pid).c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

class ResidueTest : public PlatformTest {
 protected:
  void TearDown() override {
    for (pid_t pid : strays_) kill(pid, SIGKILL);
    PlatformTest::TearDown();
  }

  json Check(const json& job, const std::string& name) {
    for (const json& c : job["replicas"][0]["reclaim"]["checks"]) {
      if (c["name"] == name) return c;
    }
    return json();
  }

  absl::StatusOr<json> MakeAvailable(const std::string& node, int gpu) {
    return Api().Post("/api/v1/apply",
                      json::array({{{"kind", "node"},
                                    {"name", node},
                                    {"gpus", {{{"index", gpu}, {"state", "available"}}}}}}));
  }

  // The pid a job's stray process wrote to `file` (and remembered for clean-up).
  pid_t StrayPid(const std::string& file) {
    pid_t pid = 0;
    Eventually([&] { return (pid = std::atoi(Slurp(file).c_str())) > 0; }, 10);
    if (pid > 0) strays_.push_back(pid);
    return pid;
  }

  // The job failed its reclaim on its device, which is quarantined, and clearing the quarantine
  // is refused while the agent still sees the residue; the refusal names `expect`.
  void ExpectQuarantinedWithResidue(const json& done, const std::string& expect) {
    EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "failed") << done.dump(2);
    std::string node = done["replicas"][0]["node"];
    int device = done["replicas"][0]["grants"][0]["device"];
    EXPECT_TRUE(Node(node)["quarantined"].contains(std::to_string(device))) << Node(node).dump(2);
    ASSERT_TRUE(Eventually([&] { return Node(node)["residue"].contains(std::to_string(device)); }))
        << Node(node).dump(2);
    auto refused = MakeAvailable(node, device);
    ASSERT_FALSE(refused.ok()) << "a quarantine was cleared while residue remained";
    EXPECT_THAT(refused.status().message(), HasSubstr("residue"));
    EXPECT_THAT(refused.status().message(), HasSubstr(expect));
    EXPECT_TRUE(Node(node)["quarantined"].contains(std::to_string(device)));
  }

  // Once the residue is gone the agent's view clears and so may an admin.
  void ExpectClearedOnceGone(const json& done) {
    std::string node = done["replicas"][0]["node"];
    int device = done["replicas"][0]["grants"][0]["device"];
    ASSERT_TRUE(Eventually([&] { return !Node(node)["residue"].contains(std::to_string(device)); }))
        << Node(node).dump(2);
    auto cleared = MakeAvailable(node, device);
    ASSERT_TRUE(cleared.ok()) << cleared.status();
    EXPECT_FALSE(Node(node)["quarantined"].contains(std::to_string(device)));
  }

  std::vector<pid_t> strays_;
};

// The table's case: a job moves a process out of its cgroup and process group, and that process
// keeps 2 GiB on the device (under a name that claims another job). The device lists it.
TEST_F(ResidueTest, AnEscapeeFromTheCgroupAndProcessGroupIsResidue) {
  std::string pidfile = (Shared() / "escapee.pid").string();
  std::string moved = (Shared() / "moved").string();
  // The stray leaves the process group (setsid); the test then moves it out of the cgroup, and
  // only then does the job's leader exit.
  std::string escape = absl::StrCat(
      "setsid sh -c '",
      "echo 2048 > \"$CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/job-999-r0.$$\"; echo $$ > ", pidfile,
      "; exec sleep 300' </dev/null >/dev/null 2>&1 & while [ ! -e ", moved,
      " ]; do sleep 0.05; done");
  json job = Submit(
      {{"command", {"sh", "-c", escape}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  pid_t escapee = StrayPid(pidfile);
  ASSERT_GT(escapee, 0);
  EscapeCgroups(escapee);
  uid_t uid = UidOf(escapee);
  std::ofstream(moved) << "1\n";
  json done = WaitFinal(job["id"]);
  EXPECT_TRUE(Check(done, "processes-gone")["ok"]) << "the escapee was still in the job's group";
  json procs = Check(done, "device-processes");
  EXPECT_FALSE(procs["ok"]) << done.dump(2);
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr(absl::StrCat("pid ", escapee)));
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr(absl::StrCat("uid ", uid)));
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr("sleep 300"));
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr("2048 MiB"));
  EXPECT_EQ(procs["residue"][0]["pid"], escapee);
  EXPECT_FALSE(Check(done, "device-memory")["ok"]);
  ExpectQuarantinedWithResidue(done, absl::StrCat("pid ", escapee));
  kill(escapee, SIGKILL);
  ExpectClearedOnceGone(done);
}

// Memory the driver did not free, with no process left: above the device's baseline.
TEST_F(ResidueTest, MemoryNoProcessHoldsIsResidue) {
  json job = Submit({{"command",
                      {"sh", "-c",
                       "echo '2048 leak' > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/"
                       "job-$CARVE_JOB_ID-r$CARVE_REPLICA.$$"}},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_TRUE(Check(done, "device-processes")["ok"]) << done.dump(2);
  json mem = Check(done, "device-memory");
  EXPECT_FALSE(mem["ok"]);
  EXPECT_THAT(mem["observed"].get<std::string>(), HasSubstr("2048 MiB in use above"));
  EXPECT_EQ(mem["used_mib"], 2048);
  ExpectQuarantinedWithResidue(done, "2048 MiB in use above the device's baseline");
  std::string node = done["replicas"][0]["node"];
  std::string uuid =
      absl::StrCat("GPU-sim-", node, "-", done["replicas"][0]["grants"][0]["device"].get<int>());
  for (const auto& f :
       std::filesystem::directory_iterator(dir_ / "jobs" / node / "simgpu" / uuid)) {
    if (f.path().filename().string().rfind("job-", 0) == 0) std::filesystem::remove(f.path());
  }
  ExpectClearedOnceGone(done);
}

// A defunct (zombie) process the device still lists: its parent escaped and never reaps it.
TEST_F(ResidueTest, ADefunctHolderIsResidue) {
  std::string zpid = (Shared() / "zombie.pid").string();
  std::string ppid = (Shared() / "parent.pid").string();
  std::string moved = (Shared() / "moved").string();
  std::string script =
      absl::StrCat("setsid sh -c 'echo $$ > ", ppid, "; while [ ! -e ", moved,
                   " ]; do sleep 0.05; done; sh -c \"sleep 0.3; echo \\\"1024 hold\\\" > "
                   "$CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/z.\\$\\$; "
                   "echo \\$\\$ > ",
                   zpid, "\" & exec sleep 300' </dev/null >/dev/null 2>&1 & while [ ! -s ", zpid,
                   " ]; do sleep 0.05; done");
  json job = Submit(
      {{"command", {"sh", "-c", script}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  pid_t parent = StrayPid(ppid);
  ASSERT_GT(parent, 0);
  EscapeCgroups(parent);  // before it forks the holder, which is born outside the job's cgroup
  std::ofstream(moved) << "1\n";
  pid_t zombie = StrayPid(zpid);
  ASSERT_GT(zombie, 0);
  json done = WaitFinal(job["id"]);
  json procs = Check(done, "device-processes");
  EXPECT_FALSE(procs["ok"]) << done.dump(2);
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr(absl::StrCat("pid ", zombie)));
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr("defunct"));
  ExpectQuarantinedWithResidue(done, absl::StrCat("pid ", zombie));
  // The driver lets go once the process is reaped; here the holder's file goes with it.
  kill(parent, SIGKILL);
  std::string node = done["replicas"][0]["node"];
  std::string uuid =
      absl::StrCat("GPU-sim-", node, "-", done["replicas"][0]["grants"][0]["device"].get<int>());
  std::filesystem::remove(dir_ / "jobs" / node / "simgpu" / uuid / absl::StrCat("z.", zombie));
  ExpectClearedOnceGone(done);
}

// A process that is no Carve job's at all, on the device the job used: residue all the same.
TEST_F(ResidueTest, AForeignProcessOnTheDeviceIsResidue) {
  pid_t foreign = Spawn({"/bin/sleep", "300"}, (dir_ / "foreign.log").string());
  strays_.push_back(foreign);
  for (const auto& [node, gpus] : {std::pair<std::string, std::vector<int>>{"gpu-a", {0, 1}},
                                   std::pair<std::string, std::vector<int>>{"gpu-b", {1}}}) {
    for (int gpu : gpus) {
      auto where = dir_ / "jobs" / node / "simgpu" / absl::StrCat("GPU-sim-", node, "-", gpu);
      std::filesystem::create_directories(where);
      std::ofstream(where / absl::StrCat("trainer.", foreign)) << "512\n";
    }
  }
  json job = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  json done = WaitFinal(job["id"]);
  json procs = Check(done, "device-processes");
  EXPECT_FALSE(procs["ok"]) << done.dump(2);
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr(absl::StrCat("pid ", foreign)));
  EXPECT_THAT(procs["observed"].get<std::string>(), HasSubstr("`/bin/sleep 300`"));
  ExpectQuarantinedWithResidue(done, absl::StrCat("pid ", foreign));
  Kill(foreign, SIGKILL);
  ExpectClearedOnceGone(done);
}

// Replicas sharing a GPU explain each other's processes: a job's reclaim does not flag the
// other job still running there.
TEST_F(ResidueTest, AnotherLiveReplicaOnASharedGpuIsNotResidue) {
  ASSERT_TRUE(  // one shared GPU left, so both jobs share it
      Api()
          .Post("/api/v1/apply", json::array({{{"kind", "node"},
                                               {"name", "gpu-a"},
                                               {"gpus", {{{"index", 3}, {"mode", "exclusive"}}}}}}))
          .ok());
  const std::string hold =
      "echo 1024 > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/job-$CARVE_JOB_ID.$$; ";
  json other = Submit({{"command", {"sh", "-c", hold + "exec sleep 30"}},
                       {"resources", {{"mode", "shared"}, {"gpu_compute", "40%"}}}});
  ASSERT_TRUE(Eventually([&] { return Job(other["id"])["state"] == "running"; }));
  json job = Submit({{"command", {"sh", "-c", hold + "sleep 0.3"}},
                     {"resources", {{"mode", "shared"}, {"gpu_compute", "40%"}}}});
  json done = WaitFinal(job["id"]);
  json running = Job(other["id"]);
  ASSERT_EQ(done["replicas"][0]["grants"][0]["device"],
            running["replicas"][0]["grants"][0]["device"]);
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified") << done.dump(2);
  EXPECT_THAT(Check(done, "device-memory")["observed"].get<std::string>(),
              HasSubstr("live replicas 1024 MiB"));
  ASSERT_TRUE(Api()
                  .Post(absl::StrCat("/api/v1/jobs/", other["id"].get<int64_t>(), "/cancel"),
                        json::object())
                  .ok());
  EXPECT_EQ(WaitFinal(other["id"])["replicas"][0]["reclaim"]["status"], "verified");
}

// --- Versions bound to evidence --------------------------------------------------------------

TEST_F(ResidueTest, RecordsCarryTheVersionsOfTheNodeTheyRanOn) {
  json node = Node("gpu-a");
  json versions = node["versions"];
  ASSERT_TRUE(versions.is_object()) << node.dump(2);
  EXPECT_EQ(versions["driver"], "simulated");
  EXPECT_FALSE(versions["carve"].get<std::string>().empty());
  EXPECT_THAT(versions["kernel"].get<std::string>(), HasSubstr("Linux"));
  EXPECT_EQ(versions["gpus"][0]["vbios"], "simulated");
  EXPECT_EQ(versions["gpus"][0]["mig"], false);
  std::string id = versions["id"];
  auto server = Api().Get("/api/v1/version");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)["version"], versions["carve"]);

  json job = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  json done = WaitFinal(job["id"]);
  std::string ran_on = done["replicas"][0]["node"];
  std::string vid = Node(ran_on)["versions"]["id"];
  EXPECT_EQ(done["replicas"][0]["versions"]["id"], vid) << done.dump(2);
  EXPECT_EQ(done["replicas"][0]["versions"]["driver"], "simulated");
  EXPECT_EQ(done["replicas"][0]["reclaim"]["versions"], vid);
  json usage = *Api().Get("/api/v1/usage/records");
  bool found = false;
  for (const json& r : usage) {
    if (r["job"] != done["id"]) continue;
    found = true;
    EXPECT_EQ(r["devices"][0]["versions"], vid) << r.dump(2);
  }
  EXPECT_TRUE(found);
  for (const json& e : EventsOf("")) {
    if (e["subject"] != absl::StrCat("job/", done["id"].get<int64_t>())) continue;
    if (e["type"] == "job.submitted" || e["type"] == "job.scheduled") continue;
    EXPECT_EQ(e["details"]["versions"][ran_on], vid) << e.dump(2);
  }
}

TEST_F(ResidueTest, ARestartedAgentWithOtherVersionsIsAnEvent) {
  json before = Node("gpu-a")["versions"];
  Kill(agents_[0], SIGTERM);
  setenv("CARVE_SIM_DRIVER_VERSION", "999.12", 1);
  agents_[0] = StartAgent(0);
  unsetenv("CARVE_SIM_DRIVER_VERSION");
  ASSERT_TRUE(Eventually([&] { return !EventsOf("node.versions-changed").empty(); }))
      << Slurp((dir_ / "gpu-a.log").string());
  json e = EventsOf("node.versions-changed")[0];
  EXPECT_EQ(e["subject"], "node/gpu-a");
  EXPECT_EQ(e["details"]["old"]["driver"], "simulated");
  EXPECT_EQ(e["details"]["new"]["driver"], "999.12");
  EXPECT_EQ(e["details"]["old"]["id"], before["id"]);
  EXPECT_NE(e["details"]["new"]["id"], before["id"]);
  EXPECT_THAT(e["reason"].get<std::string>(), HasSubstr("driver simulated -> 999.12"));
  EXPECT_EQ(Node("gpu-a")["versions"]["driver"], "999.12");
  // The same node and partition ids: jobs still land there and name the new set.
  json job = Submit({{"command", {"true"}}, {"resources", {{"gpus", 2}, {"gpu_model", {"H200"}}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["replicas"][0]["node"], "gpu-a");
  EXPECT_EQ(done["replicas"][0]["versions"]["driver"], "999.12");
}

}  // namespace
}  // namespace carve
