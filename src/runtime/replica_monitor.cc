#include "runtime/replica_monitor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace carve {
namespace {

// glibc's list of variables ignored for setuid programs (they steer the loader and libc), plus
// every LD_ variable.
bool SteersLoader(const std::string& name) {
  static const char* const kNames[] = {
      "GCONV_PATH",       "GETCONF_DIR",       "HOSTALIASES",     "LOCALDOMAIN",  "LOCPATH",
      "MALLOC_ARENA_MAX", "MALLOC_ARENA_TEST", "MALLOC_PERTURB_", "MALLOC_TRACE", "NIS_PATH",
      "NLSPATH",          "RESOLV_HOST_CONF",  "RES_OPTIONS",     "TMPDIR",       "TZDIR",
      "GLIBC_TUNABLES"};
  if (absl::StartsWith(name, "LD_")) return true;
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

// In the command's process: NAME=VALUE for every deferred CARVE_EXEC_ENV_NAME=VALUE.
void ApplyDeferredEnv() {
  std::vector<std::pair<std::string, std::string>> deferred;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos || !absl::StartsWith(entry, kDeferredEnvPrefix)) continue;
    deferred.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& [key, value] : deferred) {
    unsetenv(key.c_str());
    setenv(key.substr(std::strlen(kDeferredEnvPrefix)).c_str(), value.c_str(), 1);
  }
}

void WriteStatus(const std::string& status_file, int status_fd, const std::string& line) {
  if (status_fd >= 0) {
    bool ok = ::ftruncate(status_fd, 0) == 0 &&
              ::pwrite(status_fd, line.data(), line.size(), 0) == static_cast<ssize_t>(line.size());
    ::fsync(status_fd);
    if (!ok) std::fprintf(stderr, "carve: cannot record the exit status: %s\n", strerror(errno));
    return;
  }
  if (status_file.empty()) return;
  std::string tmp = status_file + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::fsync(fd);
    ::close(fd);
    if (ok) ::rename(tmp.c_str(), status_file.c_str());
  }
}

}  // namespace

std::map<std::string, std::string> DeferLoaderEnv(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : env) {
    out[SteersLoader(key) ? kDeferredEnvPrefix + key : key] = value;
  }
  return out;
}

int MonitorReplica(const std::string& status_file, const std::vector<std::string>& argv,
                   int status_fd) {
  if (argv.empty()) {
    std::fprintf(stderr, "carve: internal-run needs a command\n");
    return 127;
  }
  if (status_fd >= 0) ::fcntl(status_fd, F_SETFD, FD_CLOEXEC);  // the command never holds it
  // The command runs as our uid: not dumpable, we cannot be ptraced by it (nor our /proc read),
  // so it cannot write through the status fd or forge its outcome. exec makes it dumpable again.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_IGN);
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "carve: cannot fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    // carve ignores SIGPIPE for itself (main.cc); the command gets every default back.
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) signal(sig, SIG_DFL);
    ApplyDeferredEnv();
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "carve: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  std::string line = WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status), "\n")
                                       : absl::StrCat("signal ", WTERMSIG(status), "\n");
  WriteStatus(status_file, status_fd, line);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<ExitStatus> ReadReplicaStatus(const std::string& status_file) {
  std::ifstream in(status_file);
  std::string kind;
  int value = 0;
  if (!(in >> kind >> value)) return std::nullopt;
  if (kind == "exit") return ExitStatus{true, value, 0};
  if (kind == "signal") return ExitStatus{false, 0, value};
  return std::nullopt;
}

}  // namespace carve
