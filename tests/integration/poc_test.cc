// The acceptance kit (`carve poc`, issue 13) run as a buyer would run it, against a real server
// and agent: the software suite passes on a shared GPU that enforces its shares, its records and
// report are written and re-check against the server, a tampered record does not; and on a
// cluster broken on purpose (a shared GPU without MPS) exactly the isolation tests fail, saying
// why.
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "integration/cli.h"
#include "integration/harness.h"
#include "integration/sanitized.h"
#include "integration/webhook_receiver.h"

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kPocNodes = {{"poc-0", "gpus:\n  - {model: L40S, count: 1, mode: shared}\n"}};

class PocTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kPocNodes; }

  // `carve ARGS` as the admin, against the test's server.
  CliRun Cli(const std::string& args) {
    return RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                                 " ", args, " 2>&1"));
  }

  // The kit's software suite into DIR. The tolerance is low: on a loaded 2-core machine the
  // probes' CPU loops compete with everything else (the rate check itself is judged on a real
  // cluster at the default 0.5).
  CliRun Kit(const std::filesystem::path& out) {
    return Cli(absl::StrCat("poc run --suite software --seconds 2 --tolerance 0.1 --out ",
                            out.string(), " --job-memory-mib ", kSanitized ? 1536 : 512));
  }

  std::map<std::string, json> Records(const std::filesystem::path& out) {
    std::map<std::string, json> records;
    for (absl::string_view line :
         absl::StrSplit(Slurp((out / "records.jsonl").string()), '\n', absl::SkipEmpty())) {
      json j = json::parse(line);
      records[j["id"]] = j;
    }
    return records;
  }
};

TEST_F(PocTest, TheSoftwareSuitePassesAndItsReportReChecksAgainstTheServer) {
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Kit(out);
  ASSERT_EQ(run.exit, 0) << run.out << ServerLog();
  EXPECT_THAT(run.out, HasSubstr("5 passed, 0 failed")) << run.out;

  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 5u) << run.out;
  int64_t last_end = 0;
  for (const char* id :
       {"software.resource-request", "software.contention", "software.quota-priority",
        "software.abnormal-job", "software.reclamation"}) {
    ASSERT_TRUE(records.count(id)) << id;
    const json& r = records[id];
    EXPECT_EQ(r["verdict"], "pass") << r.dump(2);
    EXPECT_EQ(r["owner"], "admin");
    EXPECT_FALSE(r["input"].empty()) << id;
    EXPECT_EQ(r["input"].size(), r["jobs"].size()) << id;
    EXPECT_TRUE(r["nodes"].contains("poc-0")) << r["nodes"].dump();
    EXPECT_FALSE(r["nodes"]["poc-0"]["carve"].get<std::string>().empty()) << id;
    EXPECT_FALSE(r["pass_condition"].get<std::string>().empty()) << id;
    EXPECT_FALSE(r["checks"].empty()) << id;
    // The chain covers the test: its jobs' events lie between the recorded heads.
    EXPECT_GE(r["chain_start"]["seq"], last_end) << id;
    EXPECT_GT(r["chain_end"]["seq"], r["chain_start"]["seq"]) << id;
    last_end = r["chain_end"]["seq"];
    for (const json& e : EventsOf("job.submitted")) {
      if (std::find(r["jobs"].begin(), r["jobs"].end(),
                    std::stoll(e["subject"].get<std::string>().substr(4))) == r["jobs"].end()) {
        continue;
      }
      EXPECT_GT(e["seq"], r["chain_start"]["seq"]) << id;
      EXPECT_LE(e["seq"], r["chain_end"]["seq"]) << id;
    }
  }
  // The kit cleaned up: no job of it is left running.
  for (const json& j : ApiGet("/api/v1/jobs")) EXPECT_TRUE(JobEnded(j)) << j.dump(2);

  const std::string csv = Slurp((out / "records.csv").string());
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 6) << csv;
  const std::string html = Slurp((out / "report.html").string());
  EXPECT_THAT(html, HasSubstr("<table id=\"acceptance\">"));
  EXPECT_THAT(html, HasSubstr("Chart.js v3"));             // inlined, nothing fetched
  EXPECT_THAT(html, HasSubstr("<table id=\"profile\">"));  // the workload profile
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  size_t charts = 0;
  for (size_t at = html.find("<canvas class=\"chart\""); at != std::string::npos;
       at = html.find("<canvas class=\"chart\"", at + 1)) {
    ++charts;
  }
  EXPECT_EQ(charts, 4u);  // contention (2), abnormal job, reclamation
  EXPECT_THAT(html, HasSubstr("simulated GPUs: device isolation and device memory were not "
                              "measured on hardware"));

  CliRun verify = Cli(absl::StrCat("poc verify ", out.string()));
  EXPECT_EQ(verify.exit, 0) << verify.out;
  EXPECT_THAT(verify.out, HasSubstr("claims hold"));

  // A record whose verdict does not follow from its checks, or a suite with a test missing, no
  // longer checks out.
  const std::string original = Slurp((out / "records.jsonl").string());
  std::string flipped = original;
  flipped.replace(flipped.find("\"ok\":true"), 9, "\"ok\":false");
  std::ofstream((out / "records.jsonl").string(), std::ios::trunc) << flipped;
  CliRun edited = Cli(absl::StrCat("poc verify ", out.string()));
  EXPECT_EQ(edited.exit, 1) << edited.out;
  EXPECT_THAT(edited.out, HasSubstr("FAIL  software.resource-request: the verdict follows from"));
  std::ofstream((out / "records.jsonl").string(), std::ios::trunc)
      << original.substr(0, original.rfind('\n', original.size() - 2) + 1);
  CliRun missing = Cli(absl::StrCat("poc verify ", out.string()));
  EXPECT_EQ(missing.exit, 1) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("missing software.reclamation"));
  std::ofstream((out / "records.jsonl").string(), std::ios::trunc) << original;

  // A record whose chain head was edited no longer checks out.
  std::string jsonl = Slurp((out / "records.jsonl").string());
  const std::string hash = records["software.contention"]["chain_end"]["hash"];
  jsonl.replace(jsonl.find(hash), hash.size(), std::string(hash.size(), '0'));
  std::ofstream((out / "records.jsonl").string(), std::ios::trunc) << jsonl;
  CliRun tampered = Cli(absl::StrCat("poc verify ", out.string()));
  EXPECT_EQ(tampered.exit, 1) << tampered.out;
  EXPECT_THAT(tampered.out, HasSubstr("FAIL  software.contention: chain at end"));
}

