// The core's wait explanations as the API shows them (`carve explain`, GET /jobs/N/explain).
#ifndef CARVE_RUNTIME_EXPLAIN_JSON_H_
#define CARVE_RUNTIME_EXPLAIN_JSON_H_

#include "core/sched/queueing/explain.h"
#include "nlohmann/json.hpp"

namespace carve {

// {gate, gates: [{gate, summary, ...facts}], fix, position, ahead: [{job, why}], reserved,
//  reserved_start_us, explanation, reasons}; quota amounts as resource strings ("4", "64Gi").
nlohmann::json WaitToJson(const WaitExplanation& wait);

}  // namespace carve

#endif  // CARVE_RUNTIME_EXPLAIN_JSON_H_
