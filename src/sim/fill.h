#ifndef CARVE_SIM_FILL_H_
#define CARVE_SIM_FILL_H_

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/cluster.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/request.h"
#include "nlohmann/json.hpp"
#include "sim/trace.h"

namespace carve::sim {

// `carve sim fill`: the FGD paper's experiment. Per seed, the pod list (sorted by name) is
// shuffled, then pods sampled from it with replacement are appended until the requested GPUs
// reach `target_load` times the cluster's GPUs; pods arrive one by one and never leave; a pod
// that does not fit is dropped. Ties between equal-scoring nodes go to a random per-seed node
// ranking (as the paper's simulator). Everything is drawn from std::mt19937_64(seed).
struct FillOptions {
  std::string nodes_path;
  std::string pods_path;
  std::string policy = "carve";
  int seeds = 10;
  int first_seed = 42;
  double target_load = 1.3;
  std::string placements_path;  // optional CSV of every decision
  int threads = 0;              // 0: one per core
};

struct CurvePoint {
  int load_pct = 0;  // arrived GPU requests as a percentage of cluster GPUs
  double alloc_pct = 0;
  double frag_pct = 0;
  double unallocated_gpus = 0;
};

struct SeedResult {
  int seed = 0;
  std::vector<CurvePoint> curve;  // every integer load percentage 0..target
  int64_t pods = 0;
  int64_t placed = 0;
  double place_seconds = 0;
  std::string placements_csv;
};

struct FillResult {
  std::string policy;
  int64_t gpus_total = 0;
  std::vector<SeedResult> seeds;
  std::vector<CurvePoint> curve;  // medians over seeds, steps of 5%
  double alloc_pct_at_100 = 0;
  double alloc_pct_at_130 = 0;
  int64_t placements = 0;
  double placements_per_sec = 0;

  nlohmann::json ToJson() const;
  void PrintTable(std::ostream& out) const;
};

absl::StatusOr<FillResult> RunFill(const FillOptions& options);

// What `sim fill` and `sim bound` read: the nodes, the pods sorted by name and their requests.
struct FillInput {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::vector<Node> nodes;
  std::vector<TracePod> pods;
  std::vector<JobRequest> requests;
  int64_t total_gpus = 0;
};
absl::Status LoadFillInput(const std::string& nodes_path, const std::string& pods_path,
                           FillInput& in);
// One seed's arrivals (indexes into in.pods): the shuffled list, then pods sampled with
// replacement until the asked GPUs would pass `target_load` times the cluster's. The first
// arrivals are the same for every target: a prefix up to a lower load is the same pods.
std::vector<size_t> ArrivalOrder(const FillInput& in, double target_load, std::mt19937_64& rng);
// GPU milli a pod asks for.
inline int64_t AskedMilli(const TracePod& p) { return p.num_gpu * p.gpu_milli; }

}  // namespace carve::sim

#endif  // CARVE_SIM_FILL_H_
