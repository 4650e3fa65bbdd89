#include "runtime/cost.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr double kUsPerHour = 3.6e9;

// The price in effect at `t` (the latest effective at or before it), or null.
const PriceConfig* InEffect(const std::vector<PriceConfig>& prices, int64_t t) {
  const PriceConfig* out = nullptr;
  for (const PriceConfig& p : prices) {
    if (p.effective_us <= t) out = &p;
  }
  return out;
}

// Whole GPUs' idle share of an attempt, from the node's busy seconds: null when not measured.
json IdleShare(const json& r) {
  const json busy = r.value("device_busy_seconds", json());
  if (!busy.is_number() || r.value("mode", "") != "exclusive") return nullptr;
  double gpu_seconds = 0;
  for (const json& d : r["devices"]) gpu_seconds += d.value("gpus", 0.0);
  gpu_seconds *=
      static_cast<double>(r.value("held_to_us", int64_t{0}) - r.value("held_from_us", int64_t{0})) /
      1e6;
  if (gpu_seconds <= 0) return nullptr;
  return std::clamp(1.0 - busy.get<double>() / gpu_seconds, 0.0, 1.0);
}

json Line(const json& r, const PriceConfig* p, int64_t from, int64_t to) {
  const double hours = static_cast<double>(to - from) / kUsPerHour;
  double gpu_hours = 0, gpu_cost = 0, unpriced = 0;
  std::set<std::string> models;
  std::set<double> gpu_prices;
  for (const json& d : r["devices"]) {
    const std::string model = d.value("model", "unknown");
    const double h = d.value("gpus", 0.0) * hours;
    models.insert(model);
    gpu_hours += h;
    auto price = p != nullptr ? p->GpuHour(model, r.value("mode", "")) : std::nullopt;
    if (!price) {
      unpriced += h;
      continue;
    }
    gpu_prices.insert(*price);
    gpu_cost += h * *price;
  }
  const double replicas = r.value("replicas", 1.0);
  const double cpu_hours = r.value("cpu_milli_per_replica", 0.0) / 1000 * replicas * hours;
  const double mem_hours = r.value("memory_mib_per_replica", 0.0) / 1024 * replicas * hours;
  const double cpu_price = p != nullptr ? p->cpu_core_hour : 0;
  const double mem_price = p != nullptr ? p->memory_gib_hour : 0;
  json line = {{"tenant", r.value("tenant", "")},
               {"project", r.value("project", "")},
               {"queue", r.value("queue", "")},
               {"user", r.value("user", "")},
               {"job", r.value("job", int64_t{0})},
               {"attempt", r.value("attempt", 0)},
               {"name", r.value("name", "")},
               {"kind", r.value("kind", "")},
               {"mode", r.value("mode", "")},
               {"models", absl::StrJoin(models, "+")},
               {"end", r.value("end", "")},
               {"from_us", from},
               {"to_us", to},
               {"hours", hours},
               {"gpu_hours", gpu_hours},
               {"unpriced_gpu_hours", unpriced},
               {"gpu_cost", gpu_cost},
               {"cpu_core_hours", cpu_hours},
               {"cpu_price", cpu_price},
               {"cpu_cost", cpu_hours * cpu_price},
               {"memory_gib_hours", mem_hours},
               {"memory_price", mem_price},
               {"memory_cost", mem_hours * mem_price},
               {"price", p != nullptr ? p->name : ""},
               {"currency", p != nullptr ? p->currency : ""}};
  // One price per GPU-hour when every device had the same; null when they differ or none did.
  line["gpu_price"] = gpu_prices.size() == 1 ? json(*gpu_prices.begin()) : json(nullptr);
  line["total"] = gpu_cost + cpu_hours * cpu_price + mem_hours * mem_price;
  const json idle = IdleShare(r);
  line["idle_gpu_hours"] = idle.is_null() ? json(nullptr) : json(idle.get<double>() * gpu_hours);
  line["idle_cost"] = idle.is_null() ? json(nullptr) : json(idle.get<double>() * gpu_cost);
  return line;
}

double Sum(const json& row, const char* key) { return row.value(key, 0.0); }

int64_t Overlap(int64_t a, int64_t b, int64_t c, int64_t d) {
  return std::max<int64_t>(0, std::min(b, d) - std::max(a, c));
}

