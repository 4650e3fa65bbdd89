// End to end: the real `carve server` and `carve agent` binaries as processes, real job
// processes, a real SQLite file.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"
#include "ports/store.h"
#include "runtime/api_client.h"
#include "runtime/records.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

TEST_F(PlatformTest, EachDeliveryModeRunsToSuccessWithLogs) {
  const json show_env = {"sh", "-c",
                         "echo devices=$CUDA_VISIBLE_DEVICES job=$CARVE_JOB_ID "
                         "mps=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE ckpt=$CARVE_CHECKPOINT_DIR"};
  struct Case {
    json resources;
    std::string expect;
  };
  std::vector<Case> cases = {
      {{{"gpus", 2}, {"gpu_model", {"H200"}}}, "devices=GPU-sim-gpu-a-0,GPU-sim-gpu-a-1"},
      {{{"mode", "shared"}, {"gpu_compute", "30%"}, {"gpu_memory", "4Gi"}}, "mps=30"},
      {{{"mode", "partition"}, {"profile", "3g.40gb"}}, "devices=MIG-sim-gpu-b-0-"},
      {{{"gpus", 0}}, "devices= "},
  };
  for (const Case& c : cases) {
    json job = Submit({{"command", show_env}, {"resources", c.resources}});
    json done = WaitFinal(job["id"]);
    EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
    EXPECT_THAT(Logs(job["id"]), HasSubstr(c.expect)) << c.resources.dump();
    EXPECT_THAT(Logs(job["id"]), HasSubstr(absl::StrCat("job=", job["id"].get<int64_t>())));
    EXPECT_FALSE(done["replicas"][0]["enforcement"].get<std::string>().empty());
  }
}

