#ifndef CARVE_SIM_REPLAY_H_
#define CARVE_SIM_REPLAY_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve::sim {

// `carve sim replay`: the trace's pods on the whole cluster as they came and went. Each pod
// arrives at its creation time (divided by `speedup`), waits in one queue while it does not fit
// (in the scheduler's order: priority, then arrival), runs for its lifetime in the trace
// (deletion - creation, not divided) once placed, and leaves. Unlike `sim fill`, nothing is
// dropped and jobs leave; unlike `sim queues`, there is one queue without a quota that binds,
// the whole cluster, and the policy under test. Deterministic.
struct ReplayOptions {
  std::string nodes_path;
  std::string pods_path;
  std::string policy = "carve";
  // Arrivals this many times faster, lifetimes unchanged: the trace's pods arrive over months
  // and keep a few percent of the GPUs busy; a speedup loads the cluster until jobs queue.
  double speedup = 1;
  // The first this share of the node list's nodes (as `sim queues`): a smaller cluster for the
  // same pods, so that they contend.
  double node_fraction = 1;
  int buckets = 12;               // report rows from the first arrival to the last job's end
  int64_t cycle_s = 10;           // the least time between two scheduling cycles
  int fragmentation_points = 48;  // the fragmentation is measured this often over the run
};

struct ReplayRow {
  int64_t from_s = 0;
  int64_t to_s = 0;
  double alloc_pct = 0;  // time-weighted mean of GPU milli held / GPU milli installed
  double frag_pct = 0;   // mean of the measurements in the row: fragmented / free GPU milli
  double queue_len = 0;  // time-weighted mean of pending jobs
  int running_end = 0;   // jobs running at the row's end
};

struct ReplayResult {
  std::string policy;
  double speedup = 1;
  // The first this share of the node list's nodes (as `sim queues`): a smaller cluster for the
  // same pods, so that they contend.
  double node_fraction = 1;
  int64_t nodes = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  int64_t gpu_jobs = 0;
  int64_t placed = 0;
  int64_t never_placed = 0;  // still waiting when nothing else was left to run
  // Over the jobs placed: seconds from arrival to first start.
  double wait_p50_s = 0;
  double wait_p95_s = 0;
  double wait_p99_s = 0;
  double wait_max_s = 0;
  double gpu_hours_waited = 0;  // sum over jobs of wait x GPUs asked (shares as fractions)
  double alloc_pct = 0;         // time-weighted over the arrivals (window_s)
  double peak_queue = 0;
  int cycles = 0;
  int64_t span_s = 0;    // simulated, first arrival to the last end
  int64_t window_s = 0;  // first arrival to the last: what the rows and alloc_pct cover
  double seconds = 0;    // wall time
  std::vector<ReplayRow> rows;

  nlohmann::json ToJson() const;
  void PrintTable(std::ostream& out) const;
};

absl::StatusOr<ReplayResult> RunReplay(const ReplayOptions& options);

}  // namespace carve::sim

#endif  // CARVE_SIM_REPLAY_H_
