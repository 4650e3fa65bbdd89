#include "adapters/process/posix_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/cgroups/cgroups.h"
#include "adapters/cgroups/device_filter.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (!done()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Gone, or a zombie its (new) parent has not reaped yet.
bool Gone(pid_t pid) {
  std::string stat = ReadAll(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// The cgroup mount points listed in /proc/self/mounts.
std::vector<std::string> CgroupMounts() {
  std::vector<std::string> mounts;
  for (absl::string_view line : absl::StrSplit(ReadAll("/proc/self/mounts"), '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() > 2 && (fields[2] == "cgroup" || fields[2] == "cgroup2")) {
      mounts.push_back(fields[1]);
    }
  }
  return mounts;
}

std::optional<ExitStatus> PollUntilEnded(ProcessLauncher& launcher, const ProcessHandle& handle) {
  std::optional<ExitStatus> status;
  WaitUntil(
      [&] {
        absl::StatusOr<std::optional<ExitStatus>> polled = launcher.Poll(handle);
        EXPECT_TRUE(polled.ok()) << polled.status();
        if (polled.ok()) status = *polled;
        return !polled.ok() || status.has_value();
      },
      std::chrono::seconds(5));
  return status;
}

class PosixLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/carve-launcher-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    root_ = absl::StrCat("carve-test-", getpid());
    launcher_ = MakePosixLauncher(root_);
  }

  void TearDown() override {
    for (const ProcessHandle& handle : launched_) {
      EXPECT_TRUE(launcher_->Stop(handle, 0).ok());
      EXPECT_TRUE(launcher_->Cleanup(handle).ok());
    }
    launcher_.reset();
    for (const std::string& mount : CgroupMounts()) rmdir((mount + "/" + root_).c_str());
    std::filesystem::remove_all(dir_);
  }

  LaunchSpec Spec(std::vector<std::string> argv, const std::string& name) {
    LaunchSpec spec;
    spec.argv = std::move(argv);
    spec.log_path = dir_ + "/" + name + ".log";
    spec.group_name = name;
    return spec;
  }

  ProcessHandle Launch(const LaunchSpec& spec) {
    absl::StatusOr<ProcessHandle> handle = launcher_->Launch(spec);
    EXPECT_TRUE(handle.ok()) << handle.status();
    if (!handle.ok()) return {};
    launched_.push_back(*handle);
    return *handle;
  }

  // The pid a replica wrote to `file`, once it is there.
  pid_t PidFrom(const std::string& file) {
    pid_t pid = 0;
    WaitUntil([&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadAll(file)), &pid); },
              std::chrono::seconds(5));
    return pid;
  }

  std::string dir_;
  std::string root_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::vector<ProcessHandle> launched_;
};

TEST_F(PosixLauncherTest, LogsOutputAndEnvironmentAndReportsExitCode) {
  LaunchSpec spec =
      Spec({"sh", "-c", "echo out; echo err >&2; echo X=$X; pwd; exit 3"}, "exit-code");
  spec.env["X"] = "1";
  spec.workdir = dir_;
  ProcessHandle handle = Launch(spec);
  ASSERT_GT(handle.pid, 0);

  std::optional<ExitStatus> status = PollUntilEnded(*launcher_, handle);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->exited);
  EXPECT_EQ(status->code, 3);
  std::string log = ReadAll(spec.log_path);
  EXPECT_THAT(log, HasSubstr("out\n"));
  EXPECT_THAT(log, HasSubstr("err\n"));
  EXPECT_THAT(log, HasSubstr("X=1\n"));
  EXPECT_THAT(log, HasSubstr(dir_ + "\n"));
  EXPECT_EQ(std::filesystem::status(spec.log_path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // Polling again gives the same answer.
  absl::StatusOr<std::optional<ExitStatus>> again = launcher_->Poll(handle);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->code, 3);
  EXPECT_FALSE(launcher_->Alive(handle));
}

// Nothing of the agent's environment reaches a replica but the allow-list: its secrets and its
// LD_PRELOAD stay out, PATH is the default.
TEST_F(PosixLauncherTest, StartsFromACleanEnvironment) {
  setenv("CARVE_TEST_AGENT_SECRET", "agent-secret-value", 1);
  setenv("LANG", "C.UTF-8", 1);
  LaunchSpec spec = Spec({"env"}, "clean-env");
  spec.env["JOB_VAR"] = "mine";
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  unsetenv("CARVE_TEST_AGENT_SECRET");
  std::string log = ReadAll(spec.log_path);
  EXPECT_THAT(log, Not(HasSubstr("agent-secret-value")));
  EXPECT_THAT(log, HasSubstr("PATH=/usr/local/bin:/usr/bin:/bin\n"));
  EXPECT_THAT(log, HasSubstr("LANG=C.UTF-8\n"));
  EXPECT_THAT(log, HasSubstr("JOB_VAR=mine\n"));
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    std::string key(line.substr(0, line.find('=')));
    EXPECT_THAT((std::vector<std::string>{"JOB_VAR", "LANG", "LC_ALL", "PATH", "TERM", "TZ"}),
                ::testing::Contains(key))
        << log;
  }
  EXPECT_THAT(handle.enforcement.identity, HasSubstr("no_new_privs"));
}

