// kind: reservation — nodes held for one tenant (or one of its queues) over a window of time
// (docs/operations.md, "Reservations"):
//   kind: reservation
//   name: launch-week
//   tenant: acme                     # the holder
//   queue: training                  # optional: only the holder's jobs in this queue
//   nodes: [gpu-7, gpu-8]            # the nodes held, and/or
//   pool: h200                       # every node of this pool (kind: pool, or the label `pool`)
//   start: 2026-12-07T08:00:00Z      # UTC
//   end: 2026-12-08T08:00:00Z
//   borrowable: true                 # others' preemptible jobs may use idle reserved GPUs
//   meanwhile
// A reservation holds whole nodes, as Slurm's do: every GPU on them, whole, partitioned or shared.
// Before the start only jobs that will have ended by then (max_runtime) start there, and the
// holder's; during the window only the holder's jobs, and, when borrowable, other tenants'
// preemptible jobs, which the holder's jobs preempt when they need the room.
#ifndef CARVE_RUNTIME_RESERVATION_CONFIG_H_
#define CARVE_RUNTIME_RESERVATION_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve {

struct ReservationConfig {
  std::string name;
  std::string tenant;
  std::string queue;               // empty: any queue of the tenant
  std::vector<std::string> nodes;  // by name
  std::string pool;                // empty: none
  int64_t start_us = 0;
  int64_t end_us = 0;
  bool borrowable = false;

  enum class Phase { kAhead, kActive, kOver };
  Phase PhaseAt(int64_t now) const {
    return now < start_us ? Phase::kAhead : now < end_us ? Phase::kActive : Phase::kOver;
  }
  // Whether a job of `tenant` in `queue` holds it.
  bool HeldBy(const std::string& tenant, const std::string& queue) const {
    return tenant == this->tenant && (this->queue.empty() || queue == this->queue);
  }
  // Whether it covers the node `name` of pool `pool`.
  bool Covers(const std::string& name, const std::string& node_pool) const;
};

std::string Name(ReservationConfig::Phase phase);

// Decodes the fields after kind and name (checked by the caller); errors name the field.
// `exists(kind, name)` answers the tenant, queue and pool named.
absl::StatusOr<ReservationConfig> DecodeReservation(
    const nlohmann::json& doc,
    const std::function<bool(const std::string&, const std::string&)>& exists);

// Whether two reservations could hold one node at one moment (the same node named, or the same
// pool, over overlapping windows).
bool Overlap(const ReservationConfig& a, const ReservationConfig& b);

}  // namespace carve

#endif  // CARVE_RUNTIME_RESERVATION_CONFIG_H_
