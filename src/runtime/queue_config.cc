#include "runtime/queue_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Field(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

absl::Status CheckResources(const json& doc, const std::string& field, const GpuCatalog& catalog) {
  if (!doc.contains(field)) return absl::OkStatus();
  const json& list = doc[field];
  if (!list.is_object()) return Field(field, "must be a map of resource: amount");
  for (const auto& [name, amount] : list.items()) {
    auto canonical = CanonicalResource(name, catalog);
    if (!canonical.ok()) return Field(field + "." + name, canonical.status().message());
    auto parsed = ParseResourceAmount(*canonical, Text(amount));
    if (!parsed.ok()) return Field(field + "." + name, parsed.status().message());
  }
  return absl::OkStatus();
}

ResourceList ReadResources(const json& doc, const std::string& field, const GpuCatalog& catalog) {
  ResourceList out;
  if (!doc.contains(field)) return out;
  const json& list = doc[field];
  for (const auto& [name, amount] : list.items()) {
    auto canonical = CanonicalResource(name, catalog);
    if (!canonical.ok()) continue;  // checked when applied
    out[*canonical] = ParseResourceAmount(*canonical, Text(amount)).value_or(0);
  }
  return out;
}

}  // namespace

absl::Status CheckQueueDoc(const json& doc, const GpuCatalog& catalog) {
  for (const char* field : {"quota", "borrowing_limit", "lending_limit"}) {
    if (absl::Status s = CheckResources(doc, field, catalog); !s.ok()) return s;
  }
  if (doc.contains("weight") && (!doc["weight"].is_number() || doc["weight"].get<double>() <= 0)) {
    return Field("weight", "must be a positive number");
  }
  for (const char* field : {"pool", "cohort"}) {
    if (doc.contains(field) && !doc[field].is_string()) return Field(field, "must be a string");
  }
  bool cohort = !doc.value("cohort", "").empty();
  for (const char* field : {"borrowing_limit", "lending_limit"}) {
    if (doc.contains(field) && !cohort) {
      return Field(field, "only a queue in a cohort borrows or lends; set cohort");
    }
  }
  ResourceList nominal = ReadResources(doc, "quota", catalog);
  for (const char* field : {"borrowing_limit", "lending_limit"}) {
    for (const auto& [name, amount] : ReadResources(doc, field, catalog)) {
      if (!nominal.count(name)) {
        return Field(absl::StrCat(field, ".", name), "has no quota for this resource");
      }
    }
  }
  return absl::OkStatus();
}

QueueSpec QueueFromDoc(const json& doc, const GpuCatalog& catalog) {
  QueueSpec q;
  q.name = doc.value("name", "");
  q.pool = doc.value("pool", "");
  q.cohort = doc.value("cohort", "");
  q.weight = doc.value("weight", 1.0);
  q.nominal = ReadResources(doc, "quota", catalog);
  q.borrowing_limit = ReadResources(doc, "borrowing_limit", catalog);
  q.lending_limit = ReadResources(doc, "lending_limit", catalog);
  return q;
}

absl::Status CheckPriorityClassDoc(const json& doc) {
  if (!doc.contains("priority") || !doc["priority"].is_number_integer()) {
    return Field("priority", "is required, an integer");
  }
  int64_t p = doc["priority"].get<int64_t>();
  if (p < -1000000 || p > 1000000) return Field("priority", "must be in [-1000000, 1000000]");
  if (doc.contains("preemptible") && !doc["preemptible"].is_boolean()) {
    return Field("preemptible", "must be true or false");
  }
  return absl::OkStatus();
}

std::vector<PriorityClass> PriorityClasses(
    const std::map<std::pair<std::string, std::string>, json>& objects) {
  std::vector<PriorityClass> classes = BuiltInPriorityClasses();
  for (const auto& [key, doc] : objects) {
    if (key.first != "priority-class") continue;
    PriorityClass c{key.second, doc.value("priority", int64_t{0}), doc.value("preemptible", true)};
    auto same = std::find_if(classes.begin(), classes.end(),
                             [&](const PriorityClass& k) { return k.name == c.name; });
    if (same != classes.end()) {
      *same = c;
    } else {
      classes.push_back(c);
    }
  }
  return classes;
}

json ResourcesToJson(const ResourceList& list) {
  json out = json::object();
  for (const auto& [name, amount] : list) out[name] = FormatResourceAmount(name, amount);
  return out;
}

}  // namespace carve