// The status file is opened by the agent's user and handed over as descriptor 3; a symlink in
// its place is not followed.
TEST_F(PosixLauncherTest, GivesTheStatusFileAsDescriptorThree) {
  LaunchSpec spec = Spec({"sh", "-c", "echo exit 7 >&3; ls /proc/self/fd"}, "status-fd");
  spec.status_path = dir_ + "/status";
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  EXPECT_EQ(ReadAll(spec.status_path), "exit 7\n");
  EXPECT_EQ(std::filesystem::status(spec.status_path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);

  std::ofstream(dir_ + "/target") << "untouched";
  std::filesystem::create_symlink(dir_ + "/target", dir_ + "/linked-status");
  LaunchSpec linked = Spec({"sh", "-c", "echo exit 0 >&3"}, "status-link");
  linked.status_path = dir_ + "/linked-status";
  absl::StatusOr<ProcessHandle> refused = launcher_->Launch(linked);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot open status file"));
  EXPECT_EQ(ReadAll(dir_ + "/target"), "untouched");
}

// As root: the replica runs as the given uid and gid, with no supplementary groups and
// no_new_privs; its log stays root's (it only holds the descriptor); it enters its workdir as
// that user, so a directory the user may not enter is refused.
TEST_F(PosixLauncherTest, RunsAsTheGivenUserWithoutPrivileges) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  const std::string work = dir_ + "/work";
  std::filesystem::create_directories(work);
  ASSERT_EQ(chown(work.c_str(), 4242, 4243), 0);
  ASSERT_EQ(chmod(work.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  LaunchSpec spec = Spec({"sh", "-c",
                          "id -u; id -g; id -G; grep NoNewPrivs /proc/self/status; pwd; "
                          "cat /proc/self/status | grep ^Groups"},
                         "as-user");
  spec.uid = 4242;
  spec.gid = 4243;
  spec.workdir = work;
  ProcessHandle handle = Launch(spec);
  std::optional<ExitStatus> status = PollUntilEnded(*launcher_, handle);
  ASSERT_TRUE(status.has_value());
  std::string log = ReadAll(spec.log_path);
  EXPECT_THAT(log, StartsWith("4242\n4243\n4243\n"));
  EXPECT_THAT(log, HasSubstr("NoNewPrivs:\t1"));
  EXPECT_THAT(log, HasSubstr(work + "\n"));
  size_t groups = log.find("Groups:");
  ASSERT_NE(groups, std::string::npos) << log;
  EXPECT_EQ(absl::StripAsciiWhitespace(log.substr(groups + 7)), "") << log;
  struct stat st {};
  ASSERT_EQ(stat(spec.log_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THAT(handle.enforcement.identity,
              HasSubstr("uid 4242 gid 4243, no supplementary groups, no_new_privs"));

  const std::string closed = dir_ + "/closed";
  std::filesystem::create_directories(closed);
  ASSERT_EQ(chmod(closed.c_str(), 0700), 0);
  LaunchSpec other = Spec({"true"}, "closed-workdir");
  other.uid = 4242;
  other.workdir = closed;
  absl::StatusOr<ProcessHandle> refused = launcher_->Launch(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot change to workdir"));
}

// As root with a cgroup: a replica running as its tenant's user cannot loosen its own limits
// nor leave its cgroup.
TEST_F(PosixLauncherTest, AReplicaCannotWriteItsOwnCgroup) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  std::string script =
      "for f in $(cut -d: -f3 /proc/self/cgroup | sort -u); do "
      "for d in /sys/fs/cgroup/*$f /sys/fs/cgroup$f; do "
      "for file in memory.limit_in_bytes memory.max cpu.cfs_quota_us cpu.max; do "
      "[ -e $d/$file ] || continue; "
      "if echo -1 > $d/$file 2>/dev/null; then echo WROTE $d/$file; else echo DENIED $file; fi; "
      "done; "
      "if [ -e $d/../cgroup.procs ] && echo $$ > $d/../cgroup.procs 2>/dev/null; then "
      "echo LEFT $d; fi; done; done";
  LaunchSpec spec = Spec({"sh", "-c", script}, "cgroup-write");
  spec.uid = 4242;
  spec.limits = {500, 64};
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  std::string log = ReadAll(spec.log_path);
  if (handle.group_path.empty()) GTEST_SKIP() << "no cgroup on this machine: " << log;
  EXPECT_THAT(log, HasSubstr("DENIED"));
  EXPECT_THAT(log, Not(HasSubstr("WROTE")));
  EXPECT_THAT(log, Not(HasSubstr("LEFT")));
  for (const std::string& dir : Cgroups::Detect(root_)->DirsOf(handle.group_path)) {
    for (const char* file : {"/memory.limit_in_bytes", "/memory.max"}) {
      std::string value = ReadAll(dir + file);
      if (!value.empty()) {
        EXPECT_EQ(value, "67108864\n") << dir << file;
      }
    }
  }
}

// With the v1 devices controller a replica opens only its own NVIDIA device nodes, whatever
// its environment says: /dev/nvidia1 is refused (EPERM) while /dev/nvidia0 reaches the kernel
// (ENXIO here: no driver behind major 195). The record says which mechanism applied.
TEST_F(PosixLauncherTest, AReplicaOpensOnlyItsOwnNvidiaDevices) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make device nodes";
  const std::string mine = dir_ + "/nvidia0";
  const std::string other = dir_ + "/nvidia1";
  ASSERT_EQ(mknod(mine.c_str(), S_IFCHR | 0666, makedev(195, 0)), 0);
  ASSERT_EQ(mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);
  LaunchSpec spec = Spec(
      {"sh", "-c",
       absl::StrCat("cat ", mine, " 2>&1; cat ", other, " 2>&1; cat /dev/null && echo null-ok")},
      "devices");
  spec.restrict_devices = true;
  spec.allowed_devices = {mine, dir_ + "/missing"};
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  std::string log = ReadAll(spec.log_path);
  if (handle.enforcement.devices.rfind("not enforced", 0) == 0) {
    GTEST_SKIP() << "no device fence on this machine: " << handle.enforcement.devices;
  }
  EXPECT_THAT(handle.enforcement.devices,
              HasSubstr(absl::StrCat("NVIDIA devices denied except ", mine, " (195:0)")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(mine, ": No such device or address")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(other, ": Operation not permitted")));
  EXPECT_THAT(log, HasSubstr("null-ok"));
}

// On cgroup v2 (which has no devices controller) the fence is a BPF device program attached to
// the replica's group: with every v1 devices hierarchy left out, /dev/nvidia1 is still refused
// (EPERM) while /dev/nvidia0 reaches the kernel (ENXIO). Pure v2 nodes (the H200) rely on this.
TEST_F(PosixLauncherTest, ABpfDeviceProgramFencesNvidiaDevicesOnCgroupV2) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make device nodes and load BPF";
  std::string table;
  for (absl::string_view line : absl::StrSplit(ReadAll("/proc/self/mounts"), '\n')) {
    if (absl::StrContains(line, " cgroup2 ") ||
        (absl::StrContains(line, " cgroup ") && !absl::StrContains(line, "devices"))) {
      absl::StrAppend(&table, line, "\n");
    }
  }
  if (!absl::StrContains(table, " cgroup2 ")) GTEST_SKIP() << "no cgroup2 mount";
  std::unique_ptr<ProcessLauncher> launcher =
      MakePosixLauncherWithCgroups(Cgroups::DetectFromMounts(root_, table));
  const std::string mine = dir_ + "/nvidia0";
  const std::string other = dir_ + "/nvidia1";
  ASSERT_EQ(mknod(mine.c_str(), S_IFCHR | 0666, makedev(195, 0)), 0);
  ASSERT_EQ(mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);
  LaunchSpec spec =
      Spec({"sh", "-c", absl::StrCat("cat ", mine, " 2>&1; cat ", other, " 2>&1")}, "bpf-devices");
  spec.restrict_devices = true;
  spec.allowed_devices = {mine};
  absl::StatusOr<ProcessHandle> handle = launcher->Launch(spec);
  ASSERT_TRUE(handle.ok()) << handle.status();
  launched_.push_back(*handle);
  ASSERT_TRUE(PollUntilEnded(*launcher, *handle).has_value());
  EXPECT_EQ(handle->enforcement.devices,
            absl::StrCat("cgroup-v2 BPF device program: NVIDIA devices denied except ", mine,
                         " (195:0)"));
  std::string log = ReadAll(spec.log_path);
  EXPECT_THAT(log, HasSubstr(absl::StrCat(mine, ": No such device or address")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat(other, ": Operation not permitted")));
}

// A fork bomb stops at the replica's pids.max instead of exhausting the node's process table.
TEST_F(PosixLauncherTest, AReplicaCannotForkPastItsPidsLimit) {
  LaunchSpec spec = Spec({"sh", "-c",
                          "i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done 2>&1; "
                          "echo started $(jobs -p | wc -l)"},
                         "pids");
  spec.limits.pids_max = 10;
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  if (handle.group_path.empty()) GTEST_SKIP() << "no cgroup on this machine";
  if (!absl::StrContains(handle.enforcement.detail, "pids.max=10")) {
    EXPECT_THAT(handle.enforcement.detail, HasSubstr("pids not limited"));
    GTEST_SKIP() << "no pids controller: " << handle.enforcement.detail;
  }
  std::string log = ReadAll(spec.log_path);
  EXPECT_THAT(log, HasSubstr("fork"));  // "sh: Cannot fork" / "can't fork"
  int started = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::ConsumePrefix(&line, "started ")) {
      ASSERT_TRUE(absl::SimpleAtoi(line, &started)) << line;
    }
  }
  EXPECT_LT(started, 10) << log;
}

