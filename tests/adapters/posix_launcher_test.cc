#include "adapters/process/posix_launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "adapters/cgroups/cgroups.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
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
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read);
  // Polling again gives the same answer.
  absl::StatusOr<std::optional<ExitStatus>> again = launcher_->Poll(handle);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->code, 3);
  EXPECT_FALSE(launcher_->Alive(handle));
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

TEST(CgroupsDetectTest, RefusesARootNameThatLeavesTheHierarchy) {
  EXPECT_EQ(Cgroups::DetectFromMounts("../x", "")->mechanism(), "none");
  EXPECT_THAT(Cgroups::DetectFromMounts("/abs", "")->summary(), HasSubstr("invalid cgroup root"));
}

}  // namespace
}  // namespace carve
