#ifndef CARVE_RUNTIME_LATENCY_HISTOGRAM_H_
#define CARVE_RUNTIME_LATENCY_HISTOGRAM_H_

// A Prometheus histogram of durations, for the server's own timings (/metrics): scheduling
// cycles, agents' heartbeats. Buckets from 0.5 ms to 30 s in 1-2.5-5 steps; observing is a few
// relaxed atomic adds, safe from any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace carve {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 17> kBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30};

  void Observe(int64_t us);
  // # HELP, # TYPE histogram, NAME_bucket{le="..."} (cumulative), NAME_sum and NAME_count.
  std::string Text(absl::string_view name, absl::string_view help) const;
  // The least bucket bound that at least `q` of the observations are within (+Inf: beyond the
  // last bound, 0: none observed).
  double QuantileBound(double q) const;

 private:
  std::array<std::atomic<int64_t>, kBounds.size() + 1> counts_{};  // the last: beyond every bound
  std::atomic<int64_t> sum_us_{0};
  std::atomic<int64_t> count_{0};
};

}  // namespace carve

#endif  // CARVE_RUNTIME_LATENCY_HISTOGRAM_H_
