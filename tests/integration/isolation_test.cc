// Node-side isolation against the real server and agent (issue 10 C1/C3, issue 11 "jobs never
// run as root"): jobs run as their tenant's Unix user, cannot read or change another tenant's
// files, processes or the server's and agent's private files, cannot loosen their cgroup, do not
// get the agent's environment, and a symlink a job plants never redirects the agent.
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

const NodeList kIsolationNodes = {
    {"iso-a", "gpus:\n  - {model: H200, count: 4, mode: exclusive}\n"}};

constexpr char kAgentSecret[] = "agent-secret-4711";

class IsolationTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kIsolationNodes; }

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "jobs run as their tenant's own user only under root";
    // A secret in the agent's own environment, which no job may see.
    setenv("CARVE_TEST_AGENT_SECRET", kAgentSecret, 1);
    PlatformTest::SetUp();
    unsetenv("CARVE_TEST_AGENT_SECRET");
    ASSERT_TRUE(Api()
                    .Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                                        {{"kind", "tenant"}, {"name", "globex"}}}))
                    .ok());
  }

  fs::path Jobs() const { return dir_ / "jobs/iso-a"; }
  fs::path AgentData() const { return dir_ / "agents/iso-a"; }
  fs::path Home(const std::string& tenant) const { return Jobs() / "work/tenants" / tenant; }
  fs::path Checkpoints(const std::string& tenant, int64_t job) const {
    return dir_ / "carve-jobs/checkpoints/tenants" / tenant / absl::StrCat("job-", job);
  }

  json Start(const std::string& tenant, const std::string& script, json extra = json::object()) {
    extra["tenant"] = tenant;
    extra["command"] = {"sh", "-c", script};
    return Submit(extra);
  }

  // Runs `script` as a job of `tenant`; its log once it ended.
  std::string Run(const std::string& tenant, const std::string& script,
                  json extra = json::object()) {
    json job = Start(tenant, script, std::move(extra));
    json done = WaitFinal(job["id"]);
    last_ = done;
    return Logs(job["id"]);
  }

  static uid_t Owner(const fs::path& p) {
    struct stat st {};
    return lstat(p.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
  }
  static mode_t Mode(const fs::path& p) {
    struct stat st {};
    return lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }

  json last_;
};

