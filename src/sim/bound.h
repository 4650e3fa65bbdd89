#ifndef CARVE_SIM_BOUND_H_
#define CARVE_SIM_BOUND_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve::sim {

// `carve sim bound`: how much of the GPUs `sim fill`'s arrivals could have had, seen whole. For
// each seed the same arrival sequence as `sim fill` (same shuffle and samples), cut where the
// asked GPUs reach each load; then
//   - achievable: a clairvoyant packer that sees the whole prefix at once places it largest
//     first (GPUs asked, then CPU) with best-fit and with carve, and keeps the better: an
//     allocation some placement reaches;
//   - upper: the optimum of a linear relaxation (GLPK's simplex) that no placement can pass: pods
//     grouped by shape, nodes by type, each type's CPU, memory and GPU milli summed, a pod only
//     on a type it fits alone, and no GPU holding two pods of more than half a GPU or three of
//     more than a third (a whole-GPU pod counts as two).
// Figures are percentages of the cluster's GPU milli, medians over seeds.
struct BoundOptions {
  std::string nodes_path;
  std::string pods_path;
  int seeds = 10;
  int first_seed = 42;
  std::vector<int> loads = {100, 130};  // percent of the cluster's GPUs asked
};

struct BoundPoint {
  int load_pct = 0;
  double asked_pct = 0;       // what the prefix asks (at most the load)
  double achievable_pct = 0;  // the clairvoyant packer's allocation
  double upper_pct = 0;       // the relaxation's optimum
};

struct BoundResult {
  int64_t gpus_total = 0;
  std::vector<int> seeds;
  std::vector<BoundPoint> points;  // medians, one per load
  double lp_seconds = 0;           // wall time in the solver, all seeds
  int lp_columns = 0;              // the largest relaxation solved
  int lp_rows = 0;

  nlohmann::json ToJson() const;
  void PrintTable(std::ostream& out) const;
};

absl::StatusOr<BoundResult> RunBound(const BoundOptions& options);

}  // namespace carve::sim

#endif  // CARVE_SIM_BOUND_H_