TEST(NvidiaMajorsTest, AreTheFrontendAndEveryNvidiaCharacterMajor) {
  EXPECT_EQ(NvidiaMajors("Character devices:\n  1 mem\n195 nvidia-frontend\n236 nvidia-uvm\n"
                         "237 nvidia-caps\n\nBlock devices:\n240 nvidia-fake-block\n"),
            (std::vector<uint32_t>{195, 236, 237}));
  EXPECT_EQ(NvidiaMajors(""), std::vector<uint32_t>{195});
}

// The program's jumps land inside it, and both ends return: the verifier would refuse less.
TEST(DeviceFilterProgramTest, EveryJumpLandsInsideTheProgram) {
  std::vector<bpf_insn> program = DeviceFilterProgram({195, 236}, {{195, 0}, {236, 0}, {195, 255}});
  ASSERT_EQ(program.size(), 5u + 2 + 1 + 6 + 4);
  for (size_t i = 0; i < program.size(); ++i) {
    if (BPF_CLASS(program[i].code) != BPF_JMP || BPF_OP(program[i].code) == BPF_EXIT) continue;
    int64_t target = static_cast<int64_t>(i) + 1 + program[i].off;
    EXPECT_GT(target, static_cast<int64_t>(i)) << i;
    EXPECT_LT(target, static_cast<int64_t>(program.size())) << i;
  }
  EXPECT_EQ(program.back().code, BPF_JMP | BPF_EXIT);
  EXPECT_EQ(program[program.size() - 2].imm, 1);  // allow
  EXPECT_EQ(program[program.size() - 4].imm, 0);  // deny
}