// One job per tenant: acme's tries every read, write and signal against globex's running job,
// the server's store, WAL and tokens, and the agent's data; each is denied and changes nothing.
TEST_F(IsolationTest, ATenantsJobCannotReachAnotherTenantOrTheServer) {
  const fs::path victim_pid = Shared() / "victim.pid";
  json victim =
      Start("globex",
            absl::StrCat("echo globex-log-secret; echo globex-work-secret > $HOME/secret; "
                         "echo globex-ckpt-secret > $CARVE_CHECKPOINT_DIR/ckpt; "
                         "echo $$ > ",
                         victim_pid.string(), "; exec sleep 300"),
            {{"env", {{"GLOBEX_SECRET", "globex-env-secret"}}}});
  const int64_t vid = victim["id"];
  ASSERT_TRUE(Eventually([&] { return fs::exists(victim_pid) && !Slurp(victim_pid).empty(); }))
      << Logs(vid);
  ASSERT_TRUE(Eventually([&] { return Logs(vid).find("globex-log-secret") != std::string::npos; }));
  const pid_t pid = std::stoi(Slurp(victim_pid));
  const fs::path log = AgentData() / absl::StrCat("logs/tenants/globex/job-", vid, "-0.log");
  const fs::path ckpt = Checkpoints("globex", vid);
  const std::string admin = Slurp((dir_ / "data/admin.token").string());
  const std::string agent = Slurp((dir_ / "data/agent.token").string());
  // Every target exists, so "denied" below is not "missing".
  for (const fs::path& p : {log, ckpt / "ckpt", Home("globex") / "secret", dir_ / "data/carve.db",
                            dir_ / "data/carve.db-wal", dir_ / "data/admin.token",
                            dir_ / "data/agent.token", AgentData() / "agent-state.json"}) {
    ASSERT_TRUE(fs::exists(p)) << p;
  }
  std::string attacks = absl::StrCat(
      "t() { n=$1; shift; if \"$@\" >/dev/null 2>&1; then echo ALLOWED $n; "
      "else echo DENIED $n; fi; }; ",
      "t read-log cat ", log.string(), "; ",                                  //
      "t read-checkpoint cat ", (ckpt / "ckpt").string(), "; ",               //
      "t read-work cat ", (Home("globex") / "secret").string(), "; ",         //
      "t read-store cat ", (dir_ / "data/carve.db").string(), "; ",           //
      "t read-wal cat ", (dir_ / "data/carve.db-wal").string(), "; ",         //
      "t read-admin-token cat ", (dir_ / "data/admin.token").string(), "; ",  //
      "t read-agent-token cat ", (dir_ / "data/agent.token").string(), "; ",  //
      "t read-agent-state cat ", (AgentData() / "agent-state.json").string(), "; ",
      "t list-server-data ls ", (dir_ / "data").string(), "; ",  //
      "t list-agent-data ls ", AgentData().string(), "; ",       //
      "t signal kill -TERM ", pid, "; ",                         //
      "t write-work touch ", (Home("globex") / "planted").string(), "; ",
      "t write-checkpoint touch ", (ckpt / "planted").string(), "; ",
      "t overwrite-checkpoint sh -c 'echo evil > ", (ckpt / "ckpt").string(), "'; ",
      "t write-sim-gpu-of-nobody touch ", (Jobs() / "simgpu").string(), "/planted; ",
      // The attack of issue 10 C1, word for word, then the same one level down.
      "D=$(cd $CARVE_SIM_GPU_DIR/../../.. && pwd); cat $D/admin.token $D/agent.token; ",
      "cat $D/data/admin.token $D/data/agent.token; echo attacks-done");
  std::string out = Run("acme", attacks);
  EXPECT_THAT(out, HasSubstr("attacks-done")) << last_.dump(2);
  EXPECT_THAT(out, HasSubstr("DENIED read-log"));
  EXPECT_THAT(out, Not(HasSubstr("ALLOWED"))) << out;
  for (const std::string& secret :
       {std::string("globex-log-secret"), std::string("globex-work"), std::string("globex-ckpt"),
        std::string("globex-env-secret"), admin, agent}) {
    EXPECT_THAT(out, Not(HasSubstr(secret))) << out;
  }
  // Nothing changed: the victim runs, its files are as it wrote them, nothing was planted.
  EXPECT_FALSE(Dead(pid));
  EXPECT_EQ(Job(vid)["state"], "running");
  EXPECT_EQ(Slurp((ckpt / "ckpt").string()), "globex-ckpt-secret\n");
  EXPECT_EQ(Slurp((Home("globex") / "secret").string()), "globex-work-secret\n");
  EXPECT_FALSE(fs::exists(Home("globex") / "planted"));
  EXPECT_FALSE(fs::exists(ckpt / "planted"));
  EXPECT_FALSE(fs::exists(Jobs() / "simgpu/planted"));
  // The two tenants run as different users, neither root, and their directories are theirs.
  const uid_t acme = Owner(Home("acme"));
  const uid_t globex = Owner(Home("globex"));
  EXPECT_NE(acme, 0u);
  EXPECT_NE(globex, 0u);
  EXPECT_NE(acme, globex);
  for (const fs::path& p : {Home("globex"), ckpt, ckpt.parent_path()}) {
    EXPECT_EQ(Mode(p), 0700u) << p;
    EXPECT_EQ(Owner(p), globex) << p;
  }
  for (const fs::path& p : {dir_ / "data", AgentData()}) EXPECT_EQ(Mode(p), 0700u) << p;
  for (const char* f : {"carve.db", "carve.db-wal", "admin.token", "agent.token"}) {
    EXPECT_EQ(Mode(dir_ / "data" / f), 0600u) << f;
  }
  json running = Job(vid);
  EXPECT_THAT(running["replicas"][0]["enforcement"].get<std::string>(),
              HasSubstr(absl::StrCat("uid ", globex, " gid ", globex,
                                     ", no supplementary groups, no_new_privs")));
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", vid, "/cancel"), json::object()).ok());
  WaitFinal(vid);
}

// The job's memory limit in AJobCannotLoosenItsCgroupLimits: its monitor must fit in it.
constexpr int64_t kLimitMiB = kSanitized ? 1024 : 64;

