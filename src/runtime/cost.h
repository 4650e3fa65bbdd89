// Cost allocation (docs/operations.md, "Cost allocation"): usage records (one per job attempt,
// control_plane_usage.cc) priced by the applied `kind: price` documents (price_config.h) in
// effect over each hold. No I/O: the control plane hands in the records and prices.
#ifndef CARVE_RUNTIME_COST_H_
#define CARVE_RUNTIME_COST_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/price_config.h"

namespace carve {

// The invoice lines of `records` over [since_us, until_us): one per job attempt and price period
// (an attempt that spans a price change has a line for each side), with what it held (GPU-,
// CPU- and memory-hours), at what prices, the costs, and its idle GPU-hours where the node
// measured them (whole GPUs only; null otherwise). GPU time of a model no price covers is
// `unpriced_gpu_hours`, never silently free.
nlohmann::json InvoiceLines(const nlohmann::json& records, std::vector<PriceConfig> prices,
                            int64_t since_us, int64_t until_us);

// A reservation's capacity (control_plane_cost.cc): its holder, window, and GPUs per node and
// model.
struct ReservedCapacity {
  std::string name;
  std::string tenant;
  std::string queue;  // empty: any of the tenant's
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::map<std::string, std::map<std::string, int>> gpus;  // node -> model -> GPUs
  // A reservation of gpus: the devices it holds (node -> indexes); only the holder's use of them
  // counts as use. Empty: it holds its nodes whole.
  std::map<std::string, std::set<int>> devices;
};

// Reserved but unused: per reservation, GPU model and price period inside [since_us, until_us),
// the GPU-hours its nodes held for the holder that the holder's jobs (in `records`, usage rows)
// did not use there, charged to the holder at the model's `reserved` price (gpu_hour's mode
// `reserved`, else the model's). Lines of kind "reservation", mode "reserved", job 0, with
// reserved_gpu_hours and used_gpu_hours beside gpu_hours (the unused).
nlohmann::json ReservedLines(const std::vector<ReservedCapacity>& reserved,
                             const nlohmann::json& records, std::vector<PriceConfig> prices,
                             int64_t since_us, int64_t until_us);

// The lines summed by `by` (tenant, project, queue, user): jobs, hours, costs, idle GPU-hours
// and what they cost (shown apart: they are inside gpu_cost), unpriced GPU-hours.
absl::StatusOr<nlohmann::json> CostBy(const std::string& by, const nlohmann::json& lines);

// [first day of `month` ("2026-11"), first day of the next), UTC, in microseconds.
absl::StatusOr<std::pair<int64_t, int64_t>> MonthRange(const std::string& month);

// The invoice's CSV columns, in order.
const std::vector<std::string>& InvoiceColumns();

}  // namespace carve

#endif  // CARVE_RUNTIME_COST_H_