TEST(DeviceAllowRulesTest, AllowsEveryDeviceButTheNvidiaOnesNotGranted) {
  std::vector<std::string> rules = DeviceAllowRules(
      "Character devices:\n  1 mem\n  5 /dev/tty\n195 nvidia-frontend\n"
      "236 nvidia-uvm\n237 nvidia-caps\n\nBlock devices:\n  8 sd\n",
      {"c 195:0", "c 236:0"});
  EXPECT_EQ(rules, (std::vector<std::string>{"b *:* rwm", "c *:* m", "c 1:* rwm", "c 5:* rwm",
                                             "c 195:0 rwm", "c 236:0 rwm"}));
}

TEST_F(PosixLauncherTest, ReportsTheSignalThatKilledIt) {
  ProcessHandle handle = Launch(Spec({"sh", "-c", "kill -9 $$"}, "signalled"));
  std::optional<ExitStatus> status = PollUntilEnded(*launcher_, handle);
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(status->exited);
  EXPECT_EQ(status->signal, SIGKILL);
}

TEST_F(PosixLauncherTest, LeadsItsOwnSessionAndProcessGroup) {
  ProcessHandle handle = Launch(Spec({"sleep", "30"}, "session"));
  EXPECT_EQ(getpgid(handle.pid), handle.pid);
  EXPECT_EQ(getsid(handle.pid), handle.pid);
  EXPECT_TRUE(launcher_->Alive(handle));
  absl::StatusOr<std::optional<ExitStatus>> polled = launcher_->Poll(handle);
  ASSERT_TRUE(polled.ok());
  EXPECT_FALSE(polled->has_value());
}

TEST_F(PosixLauncherTest, StopKillsTheWholeGroupWithGrandchildren) {
  const std::string pid_file = dir_ + "/grandchild.pid";
  ProcessHandle handle =
      Launch(Spec({"sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"}, "stop"));
  pid_t grandchild = PidFrom(pid_file);
  ASSERT_GT(grandchild, 0);
  ASSERT_FALSE(Gone(grandchild));

  const auto start = Clock::now();
  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_TRUE(Gone(handle.pid));
  EXPECT_TRUE(Gone(grandchild));
  EXPECT_FALSE(launcher_->Alive(handle));
  std::optional<ExitStatus> status = PollUntilEnded(*launcher_, handle);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->signal, SIGTERM);
  EXPECT_TRUE(launcher_->Cleanup(handle).ok());
  if (!handle.group_path.empty()) {
    EXPECT_FALSE(std::filesystem::exists(handle.group_path));
  }
}

// How the agent tells an NVML device process (known only by pid) of a replica from others'.
TEST_F(PosixLauncherTest, OwnsTheGroupsProcessesAndNoOthers) {
  const std::string pid_file = dir_ + "/owned.pid";
  ProcessHandle handle =
      Launch(Spec({"sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"}, "owns"));
  pid_t grandchild = PidFrom(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(launcher_->Owns(handle, handle.pid));
  EXPECT_TRUE(launcher_->Owns(handle, grandchild));
  EXPECT_FALSE(launcher_->Owns(handle, getpid()));
  EXPECT_FALSE(launcher_->Owns(handle, 0));
  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  PollUntilEnded(*launcher_, handle);
  EXPECT_FALSE(launcher_->Owns(handle, grandchild));
  EXPECT_TRUE(launcher_->Cleanup(handle).ok());
}

TEST_F(PosixLauncherTest, StopSendsSigkillAfterTheGraceWhenSigtermIsIgnored) {
  const std::string pid_file = dir_ + "/stubborn.pid";
  ProcessHandle handle = Launch(
      Spec({"sh", "-c", "trap '' TERM; sleep 300 & echo $! > " + pid_file + "; wait"}, "stubborn"));
  pid_t grandchild = PidFrom(pid_file);
  ASSERT_GT(grandchild, 0);

  const auto start = Clock::now();
  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_TRUE(Gone(handle.pid));
  EXPECT_TRUE(Gone(grandchild));
  std::optional<ExitStatus> status = PollUntilEnded(*launcher_, handle);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->signal, SIGKILL);
}

TEST_F(PosixLauncherTest, StopCatchesProcessesThatLeftTheGroupThroughTheCgroup) {
  if (Launch(Spec({"true"}, "probe")).enforcement.mechanism == "none") {
    GTEST_SKIP() << "no cgroup here: a process that calls setsid escapes the process group";
  }
  const std::string pid_file = dir_ + "/escapee.pid";
  // A background job of a non-interactive shell is no group leader, so setsid(1) calls
  // setsid() itself and execs sleep: $! is a process in a session of its own.
  ProcessHandle handle = Launch(
      Spec({"sh", "-c", "setsid sleep 300 & echo $! > " + pid_file + "; sleep 300"}, "escape"));
  pid_t escapee = PidFrom(pid_file);
  ASSERT_GT(escapee, 0);
  ASSERT_TRUE(WaitUntil([&] { return getsid(escapee) == escapee; }, std::chrono::seconds(2)));

  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  EXPECT_TRUE(Gone(handle.pid));
  EXPECT_TRUE(Gone(escapee));
}

