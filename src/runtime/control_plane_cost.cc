// Cost allocation (cost.h): usage records priced by the applied `kind: price` documents.
#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/cost.h"

namespace carve {

using json = nlohmann::json;

absl::StatusOr<json> ControlPlane::Cost(const std::string& by, int64_t since_us, int64_t until_us,
                                        const Principal& who) const {
  std::vector<PriceConfig> prices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prices = config_.Prices();
    if (until_us <= 0) until_us = now_();
  }
  const json lines =
      InvoiceLines(UsageRecords(since_us, until_us, who), prices, since_us, until_us);
  auto out = CostBy(by, lines);
  if (!out.ok()) return out.status();
  (*out)["since_us"] = since_us;
  (*out)["until_us"] = until_us;
  (*out)["priced"] = !prices.empty();
  return out;
}

absl::StatusOr<json> ControlPlane::Invoice(const std::string& tenant, const std::string& month,
                                           const Principal& who) const {
  if (who.role != Role::kAdmin && !(who.role == Role::kTenantAdmin && who.tenant == tenant)) {
    return absl::PermissionDeniedError("an invoice is for admins and the tenant's tenant-admins");
  }
  auto range = MonthRange(month);
  if (!range.ok()) return range.status();
  std::vector<PriceConfig> prices;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!config_.Exists("tenant", tenant)) {
      return absl::NotFoundError(absl::StrCat("no tenant \"", tenant, "\""));
    }
    prices = config_.Prices();
  }
  json records = json::array();
  for (json& r : UsageRecords(range->first, range->second, who)) {
    if (r.value("tenant", "") == tenant) records.push_back(std::move(r));
  }
  json lines = InvoiceLines(records, prices, range->first, range->second);
  double total = 0, idle = 0;
  for (const json& l : lines) {
    total += l.value("total", 0.0);
    if (l["idle_cost"].is_number()) idle += l["idle_cost"].get<double>();
  }
  return json{{"tenant", tenant},         {"month", month}, {"from_us", range->first},
              {"to_us", range->second},   {"total", total}, {"idle_cost", idle},
              {"lines", std::move(lines)}};
}

}  // namespace carve
