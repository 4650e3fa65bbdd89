// Replicas as POSIX process groups, each in its own session and (where the machine allows) its
// own cgroup. The child is started as glibc's posix_spawn starts one: clone(CLONE_VM |
// CLONE_VFORK) on a small stack of its own, so that it shares the agent's memory until exec
// instead of copying its page tables (the agent may be the whole `carve dev` server: fork() of it
// cost more than anything else a launch did). The agent's thread waits until the child has
// exec'd or exited. Before exec, still privileged, the child moves itself into its cgroup, so a
// replica never runs a single instruction of its command outside its limits.
#include "adapters/process/posix_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sanitizer/asan_interface.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace carve {
namespace {

// The number a cgroup file holds ("12345\n"); nullopt when it is missing or not a number.
std::optional<int64_t> NumberIn(const std::string& path) {
  std::ifstream in(path);
  int64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// The value of `key` in a "key value" file (cpu.stat); nullopt when absent.
std::optional<int64_t> KeyIn(const std::string& path, absl::string_view key) {
  std::ifstream in(path);
  std::string name;
  int64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return std::nullopt;
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";
// What a replica inherits of the agent's environment.
constexpr const char* kInherited[] = {"LANG", "LC_ALL", "TZ", "TERM"};
// The descriptor LaunchSpec.status_path is given as.
constexpr int kStatusFd = 3;
constexpr milliseconds kPollStep(10);
constexpr milliseconds kKillWait(2000);     // after SIGKILL, how long Stop waits for the group
constexpr milliseconds kCleanupWait(1000);  // how long Cleanup waits for a cgroup to drain
// The child's stack between clone and exec: it needs a few KiB; a sanitizer build more. Only the
// pages it touches are ever allocated.
constexpr size_t kChildStackBytes = 256 * 1024;
#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer intercepts clone and treats the child as a forked process: with CLONE_VM its
// bookkeeping for the child runs in the agent's own memory, marks the agent as forked, and the
// agent dies at its next new thread ("starting new threads after multi-threaded fork"). Its
// builds copy the agent's memory instead, as TSan itself turns vfork into fork.
constexpr int kCloneFlags = CLONE_VFORK | SIGCHLD;
#else
constexpr int kCloneFlags = CLONE_VM | CLONE_VFORK | SIGCHLD;
#endif

std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));  // the GNU variant: returns the message
}

// Where a child failed between clone and exec; sent to the agent over the socket, which closes
// on a successful exec (SOCK_CLOEXEC), so "nothing read" means "running the command".
enum ChildStage : int {
  kSetsid = 1,
  kStdin,
  kLog,
  kWorkdir,
  kExec,
  kStatus,
  kGroups,
  kGid,
  kUid,
  kNoNewPrivs,
  kJoinOpen,   // opening <dir>/cgroup.procs of the cgroup's dir number `dir`
  kJoinWrite,  // writing "0" to it
};
struct ChildError {
  int stage = 0;
  int err = 0;
  int dir = 0;
};

// Everything the child uses, built before the clone and alive until the agent's thread resumes:
// the child runs in the agent's memory beside its other threads, so it may only make
// async-signal-safe calls, must not allocate, and writes nothing but its own stack (and errno).
struct ChildPlan {
  std::string command;  // argv[0], for messages
  std::string path;     // PATH searched, for messages
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<std::string> candidates;  // where argv[0] may be, in PATH order
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string log_path;
  std::string workdir;
  std::string status_path;
  int64_t uid = -1;
  int64_t gid = -1;
  // "<dir>/cgroup.procs" of every directory of the replica's cgroup, the primary one first;
  // empty: no cgroup.
  std::vector<std::string> procs_files;
};