TEST_F(PosixLauncherTest, CommandNotFoundIsAnErrorNamingIt) {
  absl::StatusOr<ProcessHandle> handle =
      launcher_->Launch(Spec({"carve-no-such-command", "x"}, "missing"));
  ASSERT_FALSE(handle.ok());
  EXPECT_TRUE(absl::IsNotFound(handle.status())) << handle.status();
  EXPECT_THAT(std::string(handle.status().message()), HasSubstr("carve-no-such-command"));
  // Nothing is left behind: no cgroup, no child.
  for (const std::string& mount : CgroupMounts()) {
    EXPECT_FALSE(std::filesystem::exists(mount + "/" + root_ + "/missing")) << mount;
  }
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(PosixLauncherTest, UnwritableLogAndWorkdirAreErrors) {
  LaunchSpec spec = Spec({"true"}, "bad-log");
  spec.log_path = dir_ + "/no/such/dir/out.log";
  absl::StatusOr<ProcessHandle> handle = launcher_->Launch(spec);
  ASSERT_FALSE(handle.ok());
  EXPECT_THAT(std::string(handle.status().message()), HasSubstr(spec.log_path));

  spec = Spec({"true"}, "bad-workdir");
  spec.workdir = dir_ + "/absent";
  handle = launcher_->Launch(spec);
  ASSERT_FALSE(handle.ok());
  EXPECT_THAT(std::string(handle.status().message()), HasSubstr(spec.workdir));
}

TEST_F(PosixLauncherTest, EnforcesLimitsWhereTheMachineAllows) {
  LaunchSpec spec = Spec({"sleep", "30"}, "limits");
  spec.limits.cpu_milli = 500;
  spec.limits.memory_mib = 64;
  ProcessHandle handle = Launch(spec);
  ASSERT_GT(handle.pid, 0);
  const Enforcement& enforcement = handle.enforcement;
  std::printf("[ launcher ] mechanism: %s\n[ launcher ] detail: %s\n",
              enforcement.mechanism.c_str(), enforcement.detail.c_str());
  RecordProperty("enforcement", enforcement.detail);

  const std::string group = "/" + root_ + "/limits";
  const std::string proc_cgroup = ReadAll(absl::StrCat("/proc/", handle.pid, "/cgroup"));
  if (enforcement.mechanism == "cgroup-v2") {
    EXPECT_EQ(ReadAll(handle.group_path + "/cpu.max"), "50000 100000\n");
    EXPECT_EQ(ReadAll(handle.group_path + "/memory.max"), "67108864\n");
    EXPECT_THAT(enforcement.detail, HasSubstr("cpu.max=50000 100000"));
    EXPECT_THAT(enforcement.detail, HasSubstr("memory.max=67108864"));
    EXPECT_THAT(proc_cgroup, HasSubstr("0::" + group + "\n"));
  } else if (enforcement.mechanism == "cgroup-v1") {
    int limited = 0;
    for (const std::string& mount : CgroupMounts()) {
      const std::string dir = mount + "/" + root_ + "/limits";
      if (std::filesystem::exists(dir + "/cpu.cfs_quota_us")) {
        EXPECT_EQ(ReadAll(dir + "/cpu.cfs_quota_us"), "50000\n");
        EXPECT_EQ(ReadAll(dir + "/cpu.cfs_period_us"), "100000\n");
        EXPECT_THAT(enforcement.detail, HasSubstr("cpu.cfs_quota_us=50000/100000"));
        EXPECT_THAT(proc_cgroup, HasSubstr(":cpu:" + group + "\n"));
        ++limited;
      }
      if (std::filesystem::exists(dir + "/memory.limit_in_bytes")) {
        EXPECT_EQ(ReadAll(dir + "/memory.limit_in_bytes"), "67108864\n");
        EXPECT_THAT(enforcement.detail, HasSubstr("memory.limit_in_bytes=67108864"));
        EXPECT_THAT(proc_cgroup, HasSubstr(":memory:" + group + "\n"));
        ++limited;
      }
    }
    EXPECT_GT(limited, 0);
    EXPECT_THAT(proc_cgroup, HasSubstr(group + "\n"));
  } else {
    EXPECT_EQ(enforcement.mechanism, "none");
    EXPECT_THAT(enforcement.detail, StartsWith("none: "));
    EXPECT_GT(enforcement.detail.size(), std::string("none: ").size() + 10);
    EXPECT_TRUE(handle.group_path.empty());
  }

  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  ASSERT_TRUE(launcher_->Cleanup(handle).ok());
  for (const std::string& mount : CgroupMounts()) {
    EXPECT_FALSE(std::filesystem::exists(mount + "/" + root_ + "/limits")) << mount;
  }
}

TEST_F(PosixLauncherTest, ASecondReplicaOfTheSameGroupNameIsRefused) {
  ProcessHandle first = Launch(Spec({"sleep", "30"}, "twin"));
  if (first.enforcement.mechanism == "none") {
    GTEST_SKIP() << "no cgroup here";
  }
  absl::StatusOr<ProcessHandle> second = launcher_->Launch(Spec({"sleep", "30"}, "twin"));
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
}

TEST_F(PosixLauncherTest, AdoptsAProcessItDidNotStart) {
  // An intermediate process launches the replica and exits, as an agent that restarts would: the
  // replica is no child of this process, and a new launcher instance gets only its handle.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  LaunchSpec spec = Spec({"sleep", "300"}, "adopted");
  pid_t intermediate = fork();
  ASSERT_GE(intermediate, 0);
  if (intermediate == 0) {
    close(fds[0]);
    absl::StatusOr<ProcessHandle> handle = launcher_->Launch(spec);
    std::string message =
        handle.ok() ? absl::StrCat(handle->pid, " ", handle->group_path) : std::string("0");
    ssize_t ignored = write(fds[1], message.data(), message.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) message.append(buf, n);
  close(fds[0]);
  ASSERT_EQ(waitpid(intermediate, nullptr, 0), intermediate);
  std::vector<std::string> parts = absl::StrSplit(message, absl::MaxSplits(' ', 1));
  ProcessHandle adopted;
  ASSERT_TRUE(absl::SimpleAtoi(parts[0], &adopted.pid));
  ASSERT_GT(adopted.pid, 0);
  if (parts.size() > 1) adopted.group_path = parts[1];
  launched_.push_back(adopted);

  std::unique_ptr<ProcessLauncher> restarted = MakePosixLauncher(root_);
  EXPECT_TRUE(restarted->Alive(adopted));
  absl::StatusOr<std::optional<ExitStatus>> polled = restarted->Poll(adopted);
  ASSERT_TRUE(polled.ok()) << polled.status();
  EXPECT_FALSE(polled->has_value());

  ASSERT_TRUE(restarted->Stop(adopted, 200).ok());
  EXPECT_TRUE(Gone(adopted.pid));
  EXPECT_FALSE(restarted->Alive(adopted));
  polled = restarted->Poll(adopted);
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_TRUE(polled->has_value());
  EXPECT_FALSE((*polled)->exited);  // unknown: the status went to its parent
  EXPECT_EQ((*polled)->signal, 0);
  EXPECT_TRUE(restarted->Cleanup(adopted).ok());
}

// An agent that restarts sweeps the groups its earlier run left: a replica that ended while it
// was down leaves an empty group (removed), one it started and never recorded still runs
// (killed, removed); the replicas it adopted and other agents' groups are left alone.
TEST_F(PosixLauncherTest, SweepRemovesAnEarlierAgentsLeftoverGroupsOnly) {
  ProcessHandle kept = Launch(Spec({"sleep", "300"}, "n1-job-1-r0"));
  if (kept.group_path.empty()) GTEST_SKIP() << "no cgroup here: " << kept.enforcement.detail;
  ProcessHandle stray = Launch(Spec({"sleep", "300"}, "n1-job-2-r0"));
  ProcessHandle ended = Launch(Spec({"true"}, "n1-job-3-r0"));
  ProcessHandle other = Launch(Spec({"sleep", "300"}, "n2-job-1-r0"));
  ASSERT_TRUE(PollUntilEnded(*launcher_, ended).has_value());
  std::unique_ptr<Cgroups> cgroups = Cgroups::Detect(root_);
  ASSERT_FALSE(cgroups->DirsOf(ended.group_path).empty());  // nothing cleaned it up

  std::unique_ptr<ProcessLauncher> restarted = MakePosixLauncher(root_);
  SweptGroups swept = restarted->Sweep("n1-job-", {kept.group_path});
  EXPECT_THAT(swept.removed, ::testing::ElementsAre(ended.group_path));
  EXPECT_THAT(swept.killed, ::testing::ElementsAre(stray.group_path));
  EXPECT_TRUE(swept.failed.empty()) << absl::StrJoin(swept.failed, "; ");
  EXPECT_TRUE(cgroups->DirsOf(ended.group_path).empty());
  EXPECT_TRUE(cgroups->DirsOf(stray.group_path).empty());
  EXPECT_TRUE(Gone(stray.pid));
  EXPECT_TRUE(launcher_->Alive(kept));
  EXPECT_TRUE(launcher_->Alive(other));
  EXPECT_FALSE(cgroups->DirsOf(kept.group_path).empty());
  EXPECT_FALSE(cgroups->DirsOf(other.group_path).empty());
  // Nothing left to sweep: a second agent start finds nothing.
  swept = restarted->Sweep("n1-job-", {kept.group_path});
  EXPECT_TRUE(swept.removed.empty() && swept.killed.empty() && swept.failed.empty());
}

// The child moves itself into every directory of its cgroup before it execs: the command's first
// look at /proc/self/cgroup already shows the group, in each hierarchy the launcher uses (v1
// controllers and the unified cgroup2 mount here, the one cgroup2 directory on a pure v2 node).
TEST_F(PosixLauncherTest, TheCommandStartsInsideItsCgroup) {
  ProcessHandle handle = Launch(Spec({"cat", "/proc/self/cgroup"}, "joined"));
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  if (handle.group_path.empty()) GTEST_SKIP() << "no cgroup here: " << handle.enforcement.detail;
  std::vector<std::string> dirs = Cgroups::Detect(root_)->DirsOf(handle.group_path);
  ASSERT_FALSE(dirs.empty());
  const std::string log = ReadAll(dir_ + "/joined.log");
  size_t in_group = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    if (absl::EndsWith(line, ":/" + root_ + "/joined")) ++in_group;
  }
  EXPECT_EQ(in_group, dirs.size()) << log;
  if (handle.enforcement.mechanism == "cgroup-v2") {
    EXPECT_THAT(log, HasSubstr("0::/" + root_ + "/joined\n"));
  }
}

// A cgroup the child cannot enter (here a hierarchy laid out in plain files, whose group has no
// cgroup.procs) is reported by the child before it execs; the launcher removes the group and
// starts the replica again without one, saying why.
TEST_F(PosixLauncherTest, AFailedJoinIsReportedAndTheReplicaRunsWithoutACgroup) {
  const std::string mount = dir_ + "/fake-v2";
  std::filesystem::create_directories(mount + "/carve");
  std::ofstream(mount + "/cgroup.controllers") << "cpuset cpu io memory pids\n";
  std::ofstream(mount + "/cgroup.subtree_control") << "cpu memory\n";
  std::ofstream(mount + "/carve/cgroup.subtree_control") << "cpu memory\n";
  auto cgroups = Cgroups::DetectFromMounts("carve", "cgroup2 " + mount + " cgroup2 rw 0 0\n");
  ASSERT_EQ(cgroups->mechanism(), "cgroup-v2") << cgroups->summary();
  std::unique_ptr<ProcessLauncher> launcher = MakePosixLauncherWithCgroups(std::move(cgroups));

  LaunchSpec spec = Spec({"sh", "-c", "echo ran; cat /proc/self/cgroup"}, "unjoinable");
  absl::StatusOr<ProcessHandle> handle = launcher->Launch(spec);
  ASSERT_TRUE(handle.ok()) << handle.status();
  launched_.push_back(*handle);
  ASSERT_TRUE(PollUntilEnded(*launcher, *handle).has_value());
  EXPECT_EQ(handle->enforcement.mechanism, "none");
  EXPECT_EQ(handle->enforcement.detail,
            absl::StrCat("none: cgroup-v2 available but joining the group failed: open ", mount,
                         "/carve/unjoinable/cgroup.procs: No such file or directory"));
  EXPECT_TRUE(handle->group_path.empty());
  EXPECT_FALSE(std::filesystem::exists(mount + "/carve/unjoinable"));
  EXPECT_THAT(ReadAll(spec.log_path), StartsWith("ran\n"));
}

// Launches from several threads at once: each child shares the agent's memory until its exec,
// and each launch gets its own child's outcome (a pid that ran its command, or its own error).
TEST_F(PosixLauncherTest, ConcurrentLaunchesEachGetTheirOwnOutcome) {
  constexpr int kThreads = 4;
  constexpr int kEach = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  std::vector<std::vector<ProcessHandle>> handles(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string name = absl::StrCat("concurrent-", t, "-", i);
        if (i % 2 == 1) {
          absl::StatusOr<ProcessHandle> missing =
              launcher_->Launch(Spec({absl::StrCat("carve-missing-", t, "-", i)}, name));
          if (missing.ok() ||
              !absl::StrContains(missing.status().message(), absl::StrCat("missing-", t, "-", i))) {
            absl::StrAppend(&failures[t], name, ": ", missing.status().ToString(), "\n");
          }
          continue;
        }
        absl::StatusOr<ProcessHandle> handle =
            launcher_->Launch(Spec({"sh", "-c", "echo $$"}, name));
        if (!handle.ok()) {
          absl::StrAppend(&failures[t], name, ": ", handle.status().ToString(), "\n");
          continue;
        }
        handles[t].push_back(*handle);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], "");
    for (size_t i = 0; i < handles[t].size(); ++i) {
      const ProcessHandle& handle = handles[t][i];
      launched_.push_back(handle);
      ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
      EXPECT_EQ(ReadAll(absl::StrCat(dir_, "/concurrent-", t, "-", 2 * i, ".log")),
                absl::StrCat(handle.pid, "\n"));
    }
  }
}

