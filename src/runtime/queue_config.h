// Queues and priority classes as `carve apply` documents, and their core forms.
#ifndef CARVE_RUNTIME_QUEUE_CONFIG_H_
#define CARVE_RUNTIME_QUEUE_CONFIG_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/queueing/order.h"
#include "core/sched/queueing/quota.h"
#include "nlohmann/json.hpp"

namespace carve {

// A queue document:
//   kind: queue
//   name: team-a
//   pool: default                 # optional: only nodes of this pool (node label `pool`)
//   cohort: research              # optional: lends and borrows unused quota within the cohort
//   weight: 2                     # fair-share weight, default 1
//   quota: {gpus: 8, gpus/H200: 8, gpu-share: 2, mig/3g.40gb: 4, cpu: 64, memory: 512Gi}
//   borrowing_limit: {gpus: 4}    # optional, per resource: most it may use above its quota
//   lending_limit: {gpus: 2}      # optional, per resource: most of its unused quota it lends
// The error names the field ("quota.gpus/Z9: no GPU model ...").
absl::Status CheckQueueDoc(const nlohmann::json& doc, const GpuCatalog& catalog);
QueueSpec QueueFromDoc(const nlohmann::json& doc, const GpuCatalog& catalog);

// A priority class document: {kind: priority-class, name, priority: 500, preemptible: true}.
absl::Status CheckPriorityClassDoc(const nlohmann::json& doc);
// The built-in tiers, overridden or extended by applied documents.
std::vector<PriorityClass> PriorityClasses(
    const std::map<std::pair<std::string, std::string>, nlohmann::json>& objects);

// A resource list for reports: {"gpus": "8", "memory": "64Gi"}.
nlohmann::json ResourcesToJson(const ResourceList& list);

}  // namespace carve

#endif  // CARVE_RUNTIME_QUEUE_CONFIG_H_
