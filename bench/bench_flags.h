#ifndef CARVE_BENCH_BENCH_FLAGS_H_
#define CARVE_BENCH_BENCH_FLAGS_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace carve::bench {

// Microseconds since the Unix epoch: the control plane's clock in the benchmarks.
inline int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The integer after `--name` on the command line, or `fallback`.
inline int Flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace carve::bench

#endif  // CARVE_BENCH_BENCH_FLAGS_H_