// As root, from an agent with other threads: the replica gets its user while every thread of the
// agent keeps its own (glibc's set*id calls would have changed them all; the child makes the
// system calls, as posix_spawn does).
TEST_F(PosixLauncherTest, SwitchingTheReplicasUserLeavesTheAgentsThreadsAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pid_t helper_tid = 0;
  std::thread helper([&] {
    std::unique_lock<std::mutex> lock(mu);
    helper_tid = gettid();
    cv.notify_all();
    cv.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return helper_tid != 0; });
  }
  LaunchSpec spec = Spec({"id", "-u"}, "as-user-threaded");
  spec.uid = 4242;
  ProcessHandle handle = Launch(spec);
  ASSERT_TRUE(PollUntilEnded(*launcher_, handle).has_value());
  EXPECT_EQ(ReadAll(spec.log_path), "4242\n");
  for (pid_t tid : {gettid(), helper_tid}) {
    std::string status = ReadAll(absl::StrCat("/proc/self/task/", tid, "/status"));
    EXPECT_THAT(status, HasSubstr("\nUid:\t0\t0\t0\t0\n")) << tid;
    EXPECT_THAT(status, HasSubstr("\nGid:\t0\t0\t0\t0\n")) << tid;
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  helper.join();
}

TEST_F(PosixLauncherTest, RunsUnconfinedWhenNoCgroupIsUsable) {
  auto cgroups = Cgroups::DetectFromMounts(root_, "");
  EXPECT_EQ(cgroups->mechanism(), "none");
  std::unique_ptr<ProcessLauncher> launcher = MakePosixLauncherWithCgroups(std::move(cgroups));
  const std::string pid_file = dir_ + "/unconfined.pid";
  LaunchSpec spec =
      Spec({"sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"}, "unconfined");
  spec.limits.cpu_milli = 500;
  absl::StatusOr<ProcessHandle> handle = launcher->Launch(spec);
  ASSERT_TRUE(handle.ok()) << handle.status();
  launched_.push_back(*handle);
  EXPECT_EQ(handle->enforcement.mechanism, "none");
  EXPECT_EQ(handle->enforcement.detail, "none: no cgroup hierarchy mounted");
  EXPECT_TRUE(handle->group_path.empty());
  pid_t grandchild = PidFrom(pid_file);
  ASSERT_GT(grandchild, 0);

  EXPECT_TRUE(launcher->Alive(*handle));
  ASSERT_TRUE(launcher->Stop(*handle, 200).ok());
  EXPECT_TRUE(Gone(handle->pid));
  EXPECT_TRUE(Gone(grandchild));
  EXPECT_FALSE(launcher->Alive(*handle));
  EXPECT_TRUE(launcher->Cleanup(*handle).ok());
}

