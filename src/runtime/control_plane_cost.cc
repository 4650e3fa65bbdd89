// Cost allocation (cost.h): usage records priced by the applied `kind: price` documents.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/cost.h"
#include "runtime/reservations.h"

namespace carve {

using json = nlohmann::json;

namespace {

// The capacity of each reservation of `tenant` ("": every tenant): the GPUs it holds on the
// registered nodes (every GPU of a node it holds whole, the devices a reservation of gpus
// picked), by catalog model name, as they are now.
std::vector<ReservedCapacity> Capacity(const Configuration& config,
                                       const std::map<std::string, NodeRecord>& nodes,
                                       const GpuCatalog& catalog, const std::string& tenant) {
  std::vector<ReservedCapacity> out;
  const std::vector<ReservationConfig> all = config.Reservations();
  // What it holds as a view at its start sees it (one over holds none now).
  for (const ReservationConfig& r : all) {
    if (!tenant.empty() && r.tenant != tenant) continue;
    ReservedCapacity c{r.name, r.tenant, r.queue, r.start_us, r.end_us, {}, {}};
    const ReservationView at_start(all, nodes, config.Pools(), r.start_us, catalog);
    for (const std::string& node : at_start.NodesOf(r)) {
      const std::vector<DiscoveredGpu>& gpus = nodes.at(node).gpus;
      for (size_t d = 0; d < gpus.size(); ++d) {
        if (!at_start.HoldsDevice(r, node, static_cast<int>(d))) continue;
        auto id = catalog.Find(gpus[d].model);
        ++c.gpus[node][id.ok() ? catalog.model(*id).name : "unknown"];
        if (r.gpus) c.devices[node].insert(static_cast<int>(d));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

absl::StatusOr<json> ControlPlane::Cost(const std::string& by, int64_t since_us, int64_t until_us,
                                        const Principal& who) const {
  std::vector<PriceConfig> prices;
  std::vector<ReservedCapacity> reserved;
  int64_t reserved_until = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prices = config_.Prices();
    if (until_us <= 0) until_us = now_();
    reserved_until = std::min(until_us, now_());  // reserved time is charged as it passes
    // Reserved-but-unused time needs every row of the holder: admins and its tenant-admins.
    if (who.role == Role::kAdmin || who.role == Role::kTenantAdmin) {
      const std::string tenant = who.role == Role::kAdmin ? "" : who.tenant;
      reserved = Capacity(config_, nodes_, *catalog_, tenant);
    }
  }
  const json records = UsageRecords(since_us, until_us, who);
  json lines = InvoiceLines(records, prices, since_us, until_us);
  for (json& l : ReservedLines(reserved, records, prices, since_us, reserved_until)) {
    lines.push_back(std::move(l));
  }
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
  std::vector<ReservedCapacity> reserved;
  int64_t now = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!config_.Exists("tenant", tenant)) {
      return absl::NotFoundError(absl::StrCat("no tenant \"", tenant, "\""));
    }
    prices = config_.Prices();
    reserved = Capacity(config_, nodes_, *catalog_, tenant);
    now = now_();
  }
  json records = json::array();
  for (json& r : UsageRecords(range->first, range->second, who)) {
    if (r.value("tenant", "") == tenant) records.push_back(std::move(r));
  }
  json lines = InvoiceLines(records, prices, range->first, range->second);
  // Reserved time is charged as it passes: a month in progress up to now.
  const int64_t until = std::min(range->second, now);
  for (json& l : ReservedLines(reserved, records, prices, range->first, until)) {
    lines.push_back(std::move(l));
  }
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