// The "it must be able to fail": a shared GPU whose agent runs no MPS daemon.
class PocWithoutEnforcementTest : public PocTest {
 protected:
  void SetUp() override {
    agent_args_ = {"--mps-control", "none"};
    PocTest::SetUp();
  }
};

TEST_F(PocWithoutEnforcementTest, ExactlyTheIsolationTestsFailAndSayWhy) {
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Kit(out);
  EXPECT_EQ(run.exit, 1) << run.out;
  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 5u) << run.out << ServerLog();
  EXPECT_EQ(records["software.resource-request"]["verdict"], "fail");
  EXPECT_THAT(records["software.resource-request"]["verdict_reason"].get<std::string>(),
              HasSubstr("share enforced"));
  EXPECT_EQ(records["software.abnormal-job"]["verdict"], "fail");
  EXPECT_THAT(records["software.abnormal-job"]["verdict_reason"].get<std::string>(),
              HasSubstr("the memory hog never holds more than its cap"));
  // What does not depend on the share's caps still passes.
  EXPECT_EQ(records["software.contention"]["verdict"], "pass")
      << records["software.contention"].dump(2);
  EXPECT_EQ(records["software.reclamation"]["verdict"], "pass")
      << records["software.reclamation"].dump(2);
  EXPECT_EQ(records["software.quota-priority"]["verdict"], "pass")
      << records["software.quota-priority"].dump(2);
}

// Broken on purpose: an agent that reports every reclaim verified without running its checks.
// The server does not take its word (runtime/reclaim_evidence.h): the record says unverified and
// what was missing, the GPU is fenced, and the kit's reclamation test fails saying so.
// Two GPUs: the first unverified reclaim fences a GPU, and the kit's five replicas (25% each)
// must all have been placed by then.
const NodeList kTwoSharedNodes = {{"poc-0", "gpus:\n  - {model: L40S, count: 2, mode: shared}\n"}};

