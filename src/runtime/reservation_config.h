// kind: reservation — nodes held for one tenant (or one of its queues) over a window of time
// (docs/operations.md, "Reservations"):
//   kind: reservation
//   name: launch-week
//   tenant: acme                     # the holder
//   queue: training                  # optional: only the holder's jobs in this queue
//   nodes: [gpu-7, gpu-8]            # the nodes held, and/or
//   pool: h200                       # every node of this pool (kind: pool, or the label `pool`)
//   gpus: {model: H100, count: 4}    # or devices by count anywhere (in `pool`, when given):
//                                    #   whole GPUs of a model; {model, mig: 1g.10gb, count: 14}
//                                    #   MIG instances of a profile; {model, shares: 2.5} GPUs'
//                                    #   worth of shares. Held as whole devices, picked from the
//                                    #   registered ones (reservations.h)
//   start: 2026-12-07T08:00:00Z      # UTC
//   end: 2026-12-08T08:00:00Z
//   borrowable: true                 # others' preemptible jobs may use idle reserved GPUs
//   meanwhile
// A reservation of nodes holds them whole, as Slurm's do: every GPU on them, whole, partitioned or
// shared. A reservation of `gpus` holds only the devices it picked.
// Before the start only jobs that will have ended by then (max_runtime) start there, and the
// holder's; during the window only the holder's jobs, and, when borrowable, other tenants'
// preemptible jobs, which the holder's jobs preempt when they need the room.
#ifndef CARVE_RUNTIME_RESERVATION_CONFIG_H_
#define CARVE_RUNTIME_RESERVATION_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
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
  // Devices by count (`gpus:`), instead of nodes.
  struct Gpus {
    std::string model;        // as written; matched through the GPU catalog
    std::string mig;          // a MIG profile: `count` instances of it on partition-mode GPUs
    int64_t count = 0;        // whole GPUs (exclusive mode), or MIG instances
    int64_t share_milli = 0;  // shares: GPUs' worth in milli-GPUs, on shared-mode GPUs
    friend bool operator==(const Gpus&, const Gpus&) = default;
  };
  std::optional<Gpus> gpus;

  enum class Phase { kAhead, kActive, kOver };
  Phase PhaseAt(int64_t now) const {
    return now < start_us ? Phase::kAhead : now < end_us ? Phase::kActive : Phase::kOver;
  }
  // Whether a job of `tenant` in `queue` holds it.
  bool HeldBy(const std::string& tenant, const std::string& queue) const {
    return tenant == this->tenant && (this->queue.empty() || queue == this->queue);
  }
  // Whether it covers the whole node `name` of pool `pool` (never for a reservation of gpus).
  bool Covers(const std::string& name, const std::string& node_pool) const;
  // "4 H100 GPUs", "14 A100-80GB 1g.10gb instances", "2.5 L40S GPUs of shares" ("" for nodes).
  std::string GpusText() const;
};

std::string Name(ReservationConfig::Phase phase);

// Decodes the fields after kind and name (checked by the caller); errors name the field.
// `exists(kind, name)` answers the tenant, queue and pool named.
absl::StatusOr<ReservationConfig> DecodeReservation(
    const nlohmann::json& doc,
    const std::function<bool(const std::string&, const std::string&)>& exists);

// Whether two reservations of nodes could hold one node at one moment (the same node named, or
// the same pool, over overlapping windows). Reservations of gpus never overlap so: each picks
// devices no other holds over its window (reservations.h).
bool Overlap(const ReservationConfig& a, const ReservationConfig& b);

}  // namespace carve

#endif  // CARVE_RUNTIME_RESERVATION_CONFIG_H_