absl::StatusOr<ChildPlan> MakePlan(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("LaunchSpec.argv is empty");
  }
  if (spec.log_path.empty()) return absl::InvalidArgumentError("LaunchSpec.log_path is empty");
  ChildPlan plan;
  plan.command = spec.argv[0];
  plan.log_path = spec.log_path;
  plan.workdir = spec.workdir;
  plan.status_path = spec.status_path;
  plan.uid = spec.uid;
  plan.gid = spec.gid;
  plan.argv_storage = spec.argv;

  // A clean environment: the agent's own (its secrets, LD_PRELOAD) stays out.
  std::map<std::string, std::string> env = {{"PATH", kDefaultPath}};
  for (const char* name : kInherited) {
    if (const char* value = getenv(name); value != nullptr) env[name] = value;
  }
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid environment variable name \"", key, "\""));
    }
    env[key] = value;
  }
  for (const auto& [key, value] : env) plan.env_storage.push_back(absl::StrCat(key, "=", value));

  auto path = env.find("PATH");
  plan.path = path != env.end() ? path->second : kDefaultPath;
  if (plan.command.find('/') != std::string::npos) {
    plan.candidates.push_back(plan.command);
  } else {
    for (absl::string_view dir : absl::StrSplit(plan.path, ':')) {
      // An empty entry is the working directory, as for execvp.
      plan.candidates.push_back(dir.empty() ? plan.command : absl::StrCat(dir, "/", plan.command));
    }
  }
  for (std::string& arg : plan.argv_storage) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (std::string& entry : plan.env_storage) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  return plan;
}

// The child's open, write and close: the system calls themselves. glibc's are cancellation
// points, which in a multithreaded process flip the calling thread's cancellation state: the
// agent's thread's, in the agent's memory.
int ChildOpen(const char* path, int flags, mode_t mode = 0) {
  return static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}
ssize_t ChildWrite(int fd, const void* data, size_t size) {
  return syscall(SYS_write, fd, data, size);
}
void ChildClose(int fd) { syscall(SYS_close, fd); }

