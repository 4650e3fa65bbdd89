#include "runtime/reservation_config.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
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

}  // namespace

bool ReservationConfig::Covers(const std::string& node, const std::string& node_pool) const {
  return (!pool.empty() && node_pool == pool) ||
         std::find(nodes.begin(), nodes.end(), node) != nodes.end();
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
  static const std::set<std::string> kKeys = {"kind",  "name",      "description", "tenant",
                                              "queue", "nodes",     "pool",        "start",
                                              "end",   "borrowable"};
  for (const auto& [key, v] : doc.items()) {
    if (!kKeys.count(key)) {
      return Field(key.substr(0, 40),
                   "is not a field of a reservation (tenant, queue, nodes, "
                   "pool, start, end, borrowable)");
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
  if (r.nodes.empty() && r.pool.empty()) {
    return Field("nodes", "a reservation holds nodes: name them (nodes) or a pool (pool)");
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
  if (a.start_us >= b.end_us || b.start_us >= a.end_us) return false;
  if (!a.pool.empty() && a.pool == b.pool) return true;
  return std::any_of(a.nodes.begin(), a.nodes.end(), [&](const std::string& n) {
    return std::find(b.nodes.begin(), b.nodes.end(), n) != b.nodes.end();
  });
}

}  // namespace carve
