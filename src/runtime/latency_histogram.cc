#include "runtime/latency_histogram.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace carve {

void LatencyHistogram::Observe(int64_t us) {
  const double seconds = static_cast<double>(us) / 1e6;
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::string LatencyHistogram::Text(absl::string_view name, absl::string_view help) const {
  std::string out = absl::StrCat("# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  int64_t cumulative = 0;
  for (size_t i = 0; i <= kBounds.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < kBounds.size() ? absl::StrFormat("%g", kBounds[i]) : "+Inf";
    absl::StrAppend(&out, name, "_bucket{le=\"", le, "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, name, "_sum ",
                  absl::StrFormat("%.6f", static_cast<double>(sum_us_.load()) / 1e6), "\n", name,
                  "_count ", cumulative, "\n");
  return out;
}

double LatencyHistogram::QuantileBound(double q) const {
  std::array<int64_t, kBounds.size() + 1> counts;
  int64_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) total += counts[i] = counts_[i].load();
  if (total == 0) return 0;
  int64_t seen = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    seen += counts[i];
    if (static_cast<double>(seen) >= q * static_cast<double>(total)) return kBounds[i];
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace carve
