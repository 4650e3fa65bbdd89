// The `carve` command line as a user runs it, for integration tests.
#ifndef CARVE_TESTS_INTEGRATION_CLI_H_
#define CARVE_TESTS_INTEGRATION_CLI_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace carve::it {

struct CliRun {
  int exit = -1;    // the exit code; -1 when it did not exit normally
  std::string out;  // what it printed (stdout, and stderr when the command joins it)
};

// Runs `command` through the shell and waits for it.
inline CliRun RunShell(const std::string& command) {
  CliRun r;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace carve::it

#endif  // CARVE_TESTS_INTEGRATION_CLI_H_