[[noreturn]] void ReportAndExit(int sock, int stage, int err, int dir = 0) {
  ChildError error;
  error.stage = stage;
  error.err = err;
  error.dir = dir;
  ssize_t ignored = ChildWrite(sock, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

// Puts `fd` at `target` (0, 1 or 2); the caller closes `fd` when it is not a standard stream.
bool MoveTo(int fd, int target) {
  if (fd != target && dup2(fd, target) < 0) return false;
  return true;
}

// The replica's user, with no supplementary groups, and no way to gain privileges by exec
// (setuid binaries, file capabilities). Async-signal-safe calls only. The raw system calls, as
// posix_spawn makes them: glibc's setgroups/setresgid/setresuid in a multithreaded process
// change every thread's ids (they signal each thread listed in the agent's memory, which the
// child shares); the system call changes the calling task's alone.
void DropPrivileges(const ChildPlan& plan, int sock) {
  if (plan.uid >= 0) {
    if (syscall(SYS_setgroups, 0, nullptr) != 0) ReportAndExit(sock, kGroups, errno);
    gid_t gid = static_cast<gid_t>(plan.gid >= 0 ? plan.gid : plan.uid);
    if (syscall(SYS_setresgid, gid, gid, gid) != 0) ReportAndExit(sock, kGid, errno);
    uid_t uid = static_cast<uid_t>(plan.uid);
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) ReportAndExit(sock, kUid, errno);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ReportAndExit(sock, kNoNewPrivs, errno);
}

// Moves the calling process into every directory of its cgroup ("0" is the writer itself, on
// cgroup v1 and v2 alike). Async-signal-safe calls only.
void JoinCgroup(const ChildPlan& plan, int sock) {
  for (size_t i = 0; i < plan.procs_files.size(); ++i) {
    const int dir = static_cast<int>(i);
    int fd = ChildOpen(plan.procs_files[i].c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) ReportAndExit(sock, kJoinOpen, errno, dir);
    ssize_t n;
    do {
      n = ChildWrite(fd, "0", 1);
    } while (n < 0 && errno == EINTR);
    int err = n < 0 ? errno : EIO;
    ChildClose(fd);
    if (n != 1) ReportAndExit(sock, kJoinWrite, err, dir);
  }
}

// The child between clone and exec, on its own stack in the agent's memory, the agent's thread
// suspended (the other threads run on). Async-signal-safe calls only. Every signal is blocked
// on entry (the agent blocked them around the clone): no handler of the agent's may run here.
[[noreturn]] void RunChild(const ChildPlan& plan, int sock) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (setsid() < 0) ReportAndExit(sock, kSetsid, errno);
  JoinCgroup(plan, sock);

  int null_fd = ChildOpen("/dev/null", O_RDONLY);
  if (null_fd < 0 || !MoveTo(null_fd, STDIN_FILENO)) ReportAndExit(sock, kStdin, errno);
  if (null_fd > STDERR_FILENO) ChildClose(null_fd);
  // Opened before chdir: a relative log path is relative to the agent, like every other path.
  int log_fd = ChildOpen(plan.log_path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, 0600);
  if (log_fd < 0 || !MoveTo(log_fd, STDOUT_FILENO) || !MoveTo(log_fd, STDERR_FILENO)) {
    ReportAndExit(sock, kLog, errno);
  }
  if (log_fd > STDERR_FILENO) ChildClose(log_fd);
  int keep = STDERR_FILENO;
  if (!plan.status_path.empty()) {
    int status_fd = ChildOpen(plan.status_path.c_str(),
                              O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (status_fd < 0 || !MoveTo(status_fd, kStatusFd)) ReportAndExit(sock, kStatus, errno);
    if (status_fd != kStatusFd) ChildClose(status_fd);
    fcntl(kStatusFd, F_SETFD, 0);  // dup2 cleared O_CLOEXEC, an fd opened as 3 still has it
    keep = kStatusFd;
  }
  DropPrivileges(plan, sock);
  // Entered as the replica's user: a directory it may not enter stays closed to it.
  if (!plan.workdir.empty() && chdir(plan.workdir.c_str()) != 0) {
    ReportAndExit(sock, kWorkdir, errno);
  }
  // Descriptors the agent opened without O_CLOEXEC stay out of the replica.
  close_range(static_cast<unsigned>(keep) + 1, ~0U, CLOSE_RANGE_CLOEXEC);

  int err = ENOENT;
  bool denied = false;
  for (const std::string& candidate : plan.candidates) {
    execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
    err = errno;
    if (err == EACCES) {
      denied = true;
      continue;
    }
    if (err == ENOENT || err == ENOTDIR || err == ESTALE || err == ENODEV || err == ETIMEDOUT) {
      continue;
    }
    break;  // found but not runnable (ENOEXEC, E2BIG, ...): as execvp, stop here
  }
  ReportAndExit(sock, kExec, denied && (err == ENOENT || err == ENOTDIR) ? EACCES : err);
}

struct ChildArgs {
  const ChildPlan* plan;
  int sock;
};

int ChildMain(void* arg) {
  const ChildArgs* args = static_cast<const ChildArgs*>(arg);
  RunChild(*args->plan, args->sock);
}

// The child's stack: mapped for one launch, with an inaccessible page below it, so that an
// overflow faults instead of writing into whatever the agent mapped there.
class ChildStack {
 public:
  ChildStack() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = kChildStackBytes + page;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      err_ = errno;
      return;
    }
    base_ = static_cast<char*>(base);
    if (mprotect(base_, page, PROT_NONE) != 0) err_ = errno;
  }
  ~ChildStack() {
    if (base_ == nullptr) return;
    // The child's frames never returned (it exec'd or _exit'ed): under AddressSanitizer their
    // redzones stay poisoned in the shadow it shares with us, and the next stack mapped here
    // would inherit them. A no-op in other builds.
    ASAN_UNPOISON_MEMORY_REGION(base_, bytes_);
    munmap(base_, bytes_);
  }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;

  int error() const { return err_; }
  void* top() const { return base_ + bytes_; }  // the stack grows down, on every Linux we run on

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  int err_ = 0;
};

// The child's process while it shares the agent's memory: clone(CLONE_VM | CLONE_VFORK), which
// returns once the child has exec'd or exited. Every signal is blocked in the agent's thread
// around the clone, so the child starts with them blocked and resets their handlers before it
// takes any. The child writes errno, which is this thread's: read it only when clone failed.
absl::StatusOr<pid_t> CloneChild(const ChildPlan& plan, int sock) {
  ChildStack stack;
  if (stack.error() != 0) {
    return absl::UnavailableError(
        absl::StrCat("mmap the child's stack: ", ErrnoText(stack.error())));
  }
  ChildArgs args{&plan, sock};
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = clone(ChildMain, stack.top(), kCloneFlags, &args);
  int err = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return absl::UnavailableError(absl::StrCat("clone: ", ErrnoText(err)));
  return pid;
}

