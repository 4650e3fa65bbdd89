#include "runtime/replica_monitor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace carve {

int MonitorReplica(const std::string& status_file, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::fprintf(stderr, "carve: internal-run needs a command\n");
    return 127;
  }
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_IGN);
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "carve: cannot fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
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
  std::string tmp = status_file + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::fsync(fd);
    ::close(fd);
    if (ok) ::rename(tmp.c_str(), status_file.c_str());
  }
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
