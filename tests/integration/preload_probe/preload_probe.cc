// A library a job preloads (LD_PRELOAD) in isolation_test.cc: it names every program it is
// loaded into on stderr, so the test sees whether the agent's own monitor loaded it.
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

__attribute__((constructor)) void Announce() {
  char exe[512];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n < 0) return;
  exe[n] = '\0';
  const char* base = std::strrchr(exe, '/');
  base = base != nullptr ? base + 1 : exe;
  char line[600];
  int len = std::snprintf(line, sizeof(line), "preload-probe loaded into %s\n", base);
  if (len <= 0) return;
  ssize_t written = write(STDERR_FILENO, line, static_cast<size_t>(len));
  (void)written;
}

}  // namespace
