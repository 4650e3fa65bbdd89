#ifndef CARVE_SIM_COMPARE_H_
#define CARVE_SIM_COMPARE_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/fill.h"

namespace carve::sim {

// `carve sim compare`: `carve sim fill` for every pod list and policy; one row per pod list.
struct CompareOptions {
  FillOptions fill;  // nodes, seeds, load, threads
  std::vector<std::string> pod_files;
  std::vector<std::string> policies;
  std::string json_dir;  // optional: one fill JSON per (pod list, policy)
};

struct CompareCell {
  double at_100 = 0;
  double at_end = 0;
};

struct CompareResult {
  std::vector<std::string> pod_lists;  // file stems, e.g. "openb_pod_list_default"
  std::vector<std::string> policies;
  std::vector<std::vector<CompareCell>> cells;  // [pod list][policy]

  // Markdown: GPU allocation % at 100% and at the final load, per pod list and policy; the best
  // of each row in bold.
  void PrintMarkdown(std::ostream& out) const;
};

// Runs every combination; `progress` (may be null) gets one line per finished fill.
absl::StatusOr<CompareResult> RunCompare(const CompareOptions& options, std::ostream* progress);

}  // namespace carve::sim

#endif  // CARVE_SIM_COMPARE_H_
