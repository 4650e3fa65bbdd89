// kind: price — what GPU, CPU and memory time costs from a date on (docs/operations.md, "Cost
// allocation"):
//   kind: price
//   name: list-2026-11
//   effective_from: 2026-11-01        # a UTC date (or YYYY-MM-DDTHH:MM:SSZ); the latest in effect
//                                     # at a moment prices it
//   currency: USD                     # a label; every price applied shares one
//   gpu_hour:                         # per GPU-hour, by model or alias ("*": any other model)
//     H200: 4.20                      # one number: every delivery mode
//     A100-80GB: {exclusive: 2.10, partition: 2.40, shared: 2.60, "*": 2.10}
//     "*": 1.00
//   cpu_core_hour: 0.04
//   memory_gib_hour: 0.005
// A MIG instance is charged by its compute slices (3g.40gb on an A100: 3/7 of a GPU-hour per
// hour) and a share by its milli-GPU (30% = 0.3), as usage counts them (docs/utilization.md).
#ifndef CARVE_RUNTIME_PRICE_CONFIG_H_
#define CARVE_RUNTIME_PRICE_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/model/gpu_catalog.h"
#include "nlohmann/json.hpp"

namespace carve {

struct PriceConfig {
  std::string name;
  int64_t effective_us = 0;
  std::string currency = "USD";
  // model -> delivery mode (exclusive, shared, partition, "*") -> price per GPU-hour.
  std::map<std::string, std::map<std::string, double>> gpu_hour;
  double cpu_core_hour = 0;
  double memory_gib_hour = 0;

  // The price of one GPU-hour of `model` delivered as `mode`: the model's own (its mode, else
  // its "*"), else "*"'s; nullopt when nothing prices it.
  std::optional<double> GpuHour(const std::string& model, const std::string& mode) const;
};

// Decodes the fields after kind and name (checked by the caller); errors name the field. A GPU
// model is any name or alias of `catalog` ("H200" is H200-141GB), kept under its catalog name,
// the one usage records carry.
absl::StatusOr<PriceConfig> DecodePrice(const nlohmann::json& doc, const GpuCatalog& catalog);

}  // namespace carve

#endif  // CARVE_RUNTIME_PRICE_CONFIG_H_