TEST_F(PlatformTest, FailingCommandEndsFailedWithItsExitCode) {
  json job = Submit({{"command", {"sh", "-c", "echo about to fail; exit 3"}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_EQ(done["replicas"][0]["exit_code"], 3);
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("exit code 3"));
  EXPECT_THAT(Logs(job["id"]), HasSubstr("about to fail"));
  json missing = Submit({{"command", {"no-such-command-xyz"}}});
  json ended = WaitFinal(missing["id"]);
  EXPECT_EQ(ended["state"], "failed");
  EXPECT_THAT(Logs(missing["id"]), HasSubstr("no-such-command-xyz"));
}

// An agent restarted (SIGTERM, then a new one) leaves its jobs running and re-adopts them.
TEST_F(PlatformTest, AgentRestartKeepsAndReadoptsItsJobs) {
  json job = Submit({{"command", {"sh", "-c", "echo first; sleep 2; echo second"}},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  for (int i = 0; i < 100; ++i) {
    if ((*Api().Get(absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>())))["state"] ==
        "running") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int64_t pid =
      (*Api().Get(absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>())))["replicas"][0]["pid"];
  Kill(agents_[0], SIGTERM);
  ASSERT_FALSE(Dead(static_cast<pid_t>(pid))) << "stopping the agent killed its job";
  agents_[0] = Spawn(
      {CARVE_BINARY, "agent", "--server", url_, "--token-file",
       (dir_ / "data/agent.token").string(), "--node", kNodes[0].first, "--devices",
       (dir_ / absl::StrCat(kNodes[0].first, ".yaml")).string(), "--cpu", "16", "--memory", "64Gi",
       "--data", (dir_ / "agents" / kNodes[0].first).string(), "--heartbeat-ms", "100"},
      (dir_ / "gpu-a.log").string());
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["replicas"][0]["exit_code"], 0);
  EXPECT_EQ(done["replicas"][0]["pid"], pid);
  EXPECT_THAT(Logs(job["id"]), HasSubstr("second"));
}

TEST_F(PlatformTest, ApplyConfiguresTenantsQueuesAndGpuModesAllOrNothing) {
  ApiClient api = Api();
  json bad = json::array({{{"kind", "tenant"}, {"name", "vision"}},
                          {{"kind", "project"}, {"name", "det"}, {"tenant", "nobody"}}});
  auto refused = api.Post("/api/v1/apply", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("document 1: tenant: no tenant \"nobody\""));
  EXPECT_EQ(api.Get("/api/v1/tenants")->size(), 1u) << "a refused apply changed something";
  json docs = json::array(
      {{{"kind", "tenant"}, {"name", "vision"}},
       {{"kind", "project"}, {"name", "det"}, {"tenant", "vision"}},
       {{"kind", "queue"}, {"name", "training"}, {"quota", {{"gpus", 4}}}},
       {{"kind", "node"}, {"name", "gpu-a"}, {"gpus", {{{"index", 2}, {"mode", "exclusive"}}}}}});
  auto applied = api.Post("/api/v1/apply", docs);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["applied"].size(), 4u);
  json nodes = *api.Get("/api/v1/nodes");
  for (const json& n : nodes) {
    if (n["name"] == "gpu-a") {
      EXPECT_EQ(n["gpus"][2]["mode"], "exclusive");
    }
  }
  json job = Submit({{"command", {"true"}},
                     {"tenant", "vision"},
                     {"project", "det"},
                     {"queue", "training"},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"L40S"}}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded");
  EXPECT_EQ(done["replicas"][0]["grants"][0]["device"], 2);  // the L40S made exclusive
  auto unknown = api.Post("/api/v1/jobs", json{{"command", {"true"}}, {"queue", "nope"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("no queue \"nope\""));
}

json Check(const json& job, const std::string& name) {
  for (const json& c : job["replicas"][0]["reclaim"]["checks"]) {
    if (c["name"] == name) return c;
  }
  return json();
}

// Every end goes through reclaiming; the record shows each check with what was observed.
TEST_F(PlatformTest, ReclaimIsVerifiedWithEvidence) {
  // Uses 1 GiB of the shared GPU while it runs; the driver frees it when the process ends.
  json job = Submit({{"command",
                      {"sh", "-c",
                       "echo 1024 > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/"
                       "job-$CARVE_JOB_ID-r$CARVE_REPLICA.$$; sleep 0.3"}},
                     {"resources", {{"mode", "shared"}, {"gpu_compute", "50%"}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded");
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified") << done.dump(2);
  EXPECT_TRUE(Check(done, "processes-gone")["ok"]);
  EXPECT_TRUE(Check(done, "device-processes")["ok"]);
  EXPECT_THAT(Check(done, "device-memory")["observed"].get<std::string>(), HasSubstr("0 MiB"));
  std::vector<std::string> types;
  json events = Api().Get("/api/v1/events?after=0").value_or(json::array());
  for (const json& e : events) {
    if (e["subject"] == absl::StrCat("job/", done["id"].get<int64_t>())) types.push_back(e["type"]);
  }
  EXPECT_THAT(types,
              ::testing::ElementsAre("job.submitted", "job.scheduled", "job.started",
                                     "job.replica-exited", "job.reclaiming", "job.succeeded"));
}

// A child that ignores SIGTERM and outlives the command is stopped by the reclaim.
TEST_F(PlatformTest, ReclaimStopsStragglers) {
  std::string pidfile = (Shared() / "straggler.pid").string();
  json job = Submit(
      {{"command",
        {"sh", "-c",
         absl::StrCat("(trap '' TERM; exec sleep 300) & echo $! > ", pidfile, "; exit 0")}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded");
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "verified");
  EXPECT_THAT(Check(done, "processes-gone")["observed"].get<std::string>(),
              HasSubstr("stragglers stopped"));
  EXPECT_TRUE(Dead(std::stoi(Slurp(pidfile))));
}

// Device memory that does not come back fails the check and quarantines the device until an
// admin clears it.
TEST_F(PlatformTest, FailedReclaimQuarantinesTheDevice) {
  json job = Submit({{"command",
                      {"sh", "-c",
                       "echo '2048 leak' > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/"
                       "job-$CARVE_JOB_ID-r$CARVE_REPLICA.$$"}},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"L40S"}}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "succeeded");  // the job's own end; the platform's failure is separate
  EXPECT_EQ(done["replicas"][0]["reclaim"]["status"], "failed");
  json mem = Check(done, "device-memory");
  EXPECT_FALSE(mem["ok"]);
  EXPECT_THAT(mem["observed"].get<std::string>(), HasSubstr("2048 MiB"));
  int device = done["replicas"][0]["grants"][0]["device"];
  json node;
  json nodes = Api().Get("/api/v1/nodes").value_or(json::array());
  for (const json& n : nodes) {
    if (n["name"] == "gpu-a") node = n;
  }
  ASSERT_TRUE(node["quarantined"].contains(std::to_string(device))) << node.dump(2);
  // Nothing new lands on the quarantined device.
  json other =
      Submit({{"command", {"true"}}, {"resources", {{"gpus", 2}, {"gpu_model", {"L40S"}}}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto explain = Api().Get(absl::StrCat("/api/v1/jobs/", other["id"].get<int64_t>(), "/explain"));
  EXPECT_EQ((*explain)["state"], "queued");
  // Not while the memory is still held (the agent reports the device's residue) ...
  auto early = Api().Post("/api/v1/apply",
                          json::array({{{"kind", "node"},
                                        {"name", "gpu-a"},
                                        {"gpus", {{{"index", device}, {"state", "available"}}}}}}));
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.status().message(), HasSubstr("2048 MiB"));
  // ... but once the driver lets go an admin clears it; the waiting job runs.
  std::filesystem::path gpu_dir =
      dir_ / "jobs/gpu-a/simgpu" / absl::StrCat("GPU-sim-gpu-a-", device);
  for (const auto& f : std::filesystem::directory_iterator(gpu_dir)) {
    if (f.path().filename().string().rfind("job-", 0) == 0) std::filesystem::remove(f.path());
  }
  ASSERT_TRUE(
      Eventually([&] { return !Node("gpu-a")["residue"].contains(std::to_string(device)); }));
  auto cleared = Api().Post(
      "/api/v1/apply", json::array({{{"kind", "node"},
                                     {"name", "gpu-a"},
                                     {"gpus", {{{"index", device}, {"state", "available"}}}}}}));
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(WaitFinal(other["id"])["state"], "succeeded");
}

// Ends are classified so users can tell their code from the platform.
TEST_F(PlatformTest, EndReasonsNameSignalsAndOutOfMemory) {
  json segv = Submit({{"command", {"sh", "-c", "kill -SEGV $$"}}});
  json done = WaitFinal(segv["id"]);
  EXPECT_EQ(done["state"], "failed");
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("killed by signal 11 (SIGSEGV)"));
  json oom = Submit({{"command", {"sh", "-c", "head -c 400000000 /dev/zero | tail"}},
                     {"resources", {{"memory", "64Mi"}}}});
  json ended = WaitFinal(oom["id"]);
  EXPECT_EQ(ended["state"], "failed");
  if (ended["replicas"][0]["enforcement"].get<std::string>().rfind("none", 0) != 0) {
    EXPECT_THAT(ended["reason"].get<std::string>(), HasSubstr("out of memory (limit 64Mi)"));
  }
}

// An agent killed with SIGKILL: its node goes not-ready, the training job on it is lost and
// retried on the other node from its checkpoint, and the dead node's devices stay fenced until
// the agent returns and the old processes are gone.
TEST_F(PlatformTest, NodeLossRetriesTrainingElsewhereAndFencesTheDevices) {
  json job = Submit({{"kind", "training"},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}},
                     {"command",
                      {"sh", "-c",
                       "step=$(cat $CARVE_CHECKPOINT_DIR/step 2>/dev/null || echo 0); "
                       "echo attempt $CARVE_ATTEMPT step $step resumed; "
                       "while [ $step -lt 60 ]; do step=$((step+1)); echo $step > "
                       "$CARVE_CHECKPOINT_DIR/step; echo attempt $CARVE_ATTEMPT step $step on "
                       "$CARVE_NODE; sleep 0.1; done"}}});
  int64_t id = job["id"];
  json running;
  for (int i = 0; i < 100; ++i) {
    running = *Api().Get(absl::StrCat("/api/v1/jobs/", id));
    if (running["state"] == "running" && Logs(id).find("step 3") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string first = running["replicas"][0]["node"];
  int victim = first == kNodes[0].first ? 0 : 1;
  // The killed agent's job keeps running (as on a partitioned node) and may reach the last
  // step before the retry starts; the retry still says where it resumed.
  Kill(agents_[victim], SIGKILL);
  json done = WaitFinal(id, 30);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["attempt"], 1);
  EXPECT_NE(done["replicas"][0]["node"], first);
  EXPECT_THAT(done["attempts"][0]["cause"].get<std::string>(), HasSubstr("stopped heartbeating"));
  EXPECT_THAT(Logs(id), HasSubstr("attempt 1 step"));
  EXPECT_THAT(Logs(id), ::testing::Not(HasSubstr("attempt 1 step 1 ")));  // resumed, not restarted
  auto fenced = [&] {
    json nodes = Api().Get("/api/v1/nodes").value_or(json::array());
    for (const json& n : nodes) {
      if (n["name"] == first) return n["fenced"].size();
    }
    return size_t{0};
  };
  EXPECT_EQ(fenced(), 1u);
  agents_[victim] = StartAgent(victim);
  for (int i = 0; i < 100 && fenced() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(fenced(), 0u) << "the returning node's devices stayed fenced";
  std::vector<std::string> types;
  json events = Api().Get("/api/v1/events?after=0").value_or(json::array());
  for (const json& e : events) {
    if (e["subject"] == absl::StrCat("job/", id)) types.push_back(e["type"]);
  }
  EXPECT_THAT(types, ::testing::IsSupersetOf({"job.lost", "job.retrying", "job.succeeded"}));
}

// A drain cordons the node and moves its jobs by their recovery policy.
TEST_F(PlatformTest, DrainMovesJobsByPolicyAndCordons) {
  json job =
      Submit({{"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}},
              {"command", {"sh", "-c", "echo attempt $CARVE_ATTEMPT on $CARVE_NODE; sleep 2"}}});
  int64_t id = job["id"];
  json running;
  for (int i = 0; i < 100; ++i) {
    running = *Api().Get(absl::StrCat("/api/v1/jobs/", id));
    if (running["state"] == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string first = running["replicas"][0]["node"];
  auto drained = Api().Post(absl::StrCat("/api/v1/nodes/", first, "/drain"), json::object());
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ((*drained)["jobs_moved"], json::array({id}));
  json done = WaitFinal(id, 30);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_NE(done["replicas"][0]["node"], first);
  EXPECT_THAT(done["attempts"][0]["cause"].get<std::string>(),
              HasSubstr(absl::StrCat("drain of node ", first, " by admin")));
  // Cordoned: new work goes elsewhere or waits.
  json later = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  json ended = WaitFinal(later["id"]);
  EXPECT_NE(ended["replicas"][0]["node"], first);
}

// A retried attempt's output is kept even when it is shorter than the earlier attempt's: the
// agent of the new attempt ships from offset 0 of its own file, into the same job log (it was
// written past the earlier attempt's bytes, so a short second attempt's output was dropped).
TEST_F(PlatformTest, ARetriedAttemptsShortOutputIsKeptAfterTheFirstAttemptsLongOne) {
  json job = Submit({{"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}},
                     {"command",
                      {"sh", "-c",
                       "if [ \"$CARVE_ATTEMPT\" = 0 ]; then head -c 4000 /dev/zero | tr '\\0' x; "
                       "echo; echo first-attempt-done; sleep 600; else echo second-attempt; fi"}}});
  int64_t id = job["id"];
  ASSERT_TRUE(Eventually([&] { return Logs(id).find("first-attempt-done") != std::string::npos; }))
      << Logs(id);
  std::string first = (*Api().Get(absl::StrCat("/api/v1/jobs/", id)))["replicas"][0]["node"];
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/nodes/", first, "/drain"), json::object()).ok());
  json done = WaitFinal(id, 30);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["attempt"], 1);
  // The end is reported after the output is shipped, so the log is complete once it is final.
  std::string log = Logs(id);
  EXPECT_THAT(log, HasSubstr("first-attempt-done"));
  EXPECT_THAT(log, HasSubstr("second-attempt")) << log.size() << " bytes";
}

// Cordoning single GPUs keeps new work off them and nowhere else.
TEST_F(PlatformTest, CordonOneGpuKeepsWorkOffItOnly) {
  for (int gpu : {0, 1}) {
    ASSERT_TRUE(
        Api().Post(absl::StrCat("/api/v1/nodes/gpu-a/cordon?gpu=", gpu), json::object()).ok());
  }
  json job = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["replicas"][0]["node"], "gpu-b");  // gpu-a's H200s are cordoned
  json shared =
      Submit({{"command", {"true"}}, {"resources", {{"mode", "shared"}, {"gpu_compute", "10%"}}}});
  EXPECT_EQ(WaitFinal(shared["id"])["replicas"][0]["node"], "gpu-a");  // the rest of gpu-a works
}

// A fault on one shared GPU touches exactly the jobs on it.
TEST_F(PlatformTest, DeviceFaultTouchesOnlyTheJobsOnThatDevice) {
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/apply", json::array({{{"kind", "node"},
                                               {"name", "gpu-a"},
                                               {"gpus", {{{"index", 3}, {"mode", "exclusive"}}}}}}))
          .ok());
  std::vector<int64_t> shared;
  for (int i = 0; i < 3; ++i) {
    json j = Submit({{"command", {"sleep", "30"}},
                     {"resources", {{"mode", "shared"}, {"gpu_compute", "30%"}}}});
    shared.push_back(j["id"]);
  }
  json other =
      Submit({{"command", {"sleep", "30"}}, {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  for (int i = 0; i < 100; ++i) {
    bool all = true;
    for (int64_t id : shared) {
      all &= (*Api().Get(absl::StrCat("/api/v1/jobs/", id)))["state"] == "running";
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  json first = *Api().Get(absl::StrCat("/api/v1/jobs/", shared[0]));
  ASSERT_EQ(first["replicas"][0]["grants"][0]["device"], 2);
  std::filesystem::path health = dir_ / "jobs/gpu-a/simgpu/GPU-sim-gpu-a-2/health";
  std::filesystem::create_directories(health.parent_path());
  std::ofstream(health) << "unhealthy XID 79 (fell off the bus)\n";
  json fault;
  for (int i = 0; i < 100 && fault.is_null(); ++i) {
    json events = Api().Get("/api/v1/events?after=0").value_or(json::array());
    for (const json& e : events) {
      if (e["type"] == "device.unhealthy") fault = e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(fault.is_null());
  EXPECT_EQ(fault["subject"], "node/gpu-a/gpu/2");
  std::vector<int64_t> touched = fault["details"]["jobs"].get<std::vector<int64_t>>();
  std::sort(touched.begin(), touched.end());
  EXPECT_EQ(touched, shared);
  EXPECT_THAT(fault["reason"].get<std::string>(), HasSubstr("XID 79"));
  auto one = Api().Get(absl::StrCat("/api/v1/events/", fault["seq"].get<int64_t>()));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)["details"]["jobs"], fault["details"]["jobs"]);
  for (int64_t id : shared) {
    json j;
    for (int i = 0; i < 100; ++i) {
      j = *Api().Get(absl::StrCat("/api/v1/jobs/", id));
      if (j["attempt"] == 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(j["attempt"], 1) << j.dump(2);
    EXPECT_THAT(j["attempts"][0]["cause"].get<std::string>(), HasSubstr("GPU 2 of gpu-a"));
  }
  json untouched = *Api().Get(absl::StrCat("/api/v1/jobs/", other["id"].get<int64_t>()));
  EXPECT_EQ(untouched["state"], "running");
  EXPECT_EQ(untouched["attempt"], 0);
}

// An interactive job's lease: renewed it keeps running; unrenewed it is stopped.
TEST_F(PlatformTest, UnrenewedLeaseStopsTheJob) {
  json kept = Submit({{"kind", "interactive"}, {"lease", "2s"}, {"command", {"sleep", "30"}}});
  json dropped = Submit({{"kind", "interactive"}, {"lease", "1s"}, {"command", {"sleep", "30"}}});
  int64_t kept_id = kept["id"];
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    (void)Api().Post(absl::StrCat("/api/v1/jobs/", kept_id, "/renew"), json::object());
  }
  json done = WaitFinal(dropped["id"]);
  EXPECT_EQ(done["state"], "cancelled");
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("1s lease expired unrenewed"));
  EXPECT_EQ((*Api().Get(absl::StrCat("/api/v1/jobs/", kept_id)))["state"], "running");
  auto no_lease = Api().Post(absl::StrCat("/api/v1/jobs/", done["id"].get<int64_t>(), "/renew"),
                             json::object());
  EXPECT_FALSE(no_lease.ok());
}

TEST_F(PlatformTest, MaxRuntimeEndsTimedOut) {
  json job = Submit({{"command", {"sh", "-c", "echo started; sleep 60"}}, {"max_runtime", "1s"}});
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "timed-out") << done.dump(2);
  EXPECT_THAT(done["reason"].get<std::string>(), HasSubstr("max_runtime 1s"));
  EXPECT_THAT(Logs(job["id"]), HasSubstr("started"));
}

TEST_F(PlatformTest, CancelKillsTheWholeProcessGroup) {
  std::string pidfile = (Shared() / "grandchild.pid").string();
  json job = Submit(
      {{"command", {"sh", "-c", absl::StrCat("sleep 300 & echo $! > ", pidfile, "; sleep 300")}},
       {"resources", {{"gpus", 1}}}});
  for (int i = 0; i < 200 && !std::filesystem::exists(pidfile); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  pid_t grandchild = std::stoi(Slurp(pidfile));
  ASSERT_FALSE(Dead(grandchild));
  ASSERT_TRUE(
      Api()
          .Post(absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>(), "/cancel"), json::object())
          .ok());
  json done = WaitFinal(job["id"]);
  EXPECT_EQ(done["state"], "cancelled");
  EXPECT_TRUE(Dead(grandchild)) << "the backgrounded child survived the cancel";
}

TEST_F(PlatformTest, BadRequestsGetClearErrorsAndChangeNothing) {
  size_t before = Api().Get("/api/v1/jobs?all=true")->size();
  ApiClient api = Api();
  auto expect_error = [&](absl::StatusOr<json> r, absl::StatusCode code, const std::string& text) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(text));
  };
  expect_error(api.Post("/api/v1/jobs", json{{"command", {"true"}}, {"colour", 1}}),
               absl::StatusCode::kInvalidArgument, "colour: unknown field");
  expect_error(
      api.Post("/api/v1/jobs", json{{"command", {"true"}}, {"resources", {{"cpu", "-2"}}}}),
      absl::StatusCode::kInvalidArgument, "resources.cpu");
  expect_error(api.Post("/api/v1/jobs",
                        json{{"command", {"true"}}, {"resources", {{"memory", "1000000Ti"}}}}),
               absl::StatusCode::kInvalidArgument, "more than any node has");
  expect_error(api.Post("/api/v1/jobs",
                        json{{"command", {"true"}}, {"resources", {{"gpu_model", {"Z9000"}}}}}),
               absl::StatusCode::kInvalidArgument, "unknown GPU model \"Z9000\"");
  expect_error(api.Post("/api/v1/jobs",
                        json{{"command", {"true"}},
                             {"resources", {{"mode", "partition"}, {"profile", "5g.99gb"}}}}),
               absl::StatusCode::kInvalidArgument, "5g.99gb");
  expect_error(api.PostText("/api/v1/jobs", "{not json"), absl::StatusCode::kInvalidArgument,
               "not valid JSON");
  expect_error(ApiClient(url_, "").Get("/api/v1/jobs"), absl::StatusCode::kUnauthenticated,
               "no token");
  expect_error(ApiClient(url_, "wrong").Post("/api/v1/jobs", json{{"command", {"true"}}}),
               absl::StatusCode::kUnauthenticated, "not valid");
  expect_error(ApiClient(url_, Slurp((dir_ / "data/agent.token").string()))
                   .Post("/api/v1/jobs", json{{"command", {"true"}}}),
               absl::StatusCode::kPermissionDenied, "role");
  expect_error(api.Get("/api/v1/jobs/999999"), absl::StatusCode::kNotFound, "no job 999999");
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), before);
  auto openapi = ApiClient(url_, "").Get("/api/v1/openapi.json");
  ASSERT_TRUE(openapi.ok());
  EXPECT_EQ((*openapi)["openapi"], "3.0.3");
}

// SIGKILL the server in the middle of 1,000 concurrent submissions from 4 clients; after a
// restart every acknowledged job is there exactly once and the event chain verifies.
TEST_F(PlatformTest, ServerKilledDuringSubmissionsLosesNothingAcknowledged) {
  std::mutex mu;
  std::map<std::string, int64_t> acked;  // idempotency key -> job id
  std::atomic<int> sent{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      ApiClient api(url_, token_);
      for (int i = 0; i < 250; ++i) {
        std::string key = absl::StrCat("c", c, "-", i);
        ++sent;
        auto job =
            api.Post("/api/v1/jobs",
                     json{{"name", key}, {"command", {"true"}}, {"resources", {{"gpus", 0}}}},
                     {{"Idempotency-Key", key}});
        if (!job.ok()) break;  // the server is gone
        std::lock_guard<std::mutex> lock(mu);
        acked[key] = (*job)["id"];
      }
    });
  }
  while (sent < 400) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Kill(server_, SIGKILL);
  for (std::thread& t : clients) t.join();
  ASSERT_GT(acked.size(), 100u);
  {
    auto store = OpenSqliteStore((dir_ / "data/carve.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE((*store)->VerifyEventChain().ok());
  }
  StartServer();
  auto jobs = Api().Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::map<std::string, int> by_name;
  std::set<int64_t> ids;
  for (const json& j : *jobs) {
    ++by_name[j["name"].get<std::string>()];
    ids.insert(j["id"].get<int64_t>());
  }
  for (const auto& [key, id] : acked) {
    EXPECT_EQ(by_name[key], 1) << key;
    EXPECT_TRUE(ids.count(id)) << key;
  }
  // A retry of an acknowledged submission returns the same job.
  json again = Submit({{"name", "c0-0"}, {"command", {"true"}}}, "c0-0");
  EXPECT_EQ(again["id"], acked["c0-0"]);
  EXPECT_TRUE(Api().Get("/api/v1/events?after=0&limit=1")->size() == 1);
}

}  // namespace
}  // namespace carve