TEST(CgroupsDetectTest, SaysWhyAHierarchyIsNotUsed) {
  auto cgroups = Cgroups::DetectFromMounts("carve",
                                           "cgroup2 /nonexistent/cgroup2 cgroup2 rw,relatime 0 0\n"
                                           "cgroup /nonexistent/cpu cgroup ro,relatime,cpu 0 0\n");
  EXPECT_EQ(cgroups->mechanism(), "none");
  EXPECT_THAT(cgroups->summary(), HasSubstr("cgroup2 at /nonexistent/cgroup2"));
  EXPECT_THAT(cgroups->summary(),
              HasSubstr("cgroup v1 cpu at /nonexistent/cpu is mounted read-only"));
  EXPECT_THAT(cgroups->summary(), HasSubstr("no cgroup v1 memory hierarchy mounted"));
}

// Only a cgroup v2 machine runs the v2 path for real (EnforcesLimitsWhereTheMachineAllows); this
// walks it over plain files laid out like a v2 hierarchy whose group already exists.
TEST(CgroupsDetectTest, WritesCgroupV2LimitsInTheirFormat) {
  char dir[] = "/tmp/carve-fake-v2-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string mount = dir;
  const std::string group = mount + "/carve/job-1-r0";
  std::filesystem::create_directories(group);
  std::ofstream(mount + "/cgroup.controllers") << "cpuset cpu io memory pids\n";
  std::ofstream(mount + "/cgroup.subtree_control") << "cpu memory\n";
  std::ofstream(mount + "/carve/cgroup.subtree_control") << "cpu memory\n";
  for (const char* file : {"cgroup.procs", "cpu.max", "memory.max"}) {
    std::ofstream(group + "/" + file) << "";
  }

  auto cgroups = Cgroups::DetectFromMounts("carve", "cgroup2 " + mount + " cgroup2 rw 0 0\n");
  ASSERT_EQ(cgroups->mechanism(), "cgroup-v2") << cgroups->summary();
  absl::StatusOr<CgroupGroup> created = cgroups->Create("job-1-r0", {1500, 2048});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->dirs, std::vector<std::string>{group});
  EXPECT_EQ(created->enforcement.detail, "cgroup-v2: cpu.max=150000 100000, memory.max=2147483648");
  EXPECT_EQ(ReadAll(group + "/cpu.max"), "150000 100000");
  EXPECT_EQ(ReadAll(group + "/memory.max"), "2147483648");

  ASSERT_TRUE(Cgroups::Join(*created, 4242).ok());
  EXPECT_EQ(Cgroups::Procs(created->dirs), std::vector<pid_t>{4242});
  EXPECT_EQ(cgroups->DirsOf(group), std::vector<std::string>{group});
  EXPECT_TRUE(absl::IsAlreadyExists(cgroups->Create("job-1-r0", {}).status()));
  std::filesystem::remove_all(mount);
}