// GPU-hours per model that the holder's rows used on the reservation's nodes over [from, to).
std::map<std::string, double> UsedOn(const ReservedCapacity& r, const json& records, int64_t from,
                                     int64_t to) {
  std::map<std::string, double> used;
  for (const json& row : records) {
    if (row.value("tenant", "") != r.tenant ||
        (!r.queue.empty() && row.value("queue", "") != r.queue)) {
      continue;
    }
    const double hours =
        static_cast<double>(Overlap(row.value("held_from_us", int64_t{0}),
                                    row.value("held_to_us", int64_t{0}), from, to)) /
        kUsPerHour;
    for (const json& d : row["devices"]) {
      const std::string node = d.value("node", "");
      if (!r.gpus.count(node)) continue;
      if (!r.devices.empty()) {  // a reservation of gpus: its own devices only
        auto held = r.devices.find(node);
        if (held == r.devices.end() || !held->second.count(d.value("device", -1))) continue;
      }
      used[d.value("model", "unknown")] += d.value("gpus", 0.0) * hours;
    }
  }
  return used;
}

json ReservedLine(const ReservedCapacity& r, const std::string& model, double reserved, double used,
                  const PriceConfig* p, int64_t from, int64_t to) {
  const double unused = std::max(0.0, reserved - used);
  const std::optional<double> price = p != nullptr ? p->GpuHour(model, "reserved") : std::nullopt;
  // Plain values: GCC 12 takes the optional's payload for uninitialized once inlined into json.
  const bool priced = price.has_value();
  const double unit = price.value_or(0.0);
  const double cost = unused * unit;
  return {{"tenant", r.tenant},
          {"project", ""},
          {"queue", r.queue},
          {"user", ""},
          {"job", 0},
          {"attempt", 0},
          {"name", "reservation " + r.name},
          {"kind", "reservation"},
          {"mode", "reserved"},
          {"models", model},
          {"end", ""},
          {"from_us", from},
          {"to_us", to},
          {"hours", static_cast<double>(to - from) / kUsPerHour},
          {"reserved_gpu_hours", reserved},
          {"used_gpu_hours", used},
          {"gpu_hours", unused},
          {"gpu_price", priced ? json(unit) : json(nullptr)},
          {"gpu_cost", cost},
          {"unpriced_gpu_hours", priced ? 0.0 : unused},
          {"cpu_core_hours", 0.0},
          {"cpu_price", 0.0},
          {"cpu_cost", 0.0},
          {"memory_gib_hours", 0.0},
          {"memory_price", 0.0},
          {"memory_cost", 0.0},
          {"total", cost},
          {"idle_gpu_hours", 0.0},
          {"idle_cost", 0.0},
          {"price", p != nullptr ? p->name : ""},
          {"currency", p != nullptr ? p->currency : ""}};
}

// Where prices take effect inside [from, to), with both ends.
std::vector<int64_t> Cuts(const std::vector<PriceConfig>& prices, int64_t from, int64_t to) {
  std::vector<int64_t> cuts = {from};
  for (const PriceConfig& p : prices) {
    if (p.effective_us > from && p.effective_us < to) cuts.push_back(p.effective_us);
  }
  cuts.push_back(to);
  return cuts;
}

void SortByEffect(std::vector<PriceConfig>& prices) {
  std::sort(prices.begin(), prices.end(), [](const PriceConfig& a, const PriceConfig& b) {
    return a.effective_us < b.effective_us;
  });
}

}  // namespace

json ReservedLines(const std::vector<ReservedCapacity>& reserved, const json& records,
                   std::vector<PriceConfig> prices, int64_t since_us, int64_t until_us) {
  SortByEffect(prices);
  json out = json::array();
  for (const ReservedCapacity& r : reserved) {
    const int64_t from = std::max(r.start_us, since_us), to = std::min(r.end_us, until_us);
    if (to <= from) continue;
    const std::vector<int64_t> cuts = Cuts(prices, from, to);
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const double hours = static_cast<double>(cuts[i + 1] - cuts[i]) / kUsPerHour;
      std::map<std::string, double> held;
      for (const auto& [node, models] : r.gpus) {
        for (const auto& [model, count] : models) held[model] += count * hours;
      }
      std::map<std::string, double> used = UsedOn(r, records, cuts[i], cuts[i + 1]);
      for (const auto& [model, h] : held) {
        out.push_back(ReservedLine(r, model, h, used[model], InEffect(prices, cuts[i]), cuts[i],
                                   cuts[i + 1]));
      }
    }
  }
  return out;
}

json InvoiceLines(const json& records, std::vector<PriceConfig> prices, int64_t since_us,
                  int64_t until_us) {
  SortByEffect(prices);
  json out = json::array();
  for (const json& r : records) {
    const int64_t from = std::max(r.value("held_from_us", int64_t{0}), since_us);
    const int64_t to = std::min(r.value("held_to_us", int64_t{0}), until_us);
    if (to <= from) continue;
    // Split where a price takes effect inside the hold.
    const std::vector<int64_t> cuts = Cuts(prices, from, to);
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      out.push_back(Line(r, InEffect(prices, cuts[i]), cuts[i], cuts[i + 1]));
    }
  }
  return out;
}