// A job writing its own memory limit and CPU quota, and moving itself out of its cgroup, is
// denied; the limits stay as Carve set them.
TEST_F(IsolationTest, AJobCannotLoosenItsCgroupLimits) {
  // The job finds its own groups by their cgroup.procs (/proc/self/cgroup is relative to the
  // container's cgroup namespace here), among those named for its job: a machine that ran the
  // suite many times holds hundreds of other groups, and a loop over all of them at half a CPU
  // on a loaded machine outlasted the test (stress run 7 of 12, 2026-12-03).
  std::string out =
      Run("acme",
          "mine() { for d in /sys/fs/cgroup/$1/carve/*-job-$CARVE_JOB_ID-r0/; do "
          "grep -qx $$ $d/cgroup.procs 2>/dev/null && echo ${d%/}; done; }; "
          "m=$(mine memory); c=$(mine cpu); "
          "[ -e \"$m/memory.limit_in_bytes\" ] && [ -e \"$c/cpu.cfs_quota_us\" ] || "
          "{ echo NOCGROUP; exit 0; }; "
          "echo $LOOSER > $m/memory.limit_in_bytes && echo ALLOWED memory; "
          "echo -1 > $c/cpu.cfs_quota_us && echo ALLOWED cpu; "
          "echo $$ > /sys/fs/cgroup/memory/cgroup.procs && echo ALLOWED leave; "
          "echo mem=$(cat $m/memory.limit_in_bytes) cpu=$(cat $c/cpu.cfs_quota_us); "
          "echo still-in=$(mine memory)",
          {{"resources", {{"cpu", "500m"}, {"memory", absl::StrCat(kLimitMiB, "Mi")}}},
           {"env", {{"LOOSER", absl::StrCat(4 * kLimitMiB << 20)}}}});
  if (out.find("NOCGROUP") != std::string::npos)
    GTEST_SKIP() << "no cgroup v1 cpu+memory here: " << out;
  EXPECT_THAT(out, Not(HasSubstr("ALLOWED"))) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("mem=", kLimitMiB << 20, " cpu=50000"))) << out;
  EXPECT_THAT(out, HasSubstr("still-in=/sys/fs/cgroup/memory/carve/")) << out;
}

// Links a job plants in its tenant's directories never make the agent create, chmod or chown
// anything through them: neither outside Carve nor in another tenant's directories.
TEST_F(IsolationTest, PlantedSymlinksDoNotRedirectTheAgent) {
  const fs::path outside = Shared() / "outside";
  fs::create_directories(outside);
  ASSERT_EQ(chmod(outside.c_str(), 0755), 0);
  json globex = Start("globex", "echo mine > $CARVE_CHECKPOINT_DIR/ckpt");
  WaitFinal(globex["id"]);
  const fs::path globex_ckpt = Checkpoints("globex", globex["id"]);
  const uid_t globex_uid = Owner(Home("globex"));
  ASSERT_EQ(Owner(globex_ckpt), globex_uid);

  // acme plants links to outside Carve and into globex's directories, including where its next
  // job's checkpoint directory will be.
  std::string plant = absl::StrCat(
      "ln -s ", outside.string(), " $HOME/default/escape; ln -s ", Home("globex").string(),
      " $HOME/default/into-globex; ln -s ", globex_ckpt.string(),
      " $CARVE_CHECKPOINT_DIR/../job-$((CARVE_JOB_ID + 1)); echo planted");
  ASSERT_THAT(Run("acme", plant), HasSubstr("planted")) << last_.dump(2);
  const int64_t planted_by = last_["id"];

  std::string next = Run("acme", "echo ran > $CARVE_CHECKPOINT_DIR/out", {{"workdir", "x"}});
  EXPECT_EQ(last_["id"], planted_by + 1);
  EXPECT_EQ(last_["state"], "failed") << last_.dump(2);
  EXPECT_THAT(next, HasSubstr("is a symlink")) << next;
  for (const char* workdir : {"escape/sub", "into-globex", "into-globex/sub"}) {
    std::string out = Run("acme", "echo ran > out", {{"workdir", workdir}});
    EXPECT_EQ(last_["state"], "failed") << workdir << last_.dump(2);
    EXPECT_THAT(out, HasSubstr("is a symlink")) << workdir << out;
  }
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_EQ(Mode(outside), 0755u);
  EXPECT_EQ(Owner(outside), 0u);
  EXPECT_EQ(Owner(Home("globex")), globex_uid);
  EXPECT_EQ(Owner(globex_ckpt), globex_uid);
  EXPECT_EQ(Mode(globex_ckpt), 0700u);
  EXPECT_FALSE(fs::exists(globex_ckpt / "out"));
  EXPECT_FALSE(fs::exists(Home("globex") / "sub"));
  EXPECT_FALSE(fs::exists(Home("globex") / "out"));
  EXPECT_EQ(Slurp((globex_ckpt / "ckpt").string()), "mine\n");
}