// A CPU limit above the request (a burstable replica): the group's weight under contention is in
// proportion to the request, as the kubelet sets it, so a replica bursting to its limit never
// keeps another below what it asked. v1 on this machine, v2 over plain files.
TEST_F(PosixLauncherTest, ABurstableReplicaWeighsItsRequest) {
  LaunchSpec spec = Spec({"sleep", "30"}, "burst");
  spec.limits = {4000, 64, 0, 2000};
  ProcessHandle handle = Launch(spec);
  ASSERT_GT(handle.pid, 0);
  if (handle.enforcement.mechanism == "cgroup-v1") {
    EXPECT_THAT(handle.enforcement.detail, HasSubstr("cpu.shares=2048"));
    for (const std::string& mount : CgroupMounts()) {
      const std::string dir = mount + "/" + root_ + "/burst";
      if (std::filesystem::exists(dir + "/cpu.shares")) {
        EXPECT_EQ(ReadAll(dir + "/cpu.shares"), "2048\n");
      }
    }
  } else if (handle.enforcement.mechanism == "cgroup-v2") {
    EXPECT_THAT(handle.enforcement.detail, HasSubstr("cpu.weight=79"));
  }
  ASSERT_TRUE(launcher_->Stop(handle, 200).ok());
  ASSERT_TRUE(launcher_->Cleanup(handle).ok());

  char dir[] = "/tmp/carve-fake-v2-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string mount = dir;
  const std::string group = mount + "/carve/job-2-r0";
  std::filesystem::create_directories(group);
  std::ofstream(mount + "/cgroup.controllers") << "cpu memory\n";
  std::ofstream(mount + "/cgroup.subtree_control") << "cpu memory\n";
  std::ofstream(mount + "/carve/cgroup.subtree_control") << "cpu memory\n";
  for (const char* file : {"cgroup.procs", "cpu.max", "cpu.weight", "memory.max"}) {
    std::ofstream(group + "/" + file) << "";
  }
  auto cgroups = Cgroups::DetectFromMounts("carve", "cgroup2 " + mount + " cgroup2 rw 0 0\n");
  absl::StatusOr<CgroupGroup> created = cgroups->Create("job-2-r0", {4000, 2048, 0, 2000});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->enforcement.detail,
            "cgroup-v2: cpu.max=400000 100000, cpu.weight=79, memory.max=2147483648");
  EXPECT_EQ(ReadAll(group + "/cpu.weight"), "79");
  std::filesystem::remove_all(mount);
}

TEST(CgroupsDetectTest, RefusesARootNameThatLeavesTheHierarchy) {
  EXPECT_EQ(Cgroups::DetectFromMounts("../x", "")->mechanism(), "none");
  EXPECT_THAT(Cgroups::DetectFromMounts("/abs", "")->summary(), HasSubstr("invalid cgroup root"));
}

}  // namespace
}  // namespace carve