// An agent started with `--break WHAT` (hidden; for these tests only).
class PocBrokenAgentTest : public PocTest {
 protected:
  virtual const char* Broken() const = 0;
  void SetUp() override {
    agent_args_ = {"--break", Broken()};
    PocTest::SetUp();
  }
};

class PocUncheckedReclaimTest : public PocBrokenAgentTest {
 protected:
  const NodeList& Nodes() const override { return kTwoSharedNodes; }
  const char* Broken() const override { return "reclaim-checks"; }
};

TEST_F(PocUncheckedReclaimTest, TheReclamationTestFailsNamingTheChecksNeverMade) {
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Cli(absl::StrCat("poc run --suite software --only software.reclamation --out ",
                                out.string(), " --job-memory-mib ", kSanitized ? 1536 : 512));
  EXPECT_EQ(run.exit, 1) << run.out;
  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 5u) << run.out << ServerLog();
  const json& r = records["software.reclamation"];
  EXPECT_EQ(r["verdict"], "fail") << r.dump(2);
  EXPECT_THAT(r["verdict_reason"].get<std::string>(),
              HasSubstr("reclaim: expected verified, observed unverified (the node reported its "
                        "reclaim verified without passed checks for: processes-gone; "
                        "device-processes on GPU "))
      << r.dump(2);
  // The GPU is fenced, by the scheduler's conclusion, not the agent's word.
  json fenced = EventsOf("device.quarantined");
  ASSERT_FALSE(fenced.empty()) << ServerLog();
  EXPECT_EQ(fenced[0]["actor"], "scheduler") << fenced.dump(2);
  EXPECT_THAT(fenced[0]["reason"].get<std::string>(), HasSubstr("reclaim-evidence"));
}

// Broken on purpose: a node that registers without its versions. Every test that ran a job
// fails, saying which versions its record lacks (a record must say under which versions it holds).
class PocNoVersionsTest : public PocBrokenAgentTest {
 protected:
  const char* Broken() const override { return "versions"; }
};

TEST_F(PocNoVersionsTest, ATestThatRanAJobFailsNamingTheVersionsNotRecorded) {
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Cli(absl::StrCat("poc run --suite software --only software.resource-request --out ",
                                out.string(), " --job-memory-mib ", kSanitized ? 1536 : 512));
  EXPECT_EQ(run.exit, 1) << run.out;
  std::map<std::string, json> records = Records(out);
  const json& r = records["software.resource-request"];
  EXPECT_EQ(r["verdict"], "fail") << r.dump(2);
  EXPECT_EQ(r["verdict_reason"],
            "poc-0: versions recorded: expected driver, cuda_driver, kernel and carve, observed "
            "missing driver, cuda_driver, kernel, carve")
      << r.dump(2);
  EXPECT_EQ(records["software.contention"]["verdict"], "not-run");
}

}  // namespace

