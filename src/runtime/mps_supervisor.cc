#include "runtime/mps_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/clock.h"

extern char** environ;

namespace carve {

using json = nlohmann::json;

namespace {

bool ProcessAlive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return !(paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z');
}

// A directory every job's uid may enter (`mode` 0755), or also write in (01777: the pipe and log
// directories, where the MPS server the daemon starts as each client's uid makes its files).
absl::Status MakeDir(const std::string& dir, mode_t mode) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  // The default lies under /tmp at a name anyone can compute: a symlink or another user's
  // directory planted there would get the modes below (and the daemon's pipes) from the agent.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir,
        ": not a directory of the agent's own user (a symlink or another user's: remove it, "
        "or choose --mps-dir)"));
  }
  if (::chmod(dir.c_str(), mode) != 0) {
    return absl::InternalError(absl::StrCat(dir, ": chmod: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// What a spawned child gets: argv and the environment (the agent's, with `env` over it).
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv, envp;
  ExecArgs(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string var = *e;
      if (!env.count(var.substr(0, var.find('=')))) storage.push_back(var);
    }
    for (const auto& [k, v] : env) storage.push_back(k + "=" + v);
    size_t vars = storage.size();
    for (const std::string& a : args) storage.push_back(a);
    for (size_t i = 0; i < storage.size(); ++i) {
      (i < vars ? envp : argv).push_back(storage[i].data());
    }
    argv.push_back(nullptr);
    envp.push_back(nullptr);
  }
};

// Starts `a` in a process group of its own, with `in` as its standard input and `out` as its
// standard output and error, and no signal blocked (the agent blocks the signals it waits for; the
// daemon must not inherit that). posix_spawnp, not fork: the agent may be the large `carve dev`
// server, whose page tables a fork copies. Returns the pid, or the error (errno) of the spawn,
// the command's exec included.
absl::StatusOr<pid_t> SpawnChild(ExecArgs& a, int in, int out) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int err = ::posix_spawnp(&pid, a.argv[0], &actions, &attr, a.argv.data(), a.envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return absl::UnavailableError(std::strerror(err));
  return pid;
}

// Runs `argv` to its end (at most `timeout_ms`) with `input` on its standard input; returns its
// exit code (-1: killed or timed out) and what it printed.
std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::map<std::string, std::string>& env,
                                       const std::string& input, int timeout_ms) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return {-1, std::strerror(errno)};
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return {-1, std::strerror(errno)};
  }
  ExecArgs args(argv, env);
  absl::StatusOr<pid_t> spawned = SpawnChild(args, in[0], out[1]);
  ::close(in[0]);
  ::close(out[1]);
  if (!spawned.ok()) {
    ::close(in[1]);
    ::close(out[0]);
    return {127, absl::StrCat("cannot run the MPS control program: ", spawned.status().message())};
  }
  const pid_t pid = *spawned;
  if (!input.empty()) {
    // A command that exits without reading must not raise SIGPIPE in the agent.
    sigset_t pipe_signal, old;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &old);
    (void)!::write(in[1], input.data(), input.size());
    timespec zero{0, 0};
    while (sigtimedwait(&pipe_signal, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  ::close(in[1]);
  std::string output;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  int status = 0;
  bool exited = false;
  // Until the output ends or the command exits (a daemon it left may hold the pipe open).
  while (!exited && std::chrono::steady_clock::now() < until) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      ssize_t n = ::read(out[0], buf, sizeof(buf));
      if (n > 0) {
        output.append(buf, static_cast<size_t>(n));
        continue;
      }
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  for (pollfd p{out[0], POLLIN, 0}; ::poll(&p, 1, 0) > 0;) {  // what it wrote before exiting
    ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (!exited && ::waitpid(pid, &status, WNOHANG) != pid) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return {-1, output + " (timed out)"};
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

MpsSupervisor::MpsSupervisor(Options options) : options_(std::move(options)) {}

void MpsSupervisor::Start(std::vector<DiscoveredGpu>& gpus) {
  for (const DiscoveredGpu& g : gpus) {
    if (g.mig_enabled || (options_.simulated && g.mode != "shared")) continue;
    if (g.mode == "shared") shared_.insert(g.index);
    Daemon d;
    d.gpu = g.index;
    d.uuid = g.uuid;
    d.pipe_dir = absl::StrCat(options_.root, "/", g.index, "/pipe");
    d.log_dir = absl::StrCat(options_.root, "/", g.index, "/log");
    absl::Status s = Launch(d);
    d.state = s.ok() ? DaemonState::kRunning : DaemonState::kUnavailable;
    d.error = s.ok() ? "" : std::string(s.message());
    daemons_[g.index] = d;
  }
  Supervise(gpus);
}

pid_t MpsSupervisor::ReadPid(const Daemon& d) const {
  std::ifstream in(d.pipe_dir + "/nvidia-cuda-mps-control.pid");
  int64_t pid = 0;
  if (in >> pid && pid > 0) return static_cast<pid_t>(pid);
  // The simulation always writes the file (and its clients run the same executable).
  if (options_.simulated) return 0;
  // No pid file: the control program's process whose environment names this pipe directory
  // (looked for once the -d launcher has exited, so it is the daemon).
  std::string name = std::filesystem::path(options_.control.empty() ? "" : options_.control[0])
                         .filename()
                         .string();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    int64_t candidate = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &candidate)) continue;
    std::error_code link_ec;
    auto exe = std::filesystem::read_symlink(entry.path() / "exe", link_ec);
    if (link_ec || exe.filename().string() != name) continue;
    std::ifstream env(entry.path() / "environ", std::ios::binary);
    std::string vars((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    if (vars.find("CUDA_MPS_PIPE_DIRECTORY=" + d.pipe_dir + '\0') != std::string::npos) {
      return static_cast<pid_t>(candidate);
    }
  }
  return 0;
}

bool MpsSupervisor::Alive(const Daemon& d) const {
  // The pid file is in a directory every uid may write: a pid counts only when its process runs
  // as the agent's own user (a tenant could plant another's, to be adopted, or killed as root).
  struct stat st {};
  return d.pid > 0 && ProcessAlive(d.pid) && ReadPid(d) == d.pid &&
         ::stat(absl::StrCat("/proc/", d.pid).c_str(), &st) == 0 && st.st_uid == ::geteuid();
}

absl::Status MpsSupervisor::Launch(Daemon& d) {
  if (options_.control.empty()) return absl::FailedPreconditionError("no MPS control program");
  // Every level on the way too: made under the agent's umask, <root>/<gpu> was 0700 and no
  // tenant's client could reach the pipe below it (an H200, 2026-12-04).
  for (const std::string& dir : {options_.root, absl::StrCat(options_.root, "/", d.gpu)}) {
    if (absl::Status s = MakeDir(dir, 0755); !s.ok()) return s;
  }
  for (const std::string& dir : {d.pipe_dir, d.log_dir}) {
    if (absl::Status s = MakeDir(dir, 01777); !s.ok()) return s;
  }
  if (options_.simulated) {  // the simulated daemon lives as long as the agent that supervises it
    std::ofstream(d.pipe_dir + "/supervisor.pid") << ::getpid() << "\n";
  }
  d.pid = ReadPid(d);
  if (Alive(d)) return absl::OkStatus();  // adopted: it outlived an agent restart
  std::error_code ec;
  std::filesystem::remove(d.pipe_dir + "/nvidia-cuda-mps-control.pid", ec);
  std::map<std::string, std::string> env = options_.env;
  env["CUDA_VISIBLE_DEVICES"] = d.uuid;
  env["CUDA_MPS_PIPE_DIRECTORY"] = d.pipe_dir;
  env["CUDA_MPS_LOG_DIRECTORY"] = d.log_dir;
  // The daemon keeps the agent's umask (077): it makes its `control` socket 0666 itself, and
  // `control_privileged` (quit, default limits) then stays root's.
  std::vector<std::string> argv = options_.control;
  argv.push_back("-d");
  auto [code, output] = RunCommand(argv, env, "", 10000);
  if (code != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot start the MPS control daemon (", absl::StrJoin(argv, " "),
                     "): ", code < 0 ? "killed or timed out" : absl::StrCat("exit code ", code),
                     " ", absl::StripAsciiWhitespace(output)));
  }
  for (int i = 0; i < 50; ++i) {  // the daemon writes its pid file once it listens
    d.pid = ReadPid(d);
    if (Alive(d)) {
      d.started_us = WallUs();
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("the MPS control daemon (", argv[0],
                                             ") started but no live pid is in ", d.pipe_dir,
                                             "/nvidia-cuda-mps-control.pid"));
}

void MpsSupervisor::Supervise(std::vector<DiscoveredGpu>& gpus) {
  for (auto& [index, d] : daemons_) {
    if (d.state == DaemonState::kRunning && !Alive(d)) {
      d.state = DaemonState::kDied;  // reported unhealthy once, then restarted
      d.error = absl::StrCat("mps daemon died (pid ", d.pid, ")");
    } else if (d.state == DaemonState::kDied || d.state == DaemonState::kFailed) {
      std::string died = d.error.substr(0, d.error.find(';'));
      absl::Status s = Launch(d);
      d.state = s.ok() ? DaemonState::kRunning : DaemonState::kFailed;
      d.error = s.ok() ? "" : absl::StrCat(died, "; restart failed: ", s.message());
      if (s.ok()) ++d.restarts;
    }
  }
  for (DiscoveredGpu& g : gpus) {
    auto it = daemons_.find(g.index);
    if (it == daemons_.end()) continue;
    const Daemon& d = it->second;
    if (d.state == DaemonState::kRunning) {
      g.share_enforcement = Enforcement();
      continue;
    }
    g.share_enforcement = "none: " + d.error;
    if (d.state != DaemonState::kUnavailable && shared_.count(g.index) && g.health == "healthy") {
      g.health = "unhealthy";
      g.health_reason = d.error;
    }
  }
}

void MpsSupervisor::StopAll() {
  for (auto& [index, d] : daemons_) {
    if (!Alive(d)) continue;
    (void)RunControl(d, "quit");
    for (int i = 0; i < 20 && ProcessAlive(d.pid); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (ProcessAlive(d.pid)) ::kill(d.pid, SIGTERM);
  }
}

namespace {

std::string Control(const std::vector<std::string>& control,
                    const std::map<std::string, std::string>& env, const std::string& command) {
  auto [code, output] = RunCommand(control, env, command + "\n", 3000);
  std::string text(absl::StripAsciiWhitespace(output));
  return code == 0 ? text : absl::StrCat("error (exit ", code, "): ", text);
}

}  // namespace

std::map<std::string, std::string> MpsSupervisor::ControlEnv(const Daemon& d) const {
  std::map<std::string, std::string> env = options_.env;
  env["CUDA_MPS_PIPE_DIRECTORY"] = d.pipe_dir;
  env["CUDA_MPS_LOG_DIRECTORY"] = d.log_dir;
  return env;
}

std::string MpsSupervisor::RunControl(const Daemon& d, const std::string& command) const {
  return Control(options_.control, ControlEnv(d), command);
}

MpsSupervisor::ClientQuery MpsSupervisor::QueryClients(int gpu) const {
  ClientQuery q;
  q.gpu = gpu;
  const Daemon* d = Find(gpu);
  if (d == nullptr || d->state != DaemonState::kRunning || options_.simulated) {
    q.unavailable = absl::StrCat("no MPS daemon runs for GPU ", gpu);
    return q;
  }
  q.control = options_.control;
  q.env = ControlEnv(*d);
  return q;
}

absl::StatusOr<std::set<int64_t>> MpsSupervisor::Clients(const ClientQuery& query) {
  if (!query.unavailable.empty()) return absl::FailedPreconditionError(query.unavailable);
  std::set<int64_t> out;
  // A list that could not be read is an error, never an empty list (which would read as "no
  // client", and a replica's process as one that bypassed MPS).
  auto lines = [&](const std::string& command) -> absl::StatusOr<std::vector<std::string>> {
    const std::string text = Control(query.control, query.env, command);
    if (absl::StartsWith(text, "error")) {
      return absl::UnavailableError(absl::StrCat(command, ": ", text));
    }
    return absl::StrSplit(text, '\n', absl::SkipEmpty());
  };
  auto servers = lines("get_server_list");
  if (!servers.ok()) return servers.status();
  for (const std::string& server : *servers) {
    int64_t pid = 0;
    if (!absl::SimpleAtoi(server, &pid) || pid <= 0) continue;
    auto clients = lines(absl::StrCat("get_client_list ", pid));
    if (!clients.ok()) return clients.status();
    for (const std::string& client : *clients) {
      int64_t c = 0;
      if (absl::SimpleAtoi(client, &c) && c > 0) out.insert(c);
    }
  }
  return out;
}

const MpsSupervisor::Daemon* MpsSupervisor::Find(int gpu) const {
  auto it = daemons_.find(gpu);
  return it == daemons_.end() ? nullptr : &it->second;
}

std::map<std::string, std::string> MpsSupervisor::ClientEnv(int gpu, int64_t memory_mib,
                                                            int64_t thread_pct) const {
  const Daemon* d = Find(gpu);
  if (d == nullptr || d->state != DaemonState::kRunning) return {};
  // The client sees only its one GPU, as device 0.
  return {{"CUDA_MPS_PIPE_DIRECTORY", d->pipe_dir},
          {"CUDA_MPS_LOG_DIRECTORY", d->log_dir},
          {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", absl::StrCat("0=", memory_mib, "M")},
          {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(thread_pct)}};
}

json MpsSupervisor::Record(int gpu, int64_t memory_mib, int64_t thread_pct,
                           bool best_effort) const {
  const Daemon* d = Find(gpu);
  json out = {{"gpu", gpu}};
  if (d == nullptr || d->state != DaemonState::kRunning || !Alive(*d)) {
    out["enforced"] = "none";
    out["why"] = d == nullptr       ? "no MPS daemon is configured for this GPU"
                 : d->error.empty() ? "the MPS daemon is not running"
                                    : d->error;
    out["isolation"] = best_effort ? "best-effort" : "enforced";
    // Asked for, not applied: nothing here may read as a cap.
    out["requested_not_enforced"] = {{"memory_mib", memory_mib}, {"thread_pct", thread_pct}};
    return out;
  }
  std::map<std::string, std::string> env = ClientEnv(gpu, memory_mib, thread_pct);
  out["enforced"] = Enforcement();
  out["daemon"] = {
      {"pid", d->pid}, {"state", "alive"}, {"pipe_dir", d->pipe_dir}, {"restarts", d->restarts}};
  // No control command here: it runs on the agent's loop thread at every share's launch, and a
  // hung control program held the heartbeat for its 3 s each time. What MPS serves is read off
  // that thread while the share runs (the agent's client check: `client` or `bypassed`).
  out["limits"] = {{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]},
                   {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"]}};
  out["checked"] =
      absl::StrCat("daemon pid ", d->pid,
                   " alive when the replica started; the limits are given to the "
                   "client in its environment and applied by MPS when it creates its CUDA context "
                   "(the daemon does not report per-client limits)");
  return out;
}

// ---- the simulated MPS control program ----

namespace {

// The pinned memory limit a client gave itself ("0=8192M"), in MiB; -1: none.
int64_t ClientLimitMib(pid_t pid, const std::string& pipe_dir) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
  std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool ours = false;
  int64_t limit = -1;
  for (absl::string_view var : absl::StrSplit(env, '\0')) {
    if (var == "CUDA_MPS_PIPE_DIRECTORY=" + pipe_dir) ours = true;
    if (absl::ConsumePrefix(&var, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=")) {
      size_t eq = var.find('=');
      absl::string_view mib = var.substr(eq == absl::string_view::npos ? 0 : eq + 1);
      if (absl::ConsumeSuffix(&mib, "M") && !absl::SimpleAtoi(mib, &limit)) limit = -1;
    }
  }
  return ours ? limit : -1;
}

// One pass over the simulated device: a client over its cap is refused (killed).
void EnforceCaps(const std::string& device_dir, const std::string& pipe_dir,
                 const std::string& log) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(device_dir, ec)) {
    std::string file = entry.path().filename().string();
    size_t dot = file.rfind('.');
    int64_t pid = 0, mib = 0;
    if (dot == std::string::npos || !absl::SimpleAtoi(file.substr(dot + 1), &pid)) continue;
    if (!ProcessAlive(static_cast<pid_t>(pid))) continue;
    std::ifstream(entry.path()) >> mib;
    int64_t limit = ClientLimitMib(static_cast<pid_t>(pid), pipe_dir);
    if (limit < 0 || mib <= limit) continue;
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    std::filesystem::remove(entry.path(), ec);
    std::ofstream(log, std::ios::app)
        << "client pid " << pid << " (" << file.substr(0, dot) << "): allocation of " << mib
        << " MiB exceeds its pinned device memory limit of " << limit
        << " MiB: out of memory; the client was stopped\n";
  }
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

int SimulatedMpsControl(bool daemon) {
  std::string pipe = Env("CUDA_MPS_PIPE_DIRECTORY");
  std::string logs = Env("CUDA_MPS_LOG_DIRECTORY");
  if (pipe.empty()) {
    std::cerr << "internal-sim-mps: CUDA_MPS_PIPE_DIRECTORY is not set\n";
    return 2;
  }
  std::string pid_file = pipe + "/nvidia-cuda-mps-control.pid";
  if (!daemon) {  // control commands on standard input
    int64_t pid = 0;
    std::ifstream(pid_file) >> pid;
    if (pid <= 0 || !ProcessAlive(static_cast<pid_t>(pid))) {
      std::cout << "Cannot find MPS control daemon process\n";
      return 1;
    }
    std::string command;
    while (std::getline(std::cin, command)) {
      if (command == "quit") ::kill(static_cast<pid_t>(pid), SIGTERM);
      // get_server_list: the simulation runs no servers; it prints none.
    }
    return 0;
  }
  std::string device = Env("CARVE_SIM_GPU_DIR") + "/" + Env("CUDA_VISIBLE_DEVICES");
  pid_t supervisor = static_cast<pid_t>(std::atoi(Env("CARVE_SIM_MPS_SUPERVISOR").c_str()));
  pid_t child = ::fork();
  if (child < 0) return 1;
  if (child > 0) {  // the parent returns once the daemon's pid file is there
    for (int i = 0; i < 100; ++i) {
      int64_t pid = 0;
      std::ifstream(pid_file) >> pid;
      if (pid == child) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 1;
  }
  ::setsid();
  int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
  std::ofstream(pid_file + ".tmp") << ::getpid() << "\n";
  std::filesystem::rename(pid_file + ".tmp", pid_file);
  std::string log = logs + "/control.log";
  std::ofstream(log, std::ios::app) << "simulated MPS control daemon " << ::getpid()
                                    << " started for " << Env("CUDA_VISIBLE_DEVICES") << "\n";
  // The simulation ends with its agent, so that tests leave nothing running: when its pipe
  // directory or pid file is gone, or no agent has supervised it for 10 s. An agent that restarts
  // adopts it, as a real daemon, and names itself in supervisor.pid.
  int64_t unsupervised_ms = 0;
  while (unsupervised_ms < 10'000) {
    int64_t named = 0;
    std::ifstream(pid_file) >> named;
    if (named != ::getpid()) break;
    std::ifstream(pipe + "/supervisor.pid") >> supervisor;
    unsupervised_ms = supervisor <= 0 || ProcessAlive(supervisor) ? 0 : unsupervised_ms + 100;
    EnforceCaps(device, pipe, log);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::_exit(0);
}

}  // namespace carve