// Why the child could not enter its cgroup, in the words of Cgroups::Join.
absl::Status JoinErrorStatus(const ChildPlan& plan, const ChildError& error) {
  std::string path = error.dir >= 0 && static_cast<size_t>(error.dir) < plan.procs_files.size()
                         ? plan.procs_files[static_cast<size_t>(error.dir)]
                         : std::string("cgroup.procs");
  std::string message = absl::StrCat(error.stage == kJoinOpen ? "open " : "write \"0\" to ", path,
                                     ": ", ErrnoText(error.err));
  if (error.err == ENOENT) return absl::NotFoundError(message);
  if (error.err == EACCES || error.err == EPERM || error.err == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);
}

absl::Status ChildErrorStatus(const ChildPlan& plan, const ChildError& error) {
  std::string why = ErrnoText(error.err);
  switch (error.stage) {
    case kExec:
      if (error.err == ENOENT) {
        if (plan.command.find('/') != std::string::npos) {
          return absl::NotFoundError(absl::StrCat("command not found: ", plan.command));
        }
        return absl::NotFoundError(
            absl::StrCat("command not found: ", plan.command, " (PATH=", plan.path, ")"));
      }
      if (error.err == EACCES) {
        return absl::PermissionDeniedError(
            absl::StrCat("cannot execute ", plan.command, ": ", why));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("cannot execute ", plan.command, ": ", why));
    case kLog:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open log file ", plan.log_path, ": ", why));
    case kWorkdir:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot change to workdir ", plan.workdir, ": ", why));
    case kStdin:
      return absl::InternalError(absl::StrCat("cannot open /dev/null as stdin: ", why));
    case kStatus:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open status file ", plan.status_path, ": ", why));
    case kGroups:
      return absl::PermissionDeniedError(
          absl::StrCat("cannot drop supplementary groups (setgroups): ", why));
    case kGid:
      return absl::PermissionDeniedError(
          absl::StrCat("cannot switch to gid ", plan.gid >= 0 ? plan.gid : plan.uid, ": ", why));
    case kUid:
      return absl::PermissionDeniedError(
          absl::StrCat("cannot switch to uid ", plan.uid, ": ", why));
    case kNoNewPrivs:
      return absl::InternalError(absl::StrCat("prctl(PR_SET_NO_NEW_PRIVS): ", why));
    case kJoinOpen:
    case kJoinWrite:
      return JoinErrorStatus(plan, error);
    default:
      return absl::InternalError(absl::StrCat("setsid failed: ", why));
  }
}

// Both ends above the standard streams and the status descriptor, so the child's dup2 onto 0-3
// never clobbers its end.
absl::Status MakeSocketPair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::UnavailableError(absl::StrCat("socketpair: ", ErrnoText(errno)));
  }
  for (int i = 0; i < 2; ++i) {
    if (fds[i] > kStatusFd) continue;
    int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, kStatusFd + 1);
    int err = errno;
    close(fds[i]);
    fds[i] = moved;
    if (moved < 0) {
      if (fds[1 - i] >= 0) close(fds[1 - i]);
      return absl::UnavailableError(absl::StrCat("fcntl(F_DUPFD_CLOEXEC): ", ErrnoText(err)));
    }
  }
  return absl::OkStatus();
}

ExitStatus Decode(int wait_status) {
  ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.exited = true;
    status.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
  }
  return status;
}

struct ProcStat {
  char state = '?';
  pid_t pgid = 0;
  pid_t sid = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid pgrp session ..."; comm may hold blanks and ')'.
std::optional<ProcStat> ReadStat(pid_t pid) {
  std::string path = absl::StrCat("/proc/", pid, "/stat");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  absl::string_view text(buf, static_cast<size_t>(n));
  size_t paren = text.rfind(')');
  if (paren == absl::string_view::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(paren + 1), ' ', absl::SkipEmpty());
  ProcStat stat;
  if (fields.size() < 4 || fields[0].empty()) return std::nullopt;
  stat.state = fields[0][0];
  if (!absl::SimpleAtoi(fields[2], &stat.pgid) || !absl::SimpleAtoi(fields[3], &stat.sid)) {
    return std::nullopt;
  }
  return stat;
}

// Running or sleeping, not a zombie waiting for its parent.
bool Live(const std::optional<ProcStat>& stat) {
  return stat.has_value() && stat->state != 'Z' && stat->state != 'X';
}

// Live processes whose process group or session is `leader`'s.
std::vector<pid_t> GroupMembersFromProc(pid_t leader) {
  std::vector<pid_t> pids;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return pids;
  while (dirent* entry = readdir(dir)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid <= 0) continue;
    std::optional<ProcStat> stat = ReadStat(pid);
    if (Live(stat) && (stat->pgid == leader || stat->sid == leader)) pids.push_back(pid);
  }
  closedir(dir);
  return pids;
}