// A job's environment is a clean one plus its own and Carve's: the agent's variables stay out,
// and the job's LD_PRELOAD reaches its command but not the agent's `carve internal-run`.
TEST_F(IsolationTest, JobsGetACleanEnvironmentAndTheirPreloadOnlyReachesTheCommand) {
  std::string out = Run("acme", "env; echo uid=$(id -u)",
                        {{"env", {{"LD_PRELOAD", CARVE_PRELOAD_PROBE}, {"JOB_VAR", "mine"}}}});
  EXPECT_EQ(last_["state"], "succeeded") << last_.dump(2) << out;
  EXPECT_THAT(out, Not(HasSubstr(kAgentSecret)));
  EXPECT_THAT(out, Not(HasSubstr("CARVE_TEST_AGENT_SECRET")));
  EXPECT_THAT(out, HasSubstr("JOB_VAR=mine\n"));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("LD_PRELOAD=", CARVE_PRELOAD_PROBE, "\n")));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("HOME=", Home("acme").string(), "\n")));
  EXPECT_THAT(out, HasSubstr("PATH=/usr/local/bin:/usr/bin:/bin\n"));
  EXPECT_THAT(out, Not(HasSubstr(absl::StrCat("CARVE_SIM_GPU_DIR=", AgentData().string()))));
  EXPECT_THAT(out, HasSubstr(absl::StrCat("uid=", Owner(Home("acme")))));
  // The command (sh) loaded the probe; the monitor (carve) did not.
  EXPECT_THAT(out, HasSubstr("preload-probe loaded into"));
  EXPECT_THAT(out, Not(HasSubstr("preload-probe loaded into carve"))) << out;
}

// The command starts with every signal at its default (carve ignores SIGPIPE for itself), and
// its monitor (`carve internal-run`, same uid) is not dumpable: its /proc entries are root's, so
// the job cannot ptrace it to write through the status file it holds (a red-team finding).
TEST_F(IsolationTest, TheCommandCannotReachItsMonitorAndStartsWithDefaultSignals) {
  std::string out = Run("acme",
                        "echo sigpipe-ignored=$(( 0x$(grep SigIgn /proc/self/status | cut -f2) & "
                        "0x1000 )); echo monitor-owner=$(stat -c %u /proc/$PPID/environ)");
  EXPECT_EQ(last_["state"], "succeeded") << last_.dump(2) << out;
  EXPECT_THAT(out, HasSubstr("sigpipe-ignored=0\n")) << out;
  EXPECT_THAT(out, HasSubstr("monitor-owner=0\n")) << out;
}

// A tenant document's uid/gid is the user its jobs run as; root and non-integers are refused,
// changing nothing.
TEST_F(IsolationTest, ATenantDocumentNamesItsUnixUser) {
  for (const json& bad : {json(0), json(-5), json("1000"), json(4294967295LL)}) {
    auto r = Api().Post("/api/v1/apply",
                        json::array({{{"kind", "tenant"}, {"name", "initech"}, {"uid", bad}}}));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("uid")) << bad;
  }
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/apply",
                json::array(
                    {{{"kind", "tenant"}, {"name", "initech"}, {"uid", 43210}, {"gid", 43211}}}))
          .ok());
  std::string out = Run("initech", "echo ids=$(id -u):$(id -g)");
  EXPECT_THAT(out, HasSubstr("ids=43210:43211")) << out;
  EXPECT_EQ(Owner(Home("initech")), 43210u);
}

