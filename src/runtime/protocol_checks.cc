#include "runtime/protocol_checks.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/node_records.h"

namespace carve {

using json = nlohmann::json;

namespace {

enum class Type { kString, kNumber, kBool, kObject, kArray, kNumberOrNull, kObjectOrNull };

bool Is(const json& v, Type t) {
  switch (t) {
    case Type::kString:
      return v.is_string();
    case Type::kNumber:  // every number of the protocol is a whole one
      return v.is_number_integer();
    case Type::kBool:
      return v.is_boolean();
    case Type::kObject:
      return v.is_object();
    case Type::kArray:
      return v.is_array();
    case Type::kNumberOrNull:
      return v.is_number_integer() || v.is_null();
    case Type::kObjectOrNull:
      return v.is_object() || v.is_null();
  }
  return false;
}

const char* Name(Type t) {
  switch (t) {
    case Type::kString:
      return "a string";
    case Type::kNumber:
      return "a whole number";
    case Type::kBool:
      return "true or false";
    case Type::kObject:
      return "an object";
    case Type::kArray:
      return "a list";
    case Type::kNumberOrNull:
      return "a whole number or null";
    case Type::kObjectOrNull:
      return "an object or null";
  }
  return "?";
}

using Fields = std::initializer_list<std::pair<const char*, Type>>;

absl::Status CheckObject(const json& o, const std::string& where, Fields fields) {
  if (!o.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
  for (const auto& [key, type] : fields) {
    if (o.contains(key) && !Is(o[key], type)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": must be ", Name(type)));
    }
  }
  return absl::OkStatus();
}

// Each item of the list o[key] (when present) is an object with `fields`.
absl::Status CheckList(const json& o, const std::string& where, const char* key, Fields fields) {
  if (!o.contains(key)) return absl::OkStatus();
  const json& list = o[key];
  if (!list.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, key, ": must be a list"));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    absl::Status s = CheckObject(list[i], absl::StrCat(where, key, "[", i, "]"), fields);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckHeartbeatBody(const json& body) {
  if (absl::Status s = CheckObject(body, "body", {{"node", Type::kString}}); !s.ok()) return s;
  absl::Status s = CheckList(body, "", "replicas",
                             {{"job", Type::kNumber},
                              {"replica", Type::kNumber},
                              {"state", Type::kString},
                              {"pid", Type::kNumber},
                              {"started_us", Type::kNumber},
                              {"ended_us", Type::kNumber},
                              {"enforcement", Type::kString},
                              {"timed_out", Type::kBool},
                              {"oom_killed", Type::kBool},
                              {"exit_code", Type::kNumberOrNull},
                              {"signal", Type::kNumberOrNull},
                              {"reclaim", Type::kObjectOrNull},
                              {"log_truncated_at", Type::kNumber},
                              {"log_disk", Type::kString}});
  if (!s.ok()) return s;
  // References into the body, never copies of it (H1: copies of request bodies recursed).
  static const json kNone = json::array();
  const json& replicas = body.contains("replicas") ? body["replicas"] : kNone;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].contains("reclaim") || replicas[i]["reclaim"].is_null()) continue;
    const json& reclaim = replicas[i]["reclaim"];
    std::string where = absl::StrCat("replicas[", i, "].reclaim.");
    s = CheckObject(reclaim, where + "status", {{"status", Type::kString}});
    if (s.ok()) {
      s = CheckList(reclaim, where, "checks",
                    {{"ok", Type::kBool},
                     {"device", Type::kNumber},
                     {"name", Type::kString},
                     {"observed", Type::kString}});
    }
    if (!s.ok()) return s;
  }
  s = CheckList(body, "", "gpus",
                {{"index", Type::kNumber},
                 {"health", Type::kString},
                 {"health_reason", Type::kString},
                 {"utilization_pct", Type::kNumber},
                 {"share_enforcement", Type::kString},
                 {"mig_instances", Type::kArray},
                 {"residue", Type::kObjectOrNull}});
  if (!s.ok()) return s;
  const json& gpus = body.contains("gpus") ? body["gpus"] : kNone;
  for (size_t i = 0; i < gpus.size(); ++i) {
    s = CheckList(gpus[i], absl::StrCat("gpus[", i, "]."), "mig_instances",
                  {{"uuid", Type::kString}, {"profile", Type::kString}, {"start", Type::kNumber}});
    if (!s.ok()) return s;
    // The node record keeps the residue as sent, so it is read with the record's codec.
    if (gpus[i].contains("residue") && gpus[i]["residue"].is_object()) {
      absl::StatusOr<GpuResidue> residue = GpuResidue::FromJson(gpus[i]["residue"]);
      if (!residue.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("gpus[", i, "].residue: ", residue.status().message()));
      }
    }
  }
  return CheckList(body, "", "layouts",
                   {{"gpu", Type::kNumber},
                    {"request", Type::kString},
                    {"ok", Type::kBool},
                    {"error", Type::kString}});
}

}  // namespace carve
