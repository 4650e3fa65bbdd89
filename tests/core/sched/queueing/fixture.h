// Small clusters and jobs for the queueing tests.
#ifndef CARVE_TESTS_CORE_SCHED_QUEUEING_FIXTURE_H_
#define CARVE_TESTS_CORE_SCHED_QUEUEING_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/sched/placement/policy.h"
#include "core/sched/queueing/cycle.h"

namespace carve::testing_queueing {

inline const GpuCatalog& Catalog() {
  static const GpuCatalog* const kCatalog = new GpuCatalog(GpuCatalog::BuiltIn());
  return *kCatalog;
}

// `nodes` nodes of `gpus` exclusive H200 each; labels per node (rack, nvlink-domain) optional.
inline Cluster H200Cluster(int nodes, int gpus,
                           const std::vector<std::map<std::string, std::string>>& labels = {}) {
  Cluster cluster(&Catalog());
  GpuModelId h200 = *Catalog().Find("H200");
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = absl::StrCat("n", i);
    n.capacity.cpu = CpuMilli(64000);
    n.capacity.memory = MemMib(512 * 1024);
    if (i < static_cast<int>(labels.size())) {
      for (const auto& [k, v] : labels[i]) n.labels[k] = v;
    }
    for (int g = 0; g < gpus; ++g) {
      Device d;
      d.index = g;
      d.model = h200;
      n.devices.push_back(d);
    }
    cluster.AddNode(std::move(n));
  }
  return cluster;
}

inline JobRequest Gpus(int per_replica, int replicas = 1) {
  JobRequest r;
  r.replicas = replicas;
  r.replica.gpu.mode = DeliveryMode::kExclusive;
  r.replica.gpu.count = per_replica;
  r.replica.gpu.compute = kWholeGpu;
  r.replica.resources.cpu = CpuMilli(1000);
  r.replica.resources.memory = MemMib(1024);
  return r;
}

inline QueueSpec Queue(const std::string& name, const std::string& cohort, int64_t nominal_gpus,
                       int64_t borrowing_limit = -1, int64_t lending_limit = -1) {
  QueueSpec q;
  q.name = name;
  q.cohort = cohort;
  q.nominal["gpus"] = nominal_gpus * 1000;
  if (borrowing_limit >= 0) q.borrowing_limit["gpus"] = borrowing_limit * 1000;
  if (lending_limit >= 0) q.lending_limit["gpus"] = lending_limit * 1000;
  return q;
}

inline PendingJob Pending(int64_t id, const std::string& queue, JobRequest request,
                          int64_t priority = 100, int64_t submitted_us = 0,
                          int64_t max_runtime_us = 0) {
  PendingJob p;
  p.id = id;
  p.queue = queue;
  p.priority = priority;
  p.submitted_us = submitted_us == 0 ? id : submitted_us;
  p.max_runtime_us = max_runtime_us;
  p.request = std::move(request);
  return p;
}

// Runs one cycle on `cluster` (which keeps the binds applied).
struct OneCycle {
  Cluster* cluster;
  std::unique_ptr<PlacementPolicy> policy = *MakePolicy("best-fit", {});
  CycleInput input;

  explicit OneCycle(Cluster* c) : cluster(c) {
    input.cluster = c;
    input.policy = policy.get();
  }
  Decisions Run() {
    input.cluster = cluster;
    input.policy = policy.get();
    return Schedule(input);
  }
};

inline const WaitExplanation* WaitOf(const Decisions& d, int64_t job) {
  for (const WaitExplanation& w : d.waits) {
    if (w.job == job) return &w;
  }
  return nullptr;
}

inline bool Bound(const Decisions& d, int64_t job) {
  for (const Bind& b : d.binds) {
    if (b.job == job) return true;
  }
  return false;
}

}  // namespace carve::testing_queueing

#endif  // CARVE_TESTS_CORE_SCHED_QUEUEING_FIXTURE_H_