absl::StatusOr<json> CostBy(const std::string& by, const json& lines) {
  static const std::set<std::string> kBy = {"tenant", "project", "queue", "user"};
  if (!kBy.count(by)) {
    return absl::InvalidArgumentError(
        absl::StrCat("by: \"", by, "\" is not tenant, project, queue or user"));
  }
  std::map<std::string, json> rows;
  std::map<std::string, std::set<int64_t>> jobs;
  std::map<std::string, std::set<std::string>> currencies;
  static const char* kSums[] = {"gpu_hours",      "gpu_cost", "unpriced_gpu_hours",
                                "cpu_core_hours", "cpu_cost", "memory_gib_hours",
                                "memory_cost",    "total"};
  for (const json& l : lines) {
    const std::string key = by == "project"
                                ? absl::StrCat(l.value("tenant", ""), "/", l.value("project", ""))
                                : l.value(by, "");
    json& row = rows[key];
    if (row.is_null()) {
      row = {{by, key},
             {"idle_gpu_hours", 0.0},
             {"idle_cost", 0.0},
             {"idle_unmeasured_gpu_hours", 0.0},
             {"reserved_unused_gpu_hours", 0.0},
             {"reserved_unused_cost", 0.0}};
      for (const char* k : kSums) row[k] = 0.0;
    }
    for (const char* k : kSums) row[k] = Sum(row, k) + Sum(l, k);
    if (l["idle_gpu_hours"].is_null()) {
      row["idle_unmeasured_gpu_hours"] =
          Sum(row, "idle_unmeasured_gpu_hours") + Sum(l, "gpu_hours");
    } else {
      row["idle_gpu_hours"] = Sum(row, "idle_gpu_hours") + Sum(l, "idle_gpu_hours");
      row["idle_cost"] = Sum(row, "idle_cost") + Sum(l, "idle_cost");
    }
    if (l.value("kind", "") == "reservation") {
      row["reserved_unused_gpu_hours"] =
          Sum(row, "reserved_unused_gpu_hours") + Sum(l, "gpu_hours");
      row["reserved_unused_cost"] = Sum(row, "reserved_unused_cost") + Sum(l, "gpu_cost");
    } else {
      jobs[key].insert(l.value("job", int64_t{0}));
    }
    if (!l.value("currency", "").empty()) currencies[key].insert(l.value("currency", ""));
  }
  json out = json::array();
  for (auto& [key, row] : rows) {
    row["jobs"] = jobs[key].size();
    row["currency"] = absl::StrJoin(currencies[key], "+");
    out.push_back(std::move(row));
  }
  return json{{"by", by}, {"rows", out}};
}

absl::StatusOr<std::pair<int64_t, int64_t>> MonthRange(const std::string& month) {
  absl::Time t;
  std::string err;
  if (month.size() != 7 || !absl::ParseTime("%Y-%m", month, absl::UTCTimeZone(), &t, &err)) {
    return absl::InvalidArgumentError(
        absl::StrCat("month: \"", month.substr(0, 20), "\" is not a month such as 2026-11"));
  }
  const absl::CivilMonth m = absl::ToCivilMonth(t, absl::UTCTimeZone());
  return std::pair{absl::ToUnixMicros(absl::FromCivil(m, absl::UTCTimeZone())),
                   absl::ToUnixMicros(absl::FromCivil(m + 1, absl::UTCTimeZone()))};
}

const std::vector<std::string>& InvoiceColumns() {
  static const std::vector<std::string> kColumns = {"tenant",
                                                    "project",
                                                    "queue",
                                                    "user",
                                                    "job",
                                                    "attempt",
                                                    "name",
                                                    "kind",
                                                    "mode",
                                                    "models",
                                                    "end",
                                                    "from_us",
                                                    "to_us",
                                                    "hours",
                                                    "gpu_hours",
                                                    "gpu_price",
                                                    "gpu_cost",
                                                    "unpriced_gpu_hours",
                                                    "cpu_core_hours",
                                                    "cpu_price",
                                                    "cpu_cost",
                                                    "memory_gib_hours",
                                                    "memory_price",
                                                    "memory_cost",
                                                    "total",
                                                    "idle_gpu_hours",
                                                    "idle_cost",
                                                    "price",
                                                    "currency"};
  return kColumns;
}

}  // namespace carve