// The recovery suite: a training job moved by a drain resumes from its checkpoint, a service
// keeps two replicas through a drain, an experiment preempted by an urgent job runs again.
// Two H200s on each of two nodes (a drained node's replicas have room on the other) and two
// T4s that only one node has (the urgent job must preempt).
const NodeList kRecoveryNodes = {{"poc-a", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"},
                                 {"poc-b",
                                  "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"
                                  "  - {model: T4, count: 2, mode: exclusive}\n"}};

class PocRecoveryTest : public PocTest {
 protected:
  const NodeList& Nodes() const override { return kRecoveryNodes; }
  // Cut off, an agent stops its replicas after 3 s; their jobs are lost 7 s after the last word.
  std::vector<std::string> AgentFlags(int /*i*/) const override {
    return {"--fence-after-ms", "3000"};
  }

  // A webhook for the default tenant's job events (the kit's jobs are the admin's, of tenant
  // default), taking events once the notifier has started on it.
  void Notify(const Receiver& receiver) {
    auto applied = Api().Post("/api/v1/apply", json::array({{{"kind", "notification"},
                                                             {"name", "ops-hook"},
                                                             {"tenant", "default"},
                                                             {"url", receiver.url()},
                                                             {"secret", "ops-webhook-0123456789"},
                                                             {"events", {"job."}}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
    ASSERT_TRUE(Eventually([&] {
      json status = ApiGet("/api/v1/notifications/status");
      return status.size() == 1 && status[0].value("active", false);
    })) << ApiGet("/api/v1/notifications/status").dump(2);
  }
};

// ... and training comes back after its node is cut off (scripts/poc-dev-faults node-down), the
// old attempt stopped by its own agent before the loss.
TEST_F(PocRecoveryTest, EveryKindOfWorkComesBackAsItsPolicySays) {
  Receiver receiver;
  Notify(receiver);
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Cli(absl::StrCat("poc run --suite recovery --out ", out.string(),
                                " --job-memory-mib ", kSanitized ? 1536 : 512,
                                " --fault-command 'CARVE_DEV_JOBS=", (dir_ / "jobs").string(), " ",
                                CARVE_SOURCE_DIR, "/scripts/poc-dev-faults'"));
  EXPECT_EQ(run.exit, 0) << run.out << ServerLog();
  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 4u) << run.out;
  for (const auto& [id, r] : records) EXPECT_EQ(r["verdict"], "pass") << r.dump(2);
  const json& loss = records["recovery.node-loss"];
  EXPECT_GT(loss["observed"].value("fenced_event", 0), loss["observed"].value("lost_event", 0))
      << loss.dump(2);
  // The drained nodes were given back.
  for (const json& n : ApiGet("/api/v1/nodes")) EXPECT_EQ(n["cordoned_by"], "") << n.dump(2);
  for (const json& j : ApiGet("/api/v1/jobs")) EXPECT_TRUE(JobEnded(j)) << j.dump(2);
  // Notifications fired on every recovery: each test checked its job's recovery events against
  // the delivery records, and the receiver holds each of them.
  const std::map<std::string, std::string> moved_by = {
      {"recovery.training-checkpoint", "job.retrying"},
      {"recovery.service-drain", "job.replica-retired"},
      {"recovery.experiment-requeue", "job.preempted"},
      {"recovery.node-loss", "job.lost"}};
  for (const auto& [id, type] : moved_by) {
    const json& notified = records[id]["observed"]["notifications"];
    ASSERT_TRUE(notified.is_array()) << records[id].dump(2);
    bool found = false;
    for (const json& n : notified) {
      EXPECT_EQ(n["state"], "delivered") << n.dump();
      const std::string seq = std::to_string(n["event"].get<int64_t>());
      bool got = false;
      for (const Delivery& d : receiver.got()) got = got || d.event == seq;
      EXPECT_TRUE(got) << "the receiver never got " << n.dump();
      found = found || n["type"] == type;
    }
    EXPECT_TRUE(found) << id << " checked no " << type << ": " << notified.dump();
  }
}

// A webhook that never takes an event (it answers 500): the recovery test fails, naming the
// notification, the event and where the delivery stands.
TEST_F(PocRecoveryTest, ARecoveryWhoseNotificationIsNeverDeliveredFails) {
  Receiver receiver;
  receiver.Fail(1'000'000);
  Notify(receiver);
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Cli(absl::StrCat("poc run --suite recovery --only recovery.experiment-requeue",
                                " --timeout 20 --out ", out.string(), " --job-memory-mib ",
                                kSanitized ? 1536 : 512));
  EXPECT_EQ(run.exit, 1) << run.out;
  std::map<std::string, json> records = Records(out);
  const json& r = records["recovery.experiment-requeue"];
  EXPECT_EQ(r["verdict"], "fail") << r.dump(2);
  EXPECT_THAT(r["verdict_reason"].get<std::string>(), HasSubstr("notification ops-hook got job."))
      << r.dump(2);
  bool named = false;
  for (const json& c : r["checks"]) {
    if (c["name"].get<std::string>().find("ops-hook") == std::string::npos) continue;
    EXPECT_FALSE(c["ok"]) << c.dump();
    named = named || c["observed"].get<std::string>().find("HTTP 500") != std::string::npos;
  }
  EXPECT_TRUE(named) << r["checks"].dump(2);
}

// The partition suite on GPUs that make MIG instances on demand: the unit lifecycle (created,
// listed by the agent, seen by the job, deleted, and all of it again), faults injected by
// scripts/poc-dev-faults (an instance's XID, a GPU restart, the node cut off) each touching
// exactly the jobs there, the driver upgraded inside a maintenance window with the records of
// the jobs before and after traceable, and MIG instances governed across tenants by a queue's
// quota.
const NodeList kPartitionNodes = {
    {"poc-mig", "gpus:\n  - {model: A100-80GB, count: 2, mode: partition, layout: dynamic}\n"}};

class PocPartitionTest : public PocTest {
 protected:
  const NodeList& Nodes() const override { return kPartitionNodes; }
};

TEST_F(PocPartitionTest, InstancesAreMadeAndDeletedAndGovernedAcrossTenants) {
  const std::filesystem::path out = dir_ / "poc";
  CliRun run = Cli(absl::StrCat("poc run --suite partition --out ", out.string(),
                                " --job-memory-mib ", kSanitized ? 1536 : 512,
                                " --fault-command 'CARVE_DEV_JOBS=", (dir_ / "jobs").string(), " ",
                                CARVE_SOURCE_DIR, "/scripts/poc-dev-faults'"));
  EXPECT_EQ(run.exit, 0) << run.out << ServerLog();
  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 4u) << run.out;
  const json& life = records["partition.unit-lifecycle"];
  EXPECT_EQ(life["verdict"], "pass") << life.dump(2);
  ASSERT_EQ(life["observed"]["rounds"].size(), 2u) << life.dump(2);
  for (const json& round : life["observed"]["rounds"]) {
    EXPECT_THAT(round["uuid"].get<std::string>(), HasSubstr("MIG-")) << round.dump();
    EXPECT_EQ(round["seen"], round["uuid"]);
  }
  // Across pools: a MIG quota of one instance for tenant a's queue, and tenant b kept out.
  const json& pools = records["partition.across-pools"];
  EXPECT_EQ(pools["verdict"], "pass") << pools.dump(2);
  EXPECT_EQ(pools["observed"]["users"].size(), 2u) << pools.dump(2);
  // Each fault's recorded blast radius is the jobs that were on the instance, GPU or node.
  const json& faults = records["partition.device-faults"];
  EXPECT_EQ(faults["verdict"], "pass") << faults.dump(2);
  ASSERT_EQ(faults["observed"]["faults"].size(), 3u) << faults.dump(2);
  for (const json& f : faults["observed"]["faults"]) {
    EXPECT_EQ(f["radius"], f["on_it"]) << f.dump();
    EXPECT_FALSE(f["radius"].empty()) << f.dump();
  }
  EXPECT_EQ(faults["observed"]["faults"][2]["radius"].size(), 2u) << faults.dump(2);
  // The driver upgraded inside a maintenance window: the job before keeps the old set, the job
  // after runs under the new one, and the node is left as it was found.
  const json& upgrade = records["partition.upgrade"];
  ASSERT_EQ(upgrade["verdict"], "pass") << upgrade.dump(2);
  EXPECT_NE(upgrade["observed"]["versions"]["before"], upgrade["observed"]["versions"]["after"]);
  EXPECT_EQ(Node("poc-mig")["versions"]["driver"], "simulated") << Node("poc-mig").dump(2);
  // Nothing is left on the GPU.
  EXPECT_EQ(Node("poc-mig")["gpus"][0]["mig_live"], json::array()) << Node("poc-mig").dump(2);
}

// The whole kit as a new user runs it: against `carve dev` itself (8 H200, 4 A100-80GB making MIG
// instances on demand, 4 shared L40S, 2 T4), every built test passes and the report verifies.
TEST(PocDevTest, TheWholeKitPassesAgainstCarveDev) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("carve-poc-dev-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string data = (dir / "carve-data").string();
  const std::string log = (dir / "dev.log").string();
  pid_t dev = Spawn({CARVE_BINARY, "dev", "--data", data, "--listen", "127.0.0.1:0"}, log);
  // Ready once it wrote its address and token and its four agents registered.
  std::string url;
  std::string token;
  bool ready = false;
  for (int i = 0; i < 1200 && !ready && !Dead(dev); ++i) {
    url = std::string(absl::StripAsciiWhitespace(Slurp(data + "/server")));
    token = std::string(absl::StripAsciiWhitespace(Slurp(data + "/admin.token")));
    if (!url.empty() && !token.empty()) {
      auto nodes = carve::ApiClient(url, token).Get("/api/v1/nodes");
      ready = nodes.ok() && nodes->size() == 4;
    }
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ready) << Slurp(log);
  const std::string env = absl::StrCat("CARVE_SERVER=", url, " CARVE_TOKEN=", token, " ");
  CliRun run = RunShell(absl::StrCat(
      env, CARVE_BINARY, " poc run --suite all --out ", (dir / "poc").string(),
      " --job-memory-mib ", kSanitized ? 1536 : 512,
      " --tolerance 0.1 --fault-command 'CARVE_DEV_JOBS=", (dir / "carve-jobs").string(), " ",
      CARVE_SOURCE_DIR, "/scripts/poc-dev-faults' 2>&1"));
  EXPECT_EQ(run.exit, 0) << run.out << Slurp(log);
  EXPECT_THAT(run.out, HasSubstr("13 passed, 0 failed, 0 inconclusive or not run")) << run.out;
  CliRun verify =
      RunShell(absl::StrCat(env, CARVE_BINARY, " poc verify ", (dir / "poc").string(), " 2>&1"));
  EXPECT_EQ(verify.exit, 0) << verify.out;

  // One workload under each delivery mode, side by side.
  std::ofstream((dir / "workload.yaml").string())
      << "jobs:\n  - {name: infer, count: 2, seconds: 1, gpu: 0.25}\n";
  CliRun compare = RunShell(absl::StrCat(env, CARVE_BINARY, " poc compare --workload ",
                                         (dir / "workload.yaml").string(), " --out ",
                                         (dir / "compare").string(), " 2>&1"));
  EXPECT_EQ(compare.exit, 0) << compare.out;
  json result = json::parse(Slurp((dir / "compare" / "compare.json").string()), nullptr, false);
  ASSERT_TRUE(result.is_object()) << compare.out;
  ASSERT_EQ(result["modes"].size(), 3u) << result.dump(2);
  for (const json& m : result["modes"]) {
    EXPECT_FALSE(m.contains("skipped")) << m.dump(2);
    EXPECT_EQ(m["failed"], 0) << m.dump(2);
    EXPECT_EQ(m["jobs"].size(), 2u) << m.dump(2);
    EXPECT_GT(m["makespan_s"].get<double>(), 0) << m.dump(2);
  }
  EXPECT_THAT(Slurp((dir / "compare" / "compare.html").string()),
              HasSubstr("<table id=\"compare\">"));
  Kill(dev, SIGTERM);
}

// Red team: the kit's uncordon after a drain lifted an operator's cordon. A node with one GPU
// cordoned by an operator is not drained: the test is inconclusive and the cordon stays.
const NodeList kCordonNodes = {{"poc-c", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class PocCordonTest : public PocTest {
 protected:
  const NodeList& Nodes() const override { return kCordonNodes; }
};

TEST_F(PocCordonTest, ANodeWithAnOperatorsCordonIsNotDrainedAndKeepsIt) {
  ApiPost("/api/v1/nodes/poc-c/cordon?gpu=1", json::object());
  const std::filesystem::path out = dir_ / "poc";
  CliRun run =
      Cli(absl::StrCat("poc run --suite recovery --only recovery.training-checkpoint", " --out ",
                       out.string(), " --job-memory-mib ", kSanitized ? 1536 : 512));
  std::map<std::string, json> records = Records(out);
  ASSERT_EQ(records.size(), 4u) << run.out;
  const json& r = records["recovery.training-checkpoint"];
  EXPECT_EQ(r["verdict"], "inconclusive") << r.dump(2);
  EXPECT_THAT(r["verdict_reason"].get<std::string>(), HasSubstr("operator's cordon"));
  EXPECT_EQ(records["recovery.service-drain"]["verdict_reason"], "not selected (--only)");
  EXPECT_EQ(Node("poc-c")["cordoned_gpus"], (json{{"1", "admin"}})) << Node("poc-c").dump(2);
  EXPECT_EQ(Node("poc-c")["cordoned_by"], "");
}
