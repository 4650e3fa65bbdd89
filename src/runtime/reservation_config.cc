#include "runtime/reservation_config.h"

#include <algorithm>
#include <set>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxNodes = 1000;

absl::Status Field(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::StatusOr<int64_t> Time(const json& doc, const std::string& field) {
  if (!doc.contains(field) || !doc[field].is_string()) {
    return Field(field, "is required: a UTC time (2026-12-07T08:00:00Z)");
  }
  const std::string text = doc[field];
  absl::Time t;
  std::string err;
  // From 2000 to 2200: absl also reads "infinite-future", and far years saturate the micros.
  static const absl::Time kFirst =
      absl::FromCivil(absl::CivilSecond(2000, 1, 1), absl::UTCTimeZone());
  static const absl::Time kLast =
      absl::FromCivil(absl::CivilSecond(2200, 1, 1), absl::UTCTimeZone());
  for (const char* format : {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%Ez", "%Y-%m-%d"}) {
    if (!absl::ParseTime(format, text, absl::UTCTimeZone(), &t, &err)) continue;
    if (t < kFirst || t >= kLast) {
      return Field(field,
                   absl::StrCat("\"", text.substr(0, 40), "\" is not between 2000 and 2200"));
    }
    return absl::ToUnixMicros(t);
  }
  return Field(field, absl::StrCat("\"", text.substr(0, 40),
                                   "\" is not a UTC time (2026-12-07T08:00:00Z) or date"));
}

absl::Status Nodes(const json& doc, ReservationConfig& r) {
  if (!doc.contains("nodes")) return absl::OkStatus();
  const json& nodes = doc["nodes"];
  if (!nodes.is_array() || nodes.size() > kMaxNodes) {
    return Field("nodes", absl::StrCat("must be a list of at most ", kMaxNodes, " node names"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string field = absl::StrCat("nodes[", i, "]");
    if (!nodes[i].is_string() || nodes[i].get<std::string>().empty() ||
        nodes[i].get<std::string>().size() > 253) {
      return Field(field, "must be a node name");
    }
    if (!seen.insert(nodes[i].get<std::string>()).second) {
      return Field(field, absl::StrCat("\"", nodes[i].get<std::string>(), "\" is named twice"));
    }
    r.nodes.push_back(nodes[i]);
  }
  return absl::OkStatus();
}

constexpr int64_t kMaxCount = 100'000;

absl::StatusOr<int64_t> Count(const json& gpus, const char* key, const std::string& field) {
  if (!gpus[key].is_number_integer() || gpus[key].get<int64_t>() < 1 ||
      gpus[key].get<int64_t>() > kMaxCount) {
    return Field(field, absl::StrCat("must be a whole number from 1 to ", kMaxCount));
  }
  return gpus[key].get<int64_t>();
}

// gpus: {model: H100, count: 4} | {model, mig: PROFILE, count: N} | {model, shares: 2.5}
absl::Status Gpus(const json& doc, ReservationConfig& r) {
  if (!doc.contains("gpus")) return absl::OkStatus();
  const json& g = doc["gpus"];
  if (!g.is_object()) {
    return Field("gpus",
                 "must be {model: H100, count: 4}, {model, mig: 1g.10gb, count: 14} or "
                 "{model, shares: 2.5}");
  }
  static const std::set<std::string> kKeys = {"model", "count", "mig", "shares"};
  for (const auto& [key, v] : g.items()) {
    if (!kKeys.count(key)) {
      return Field("gpus." + key.substr(0, 40),
                   "is not a field of gpus (model, count, mig, shares)");
    }
  }
  ReservationConfig::Gpus out;
  if (!g.contains("model") || !g["model"].is_string() || g["model"].get<std::string>().empty() ||
      g["model"].get<std::string>().size() > 64) {
    return Field("gpus.model", "is required: a GPU model (H100, A100-80GB, L40S, ...)");
  }
  out.model = g["model"];
  if (g.contains("shares")) {
    if (g.contains("count") || g.contains("mig")) {
      return Field("gpus.shares", "counts GPUs' worth of shares: leave out count and mig");
    }
    if (!g["shares"].is_number() || g["shares"].get<double>() <= 0 ||
        g["shares"].get<double>() > static_cast<double>(kMaxCount)) {
      return Field("gpus.shares", "must be a number of GPUs above 0 (2.5: two and a half GPUs)");
    }
    out.share_milli = static_cast<int64_t>(std::llround(g["shares"].get<double>() * 1000));
    if (out.share_milli < 1) return Field("gpus.shares", "is below one milli-GPU");
  } else {
    if (!g.contains("count")) {
      return Field("gpus.count", "is required: how many GPUs (or MIG instances, with mig)");
    }
    auto count = Count(g, "count", "gpus.count");
    if (!count.ok()) return count.status();
    out.count = *count;
    if (g.contains("mig")) {
      if (!g["mig"].is_string() || g["mig"].get<std::string>().empty() ||
          g["mig"].get<std::string>().size() > 32) {
        return Field("gpus.mig", "must be a MIG profile (1g.10gb)");
      }
      out.mig = g["mig"];
    }
  }
  r.gpus = out;
  return absl::OkStatus();
}

}  // namespace

bool ReservationConfig::Covers(const std::string& node, const std::string& node_pool) const {
  if (gpus) return false;
  return (!pool.empty() && node_pool == pool) ||
         std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

std::string ReservationConfig::GpusText() const {
  if (!gpus) return "";
  if (gpus->share_milli > 0) {
    return absl::StrCat(absl::StrFormat("%g", static_cast<double>(gpus->share_milli) / 1000.0), " ",
                        gpus->model, " GPUs of shares");
  }
  if (!gpus->mig.empty()) {
    return absl::StrCat(gpus->count, " ", gpus->model, " ", gpus->mig,
                        gpus->count == 1 ? " instance" : " instances");
  }
  return absl::StrCat(gpus->count, " ", gpus->model, gpus->count == 1 ? " GPU" : " GPUs");
}

std::string Name(ReservationConfig::Phase phase) {
  switch (phase) {
    case ReservationConfig::Phase::kAhead:
      return "ahead";
    case ReservationConfig::Phase::kActive:
      return "active";
    case ReservationConfig::Phase::kOver:
      break;
  }
  return "over";
}

absl::StatusOr<ReservationConfig> DecodeReservation(
    const json& doc, const std::function<bool(const std::string&, const std::string&)>& exists) {
  static const std::set<std::string> kKeys = {"kind",  "name",  "description", "tenant",
                                              "queue", "nodes", "pool",        "gpus",
                                              "start", "end",   "borrowable"};
  for (const auto& [key, v] : doc.items()) {
    if (!kKeys.count(key)) {
      return Field(key.substr(0, 40),
                   "is not a field of a reservation (tenant, queue, nodes, "
                   "pool, gpus, start, end, borrowable)");
    }
  }
  ReservationConfig r;
  r.name = doc["name"];
  if (!doc.contains("tenant")) return Field("tenant", "is required: the tenant that holds it");
  r.tenant = doc["tenant"];
  if (!exists("tenant", r.tenant)) return Field("tenant", "no tenant \"" + r.tenant + "\"");
  for (const char* key : {"queue", "pool"}) {
    if (doc.contains(key) && !doc[key].is_string()) return Field(key, "must be a string");
  }
  r.queue = doc.value("queue", "");
  if (!r.queue.empty() && !exists("queue", r.queue)) {
    return Field("queue", "no queue \"" + r.queue.substr(0, 64) + "\"");
  }
  r.pool = doc.value("pool", "");
  // A node's own label `pool` names a pool too (labels.h): it need not be applied.
  if (r.pool.size() > 63) return Field("pool", "must be a pool name");
  if (absl::Status s = Nodes(doc, r); !s.ok()) return s;
  if (absl::Status s = Gpus(doc, r); !s.ok()) return s;
  if (r.gpus && !r.nodes.empty()) {
    return Field("gpus",
                 "a reservation holds named nodes or GPUs by count, not both "
                 "(with gpus, pool limits where they are picked)");
  }
  if (r.nodes.empty() && r.pool.empty() && !r.gpus) {
    return Field("nodes",
                 "a reservation holds nodes or GPUs: name nodes (nodes), a pool (pool), or "
                 "count GPUs (gpus: {model: H100, count: 4})");
  }
  auto start = Time(doc, "start");
  if (!start.ok()) return start.status();
  auto end = Time(doc, "end");
  if (!end.ok()) return end.status();
  if (*end <= *start) return Field("end", "must be after start");
  r.start_us = *start;
  r.end_us = *end;
  if (doc.contains("borrowable") && !doc["borrowable"].is_boolean()) {
    return Field("borrowable", "must be true or false");
  }
  r.borrowable = doc.value("borrowable", false);
  return r;
}

bool Overlap(const ReservationConfig& a, const ReservationConfig& b) {
  if (a.start_us >= b.end_us || b.start_us >= a.end_us || a.gpus || b.gpus) return false;
  if (!a.pool.empty() && a.pool == b.pool) return true;
  return std::any_of(a.nodes.begin(), a.nodes.end(), [&](const std::string& n) {
    return std::find(b.nodes.begin(), b.nodes.end(), n) != b.nodes.end();
  });
}

}  // namespace carve