// An agent that is not root refuses to start unless told --single-user, and then says in every
// record that jobs are not isolated from each other.
TEST_F(IsolationTest, ANonRootAgentNeedsSingleUserAndSaysSo) {
  const fs::path data = Shared() / "nonroot-agent";
  const fs::path yaml = Shared() / "nonroot.yaml";
  std::ofstream(yaml) << "gpus:\n  - {model: T4, count: 1, mode: exclusive}\n";
  fs::copy_file(dir_ / "data/agent.token", Shared() / "agent.token");
  ASSERT_EQ(chmod((Shared() / "agent.token").c_str(), 0644), 0);
  std::vector<std::string> args = {"/usr/bin/setpriv", "--reuid=65534",
                                   "--regid=65534",    "--clear-groups",
                                   CARVE_BINARY,       "agent",
                                   "--server",         url_,
                                   "--token-file",     (Shared() / "agent.token").string(),
                                   "--node",           "nonroot",
                                   "--devices",        yaml.string(),
                                   "--data",           data.string(),
                                   "--jobs-dir",       (Shared() / "nonroot-jobs").string(),
                                   "--heartbeat-ms",   "100"};
  if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "no setpriv to run an agent as nobody";
  const std::string refused_log = (Shared() / "refused.log").string();
  pid_t refused = Spawn(args, refused_log);
  int status = 0;
  ASSERT_EQ(waitpid(refused, &status, 0), refused);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_THAT(Slurp(refused_log), HasSubstr("--single-user"));
  EXPECT_TRUE(Node("nonroot").is_null());

  args.push_back("--single-user");
  // The server's shared checkpoint root must be writable by that agent's user.
  const fs::path ckpt = dir_ / "carve-jobs/checkpoints/tenants/acme";
  fs::create_directories(ckpt);
  ASSERT_EQ(chown(ckpt.c_str(), 65534, 65534), 0);
  agents_.push_back(Spawn(args, (Shared() / "single.log").string()));
  ASSERT_TRUE(Eventually([&] { return !Node("nonroot").is_null(); }))
      << Slurp((Shared() / "single.log").string());
  std::string out =
      Run("acme", "echo uid=$(id -u)", {{"resources", {{"gpus", 1}, {"gpu_model", {"T4"}}}}});
  EXPECT_EQ(last_["replicas"][0]["node"], "nonroot") << last_.dump(2);
  EXPECT_THAT(out, HasSubstr("uid=65534"));
  EXPECT_THAT(last_["replicas"][0]["enforcement"].get<std::string>(),
              HasSubstr("single-user: jobs run as uid 65534, not isolated from each other"));
}

}  // namespace
}  // namespace carve::it

namespace carve::it {
namespace {

std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

const NodeList kNoIsolationNodes = {};

// Red team: a tenant's uid was allocated from --uid-range without asking whether the machine
// already has that account, so with a range holding `nobody` (65534) a tenant's jobs ran as
// nobody and could read whatever nobody owns. Such uids are skipped; a range with none left
// refuses the job with why, and nothing runs.
class TenantUidTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoIsolationNodes; }
};

TEST_F(TenantUidTest, AUidThatIsAnExistingAccountIsNeverATenants) {
  if (geteuid() != 0) GTEST_SKIP() << "jobs run as their tenant's own user only under root";
  struct passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no nobody account here";
  const std::string uid = std::to_string(nobody->pw_uid);
  std::ofstream((dir_ / "uid.yaml").string()) << "gpus:\n  - {model: H200, count: 1}\n";
  pid_t agent = Spawn({CARVE_BINARY, "agent", "--server", url_, "--token-file",
                       (dir_ / "data/agent.token").string(), "--node", "uid-a", "--devices",
                       (dir_ / "uid.yaml").string(), "--data", (dir_ / "agents/uid-a").string(),
                       "--jobs-dir", (dir_ / "jobs/uid-a").string(), "--heartbeat-ms", "100",
                       "--uid-range", absl::StrCat(uid, "-", uid)},
                      (dir_ / "uid-a.log").string());
  ASSERT_TRUE(Eventually([&] { return Api().Get("/api/v1/nodes")->size() == 1; }))
      << Slurp((dir_ / "uid-a.log").string());
  json job = Submit({{"command", {"sh", "-c", "echo uid=$(id -u)"}}});
  json done = WaitFinal(job["id"]);
  std::string log = Logs(job["id"]);
  EXPECT_THAT(log, Not(HasSubstr("uid=" + uid))) << log;
  EXPECT_THAT(log, HasSubstr("no free uid in --uid-range")) << log;
  EXPECT_NE(done["state"], "succeeded") << done.dump();
  Kill(agent, SIGTERM);
}

