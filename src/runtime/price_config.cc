#include "runtime/price_config.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Field(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A price: a finite number from 0 to a million per hour.
absl::StatusOr<double> Amount(const std::string& field, const json& v) {
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1e6) {
    return Field(field, absl::StrCat(v.dump().substr(0, 40),
                                     " is not a price: a number from 0 to 1000000 per hour"));
  }
  return v.get<double>();
}

absl::StatusOr<int64_t> Effective(const json& doc) {
  if (!doc.contains("effective_from") || !doc["effective_from"].is_string()) {
    return Field("effective_from", "is required: a UTC date (2026-11-01) or time");
  }
  const std::string text = doc["effective_from"];
  absl::Time t;
  std::string err;
  for (const char* format : {"%Y-%m-%d", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%Ez"}) {
    if (absl::ParseTime(format, text, absl::UTCTimeZone(), &t, &err)) return absl::ToUnixMicros(t);
  }
  return Field("effective_from",
               absl::StrCat("\"", text.substr(0, 40),
                            "\" is not a date (2026-11-01) or time (2026-11-01T00:00:00Z)"));
}

absl::Status GpuPrices(const json& doc, const GpuCatalog& catalog, PriceConfig& p) {
  if (!doc.contains("gpu_hour")) return absl::OkStatus();
  static const std::set<std::string> kModes = {"exclusive", "shared", "partition", "reserved", "*"};
  const json& table = doc["gpu_hour"];
  if (!table.is_object()) return Field("gpu_hour", "must be a map of GPU model to price");
  for (const auto& [key, v] : table.items()) {
    const std::string field = absl::StrCat("gpu_hour.", key);
    std::string model = key;
    if (key != "*") {
      auto id = catalog.Find(key);
      if (!id.ok()) return Field(field, absl::StrCat("no GPU model \"", key.substr(0, 40), "\""));
      model = catalog.model(*id).name;
    }
    if (!v.is_object()) {
      auto a = Amount(field, v);
      if (!a.ok()) return a.status();
      p.gpu_hour[model]["*"] = *a;
      continue;
    }
    for (const auto& [mode, price] : v.items()) {
      if (!kModes.count(mode)) {
        return Field(field, absl::StrCat("\"", mode.substr(0, 40), "\" is not a delivery mode: ",
                                         absl::StrJoin(kModes, ", ")));
      }
      auto a = Amount(absl::StrCat(field, ".", mode), price);
      if (!a.ok()) return a.status();
      p.gpu_hour[model][mode] = *a;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<double> PriceConfig::GpuHour(const std::string& model,
                                           const std::string& mode) const {
  for (const std::string& m : {model, std::string("*")}) {
    auto by_model = gpu_hour.find(m);
    if (by_model == gpu_hour.end()) continue;
    for (const std::string& d : {mode, std::string("*")}) {
      if (auto price = by_model->second.find(d); price != by_model->second.end()) {
        return price->second;
      }
    }
  }
  return std::nullopt;
}

absl::StatusOr<PriceConfig> DecodePrice(const json& doc, const GpuCatalog& catalog) {
  static const std::set<std::string> kKnown = {"kind",           "name",           "description",
                                               "effective_from", "currency",       "gpu_hour",
                                               "cpu_core_hour",  "memory_gib_hour"};
  for (const auto& [key, value] : doc.items()) {
    if (!kKnown.count(key)) {
      return Field(key, absl::StrCat("unknown field; known: ", absl::StrJoin(kKnown, ", ")));
    }
  }
  PriceConfig p;
  p.name = doc.value("name", "");
  auto effective = Effective(doc);
  if (!effective.ok()) return effective.status();
  p.effective_us = *effective;
  if (doc.contains("currency")) {
    const json& c = doc["currency"];
    if (!c.is_string() || c.get<std::string>().empty() || c.get<std::string>().size() > 8) {
      return Field("currency", "must be a short label such as USD");
    }
    p.currency = c;
  }
  if (absl::Status s = GpuPrices(doc, catalog, p); !s.ok()) return s;
  for (auto [key, out] : {std::pair{"cpu_core_hour", &p.cpu_core_hour},
                          std::pair{"memory_gib_hour", &p.memory_gib_hour}}) {
    if (!doc.contains(key)) continue;
    auto a = Amount(key, doc[key]);
    if (!a.ok()) return a.status();
    *out = *a;
  }
  return p;
}

}  // namespace carve