// Who a replica runs as, for its record.
std::string Identity(const LaunchSpec& spec) {
  if (spec.uid < 0) return absl::StrCat("uid ", getuid(), " (the agent's own), no_new_privs");
  return absl::StrCat("uid ", spec.uid, " gid ", spec.gid >= 0 ? spec.gid : spec.uid,
                      ", no supplementary groups, no_new_privs");
}

class PosixLauncher final : public ProcessLauncher {
 public:
  explicit PosixLauncher(std::unique_ptr<Cgroups> cgroups) : cgroups_(std::move(cgroups)) {}

  absl::StatusOr<ProcessHandle> Launch(const LaunchSpec& spec) override {
    absl::StatusOr<ChildPlan> plan = MakePlan(spec);
    if (!plan.ok()) return plan.status();
    const std::string& name = spec.group_name;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("LaunchSpec.group_name \"", name, "\" is not one path component"));
    }
    if (spec.limits.cpu_milli < 0 || spec.limits.memory_mib < 0 || spec.limits.pids_max < 0) {
      return absl::InvalidArgumentError("LaunchSpec.limits must not be negative");
    }

    Enforcement unconfined{"none", cgroups_->summary(), "", ""};
    if (cgroups_->available()) {
      absl::StatusOr<CgroupGroup> group = cgroups_->Create(
          name, spec.limits, spec.restrict_devices ? &spec.allowed_devices : nullptr);
      if (group.ok()) {
        for (const std::string& dir : group->dirs) {
          plan->procs_files.push_back(dir + "/cgroup.procs");
        }
        absl::Status join_error;
        absl::StatusOr<pid_t> pid = Spawn(*plan, &join_error);
        plan->procs_files.clear();
        if (pid.ok()) {
          ProcessHandle handle{*pid, group->dirs.front(), group->enforcement};
          handle.enforcement.identity = Identity(spec);
          return handle;
        }
        Cgroups::Remove(group->dirs, kCleanupWait).IgnoreError();
        if (join_error.ok()) return pid.status();
        unconfined.detail =
            absl::StrCat("none: ", cgroups_->mechanism(),
                         " available but joining the group failed: ", join_error.message());
      } else if (absl::IsAlreadyExists(group.status()) || absl::IsInvalidArgument(group.status())) {
        return group.status();
      } else {
        unconfined.detail =
            absl::StrCat("none: ", cgroups_->mechanism(),
                         " available but creating the group failed: ", group.status().message());
      }
    }
    absl::StatusOr<pid_t> pid = Spawn(*plan, nullptr);
    if (!pid.ok()) return pid.status();
    unconfined.identity = Identity(spec);
    if (spec.restrict_devices) {
      unconfined.devices =
          "not enforced: no cgroup, so the replica can open every NVIDIA device "
          "its file modes allow";
    }
    return ProcessHandle{*pid, "", unconfined};
  }

  absl::StatusOr<std::optional<ExitStatus>> Poll(const ProcessHandle& handle) override {
    if (handle.pid <= 0) return absl::InvalidArgumentError("ProcessHandle.pid is not set");
    ExitStatus ended;
    switch (Reap(handle.pid, &ended)) {
      case ChildState::kRunning:
        return std::optional<ExitStatus>();
      case ChildState::kEnded:
        return std::optional<ExitStatus>(ended);
      case ChildState::kNotChild:
        break;
    }
    // Adopted: its exit status went to its parent; only whether it still runs is known.
    if (LeaderAlive(handle)) return std::optional<ExitStatus>();
    return std::optional<ExitStatus>(ExitStatus{});
  }

  absl::Status Stop(const ProcessHandle& handle, int64_t grace_ms) override {
    if (handle.pid <= 0) return absl::InvalidArgumentError("ProcessHandle.pid is not set");
    std::vector<pid_t> members = Members(handle);
    if (members.empty()) {
      Reap(handle.pid);
      return absl::OkStatus();
    }
    Signal(handle, members, SIGTERM);
    Signal(handle, members, SIGCONT);  // a stopped process only acts on SIGTERM once continued
    const auto grace_end = Clock::now() + milliseconds(std::max<int64_t>(grace_ms, 0));
    for (;;) {
      Reap(handle.pid);
      members = Members(handle);
      if (members.empty()) return absl::OkStatus();
      auto now = Clock::now();
      if (now >= grace_end) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(kPollStep, grace_end - now));
    }
    const auto kill_end = Clock::now() + kKillWait;
    while (!members.empty() && Clock::now() < kill_end) {
      Signal(handle, members, SIGKILL);  // again each round: members may still fork
      std::this_thread::sleep_for(milliseconds(2));
      Reap(handle.pid);
      members = Members(handle);
    }
    return absl::OkStatus();
  }

  absl::Status Cleanup(const ProcessHandle& handle) override {
    if (handle.pid > 0) Reap(handle.pid);
    absl::Status status = Cgroups::Remove(cgroups_->DirsOf(handle.group_path), kCleanupWait);
    if (status.ok() && handle.pid > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      ended_.erase(handle.pid);
    }
    return status;
  }

  SweptGroups Sweep(const std::string& prefix, const std::set<std::string>& keep) override {
    SweptGroups swept;
    for (const std::string& group : cgroups_->GroupsNamed(prefix)) {
      if (keep.count(group)) continue;
      std::vector<std::string> dirs = cgroups_->DirsOf(group);
      std::vector<pid_t> pids = Cgroups::Procs(dirs);
      if (!pids.empty()) {
        Cgroups::Kill(dirs);  // cgroup.kill where there is one; every member by pid besides
        for (pid_t pid : pids) kill(pid, SIGKILL);
      }
      absl::Status removed = Cgroups::Remove(dirs, kCleanupWait);
      if (!removed.ok()) {
        swept.failed.push_back(absl::StrCat(group, ": ", removed.message()));
      } else {
        (pids.empty() ? swept.removed : swept.killed).push_back(group);
      }
    }
    return swept;
  }

  int64_t OomKills(const ProcessHandle& handle) override {
    int64_t kills = 0;
    for (const std::string& dir : cgroups_->DirsOf(handle.group_path)) {
      for (const char* file : {"/memory.events", "/memory.oom_control"}) {
        std::ifstream in(dir + file);
        std::string key;
        int64_t value = 0;
        while (in >> key >> value) {
          if (key == "oom_kill") kills = std::max(kills, value);
        }
      }
    }
    return kills;
  }

  ResourceUse Usage(const ProcessHandle& handle) override {
    ResourceUse use;
    std::vector<std::string> read;
    auto take = [&](int64_t& into, std::optional<int64_t> value, int64_t scale, const char* file) {
      if (!value || into >= 0) return;
      into = *value / scale;
      read.push_back(file);
    };
    for (const std::string& dir : cgroups_->DirsOf(handle.group_path)) {
      take(use.cpu_usec, KeyIn(dir + "/cpu.stat", "usage_usec"), 1, "cpu.stat usage_usec");
      take(use.cpu_usec, NumberIn(dir + "/cpuacct.usage"), 1000, "cpuacct.usage");
      take(use.peak_memory_bytes, NumberIn(dir + "/memory.peak"), 1, "memory.peak");
      take(use.peak_memory_bytes, NumberIn(dir + "/memory.max_usage_in_bytes"), 1,
           "memory.max_usage_in_bytes");
    }
    use.source = absl::StrJoin(read, ", ");
    return use;
  }

  bool Alive(const ProcessHandle& handle) override {
    if (handle.pid <= 0) return false;
    if (Reap(handle.pid) == ChildState::kRunning) return true;
    return !Members(handle).empty();
  }

  bool Owns(const ProcessHandle& handle, int64_t pid) override {
    if (handle.pid <= 0 || pid <= 0) return false;
    std::vector<pid_t> members = Members(handle);
    return std::binary_search(members.begin(), members.end(), static_cast<pid_t>(pid));
  }

 private:
  enum class ChildState { kRunning, kEnded, kNotChild };

  // Starts the child, which joins the cgroup of `plan.procs_files` (when any) and execs. Join
  // failures come back in `join_error` too, so the caller can retry without a cgroup.
  absl::StatusOr<pid_t> Spawn(const ChildPlan& plan, absl::Status* join_error) {
    int fds[2];
    if (absl::Status s = MakeSocketPair(fds); !s.ok()) return s;
    const int agent_end = fds[0];
    const int child_end = fds[1];
    // Returns once the child has exec'd (its copies of both ends close with the exec) or exited.
    absl::StatusOr<pid_t> pid = CloneChild(plan, child_end);
    close(child_end);
    if (!pid.ok()) {
      close(agent_end);
      return pid.status();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ended_.erase(*pid);  // a pid seen before belongs to this child now
    }
    ChildError error;
    size_t got = 0;
    while (got < sizeof(error)) {
      ssize_t n = read(agent_end, reinterpret_cast<char*>(&error) + got, sizeof(error) - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    close(agent_end);
    if (got < sizeof(error)) return pid;  // exec succeeded: the socket closed with it
    while (waitpid(*pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    absl::Status status = ChildErrorStatus(plan, error);
    if ((error.stage == kJoinOpen || error.stage == kJoinWrite) && join_error != nullptr) {
      *join_error = status;
    }
    return status;
  }

  // Reaps `pid` when it is our child and has ended, keeping its status for Poll.
  ChildState Reap(pid_t pid, ExitStatus* ended = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = ended_.find(pid); it != ended_.end()) {
      if (ended != nullptr) *ended = it->second;
      return ChildState::kEnded;
    }
    int wait_status = 0;
    pid_t r;
    do {
      r = waitpid(pid, &wait_status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return ChildState::kRunning;
    if (r == pid) {
      ended_[pid] = Decode(wait_status);
      if (ended != nullptr) *ended = ended_[pid];
      return ChildState::kEnded;
    }
    return ChildState::kNotChild;
  }

  // The handle's process itself runs, and is the one launched (not a reuse of its pid): in the
  // replica's cgroup, or without one, the leader of its own process group.
  bool LeaderAlive(const ProcessHandle& handle) {
    std::optional<ProcStat> stat = ReadStat(handle.pid);
    if (!Live(stat)) return false;
    std::vector<std::string> dirs = cgroups_->DirsOf(handle.group_path);
    if (dirs.empty()) return stat->pgid == handle.pid;
    std::vector<pid_t> procs = Cgroups::Procs(dirs);
    return std::binary_search(procs.begin(), procs.end(), handle.pid);
  }

  // Every live process of the replica: its cgroup's, plus those in its process group or
  // session. Without a cgroup the process group alone says who belongs.
  std::vector<pid_t> Members(const ProcessHandle& handle) {
    std::vector<pid_t> members;
    std::vector<std::string> dirs = cgroups_->DirsOf(handle.group_path);
    bool group_is_ours = dirs.empty();
    for (pid_t pid : Cgroups::Procs(dirs)) {
      std::optional<ProcStat> stat = ReadStat(pid);
      if (!Live(stat)) continue;
      members.push_back(pid);
      if (pid == handle.pid || stat->pgid == handle.pid) group_is_ours = true;
    }
    // A process group id of a replica whose cgroup holds none of it may already name someone
    // else's group.
    if (group_is_ours) {
      for (pid_t pid : GroupMembersFromProc(handle.pid)) members.push_back(pid);
    }
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    return members;
  }

  void Signal(const ProcessHandle& handle, const std::vector<pid_t>& members, int sig) {
    bool group_alive = false;
    for (pid_t pid : members) {
      std::optional<ProcStat> stat = ReadStat(pid);
      if (stat.has_value() && stat->pgid == handle.pid) group_alive = true;
    }
    if (sig == SIGKILL) Cgroups::Kill(cgroups_->DirsOf(handle.group_path));
    if (group_alive) kill(-handle.pid, sig);
    // Members that left the process group (setsid, setpgid) but not the cgroup or session.
    for (pid_t pid : members) kill(pid, sig);
  }

  const std::unique_ptr<Cgroups> cgroups_;
  std::mutex mu_;
  std::map<pid_t, ExitStatus> ended_;  // children reaped, until Cleanup or pid reuse
};

}  // namespace

std::unique_ptr<ProcessLauncher> MakePosixLauncherWithCgroups(std::unique_ptr<Cgroups> cgroups) {
  return std::make_unique<PosixLauncher>(std::move(cgroups));
}

std::unique_ptr<ProcessLauncher> MakePosixLauncher(const std::string& root_name) {
  return MakePosixLauncherWithCgroups(Cgroups::Detect(root_name));
}

}  // namespace carve