// Polls `done` every 50 ms for up to 20 s (the `carve dev` tests have no fixture's Eventually).
template <typename Pred>
bool WithinTwentySeconds(Pred done) {
  for (int i = 0; i < 400 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Issue 10's C1 exactly as reported: under `carve dev` (server and agents on one host), a job
// walks up from $CARVE_SIM_GPU_DIR and cats the tokens; `carve logs` must not show them.
TEST(IsolationDevTest, TheC1AttackUnderCarveDevShowsNoToken) {
  if (geteuid() != 0) GTEST_SKIP() << "carve dev isolates tenants only when run as root";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("carve-dev-c1-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const int port = 19070 + getpid() % 1000;
  const std::string in_dir = absl::StrCat("cd ", dir.string(), " && ", CARVE_BINARY, " ");
  pid_t dev =
      Spawn({"/bin/sh", "-c",  // exec: the pid killed at the end is carve dev's, not the shell's
             absl::StrCat("cd ", dir.string(), " && exec ", CARVE_BINARY,
                          " dev --listen 127.0.0.1:", port, " --schedule-interval-ms 50")},
            (dir / "dev.log").string());
  ASSERT_TRUE(WithinTwentySeconds([&] {
    return Slurp((dir / "dev.log").string()).find("Carve is running") != std::string::npos;
  })) << Slurp((dir / "dev.log").string());
  const std::string admin = Slurp((dir / "carve-data/admin.token").string());
  const std::string agent = Slurp((dir / "carve-data/agent.token").string());
  ApiClient api(absl::StrCat("http://127.0.0.1:", port), admin);
  std::string submitted = Shell(in_dir +
                                "submit -- sh -c 'D=$(cd $CARVE_SIM_GPU_DIR/../../.. && pwd); "
                                "cat $D/admin.token $D/agent.token; "
                                "cat $D/carve-data/admin.token $D/carve-data/agent.token'");
  EXPECT_THAT(submitted, HasSubstr("job 1"));
  ASSERT_TRUE(WithinTwentySeconds([&] {
    auto job = api.Get("/api/v1/jobs/1");
    return job.ok() && JobEnded(*job);
  }));
  std::string logs = Shell(in_dir + "logs 1");
  EXPECT_THAT(logs, HasSubstr("carve-data/admin.token: Permission denied")) << logs;
  EXPECT_THAT(logs, Not(HasSubstr(admin)));
  EXPECT_THAT(logs, Not(HasSubstr(agent)));
  kill(dev, SIGTERM);
  waitpid(dev, nullptr, 0);
  std::filesystem::remove_all(dir);
}

// Red team: `carve dev --data` under directories that do not exist yet. The server's umask 077
// must not make those parents owner-only, or no job (running as its tenant's user) can reach its
// work directory beside the data directory: every job failed "cannot change to workdir".
TEST(IsolationDevTest, AFreshDataPathsParentsStayTraversableSoJobsRun) {
  if (geteuid() != 0) GTEST_SKIP() << "carve dev isolates tenants only when run as root";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("carve-dev-fresh-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path data = dir / "new/sub/data";  // new/ and new/sub/ do not exist
  const int port = 20070 + getpid() % 1000;
  const std::string in_dir = absl::StrCat(
      "cd ", dir.string(), " && CARVE_SERVER=http://127.0.0.1:", port, " CARVE_TOKEN=$(cat ",
      data.string(), "/admin.token 2>/dev/null) ", CARVE_BINARY, " ");
  pid_t dev = Spawn({CARVE_BINARY, "dev", "--data", data.string(), "--listen",
                     absl::StrCat("127.0.0.1:", port), "--schedule-interval-ms", "50"},
                    (dir / "dev.log").string());
  ASSERT_TRUE(WithinTwentySeconds([&] {
    return Slurp((dir / "dev.log").string()).find("Carve is running") != std::string::npos;
  })) << Slurp((dir / "dev.log").string());
  ApiClient api(absl::StrCat("http://127.0.0.1:", port), Slurp((data / "admin.token").string()));
  EXPECT_THAT(Shell(in_dir + "submit -- sh -c 'echo ran-as-$(id -u)'"), HasSubstr("job 1"));
  ASSERT_TRUE(WithinTwentySeconds([&] {
    auto job = api.Get("/api/v1/jobs/1");
    return job.ok() && JobEnded(*job);
  }));
  EXPECT_EQ((*api.Get("/api/v1/jobs/1"))["state"], "succeeded") << Shell(in_dir + "logs 1");
  EXPECT_THAT(Shell(in_dir + "logs 1"), HasSubstr("ran-as-"));
  EXPECT_EQ(std::filesystem::status(dir / "new/sub").permissions(), std::filesystem::perms(0755));
  EXPECT_EQ(std::filesystem::status(data).permissions(), std::filesystem::perms(0700));
  kill(dev, SIGTERM);
  waitpid(dev, nullptr, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace carve::it
