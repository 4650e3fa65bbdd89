#ifndef CARVE_RUNTIME_UTILIZATION_H_
#define CARVE_RUNTIME_UTILIZATION_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/model/gpu_catalog.h"
#include "nlohmann/json.hpp"
#include "runtime/records.h"

namespace carve {

// GPU-time of one (pool, model) in one bucket, in GPU-microseconds (busy: milli-GPU-microseconds
// of reported activity, and the GPU-time that had a report at all).
struct UtilizationCell {
  double installed = 0;
  double online = 0;
  double schedulable = 0;
  double busy = 0;
  double busy_reported = 0;

  nlohmann::json ToJson() const;
  static UtilizationCell FromJson(const nlohmann::json& j);
  void Add(const UtilizationCell& o);
};

// The control plane integrates every GPU's state over time into one-minute buckets (stored as
// kind "utilization", id = the bucket's start). A tick attributes the time since the previous
// tick to the state it sees, so figures are exact to one scheduling interval.
struct UtilizationLedger {
  static constexpr int64_t kBucketUs = 60'000'000;
  using Key = std::pair<std::string, std::string>;  // pool, model
  int64_t last_us = 0;
  int64_t persisted_us = 0;
  std::map<int64_t, std::map<Key, UtilizationCell>> buckets;
  std::set<int64_t> dirty;

  // Adds `cell` spread over [from, to) into the buckets it covers.
  void Accrue(const Key& key, int64_t from, int64_t to, const UtilizationCell& per_us);
};

// GPUs a grant stands for: a whole GPU 1, a share its milli-GPU / 1000, a MIG instance its
// compute slices over the model's. `model` gets the device's canonical model name.
double GrantGpus(const GpuCatalog& catalog, const std::map<std::string, NodeRecord>& nodes,
                 const std::string& node, const GrantRecord& g, std::string* model);

}  // namespace carve

#endif  // CARVE_RUNTIME_UTILIZATION_H_
