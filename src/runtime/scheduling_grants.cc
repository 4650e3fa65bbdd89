#include "runtime/scheduling_grants.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/queue_config.h"

namespace carve {

using json = nlohmann::json;

namespace {

const json* Find(const ObjectMap& objects, const std::string& kind, const std::string& name) {
  auto it = objects.find({kind, name});
  return it == objects.end() ? nullptr : &it->second;
}

// The project's list in `field`, when it has one.
const json* ProjectList(const ObjectMap& objects, const std::string& project,
                        const std::string& field) {
  const json* doc = Find(objects, "project", project);
  if (doc == nullptr || !doc->contains(field) || !(*doc)[field].is_array()) return nullptr;
  return &(*doc)[field];
}

bool Listed(const json& list, const std::string& name) {
  return std::any_of(list.begin(), list.end(),
                     [&](const json& v) { return v.is_string() && v.get<std::string>() == name; });
}

// Whether a queue or class document grants `tenant`; `fallback` when it says nothing.
bool Grants(const json* doc, const std::string& tenant, bool fallback) {
  if (doc == nullptr || !doc->contains("tenants")) return fallback;
  const json& tenants = (*doc)["tenants"];
  return tenants.is_array() && (Listed(tenants, "*") || Listed(tenants, tenant));
}

std::string ClassList(const std::vector<PriorityClass>& classes) {
  std::vector<std::string> names;
  for (const PriorityClass& c : classes)
    names.push_back(absl::StrCat(c.name, " (", c.priority, ")"));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

int64_t StandardPriority(const ObjectMap& objects) {
  for (const PriorityClass& c : PriorityClasses(objects)) {
    if (c.name == "standard") return c.priority;
  }
  return 100;
}

absl::Status CheckNameList(
    const json& doc, const std::string& field, const std::string& kind, bool star,
    const std::function<bool(const std::string&, const std::string&)>& exists) {
  if (!doc.contains(field)) return absl::OkStatus();
  const json& list = doc[field];
  if (!list.is_array()) return absl::InvalidArgumentError(field + ": must be a list of names");
  for (const json& v : list) {
    if (!v.is_string()) return absl::InvalidArgumentError(field + ": must be a list of names");
    std::string name = v.get<std::string>();
    if ((star && name == "*") || exists(kind, name)) continue;
    return absl::InvalidArgumentError(absl::StrCat(field, ": no ", kind, " \"", name,
                                                   "\" (apply it first or alongside",
                                                   star ? "; \"*\" means every tenant)" : ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> UsableQueues(const ObjectMap& objects, const std::string& tenant,
                                      const std::string& project) {
  std::vector<std::string> out;
  if (const json* list = ProjectList(objects, project, "queues")) {
    for (const json& q : *list) {
      if (q.is_string()) out.push_back(q.get<std::string>());
    }
    return out;
  }
  // The built-in default queue serves everyone unless an applied document for it says otherwise.
  if (Grants(Find(objects, "queue", "default"), tenant, true)) out.push_back("default");
  for (const auto& [key, doc] : objects) {
    if (key.first == "queue" && key.second != "default" && Grants(&doc, tenant, false)) {
      out.push_back(key.second);
    }
  }
  return out;
}

bool QueueUsable(const ObjectMap& objects, const std::string& tenant, const std::string& project,
                 const std::string& queue) {
  std::vector<std::string> usable = UsableQueues(objects, tenant, project);
  bool exists = queue == "default" || objects.count({"queue", queue}) > 0;
  return exists && std::find(usable.begin(), usable.end(), queue) != usable.end();
}

std::vector<PriorityClass> UsableClasses(const ObjectMap& objects, const std::string& tenant,
                                         const std::string& project) {
  const json* list = ProjectList(objects, project, "priority_classes");
  std::vector<PriorityClass> out;
  for (const PriorityClass& c : PriorityClasses(objects)) {
    bool usable = list != nullptr ? Listed(*list, c.name)
                                  : Grants(Find(objects, "priority-class", c.name), tenant,
                                           c.name == "standard" || c.name == "exploratory");
    if (usable) out.push_back(c);
  }
  if (list != nullptr) {  // in the project's order
    auto rank = [&](const PriorityClass& c) {
      return std::find_if(list->begin(), list->end(), [&](const json& v) { return v == c.name; }) -
             list->begin();
    };
    std::stable_sort(out.begin(), out.end(), [&](const PriorityClass& a, const PriorityClass& b) {
      return rank(a) < rank(b);
    });
  }
  return out;
}

std::string DefaultClass(const ObjectMap& objects, const std::string& tenant,
                         const std::string& project) {
  std::vector<PriorityClass> usable = UsableClasses(objects, tenant, project);
  for (const PriorityClass& c : usable) {
    if (c.name == "standard") return c.name;
  }
  return usable.empty() ? "" : usable.front().name;
}

absl::Status CheckSchedulingCaps(const ObjectMap& objects, const std::string& tenant,
                                 const std::string& project, const std::string& priority_class,
                                 int64_t priority, bool preemptible) {
  std::vector<PriorityClass> usable = UsableClasses(objects, tenant, project);
  std::string allowed = "classes allowed: " + ClassList(usable);
  auto cls = std::find_if(usable.begin(), usable.end(),
                          [&](const PriorityClass& c) { return c.name == priority_class; });
  if (cls == usable.end()) {
    // The same answer whether the class does not exist or is not this project's to use.
    return absl::PermissionDeniedError(absl::StrCat("priority_class: no class \"", priority_class,
                                                    "\" that project ", project, " may use; ",
                                                    allowed));
  }
  const json* doc = Find(objects, "project", project);
  bool has_max =
      doc != nullptr && doc->contains("max_priority") && (*doc)["max_priority"].is_number_integer();
  int64_t max = has_max ? (*doc)["max_priority"].get<int64_t>() : StandardPriority(objects);
  if (priority > std::max(max, cls->priority)) {
    return absl::PermissionDeniedError(
        absl::StrCat("priority: ", priority, " exceeds project ", project, "'s max_priority ", max,
                     has_max ? "" : " (the default: the standard class's priority)", " and class ",
                     cls->name, "'s priority ", cls->priority, "; ", allowed));
  }
  bool may_pin = doc != nullptr && doc->value("allow_non_preemptible", json(false)) == json(true);
  if (!preemptible && cls->preemptible && !may_pin) {
    return absl::PermissionDeniedError(
        absl::StrCat("preemptible: project ", project,
                     " may not run non-preemptible jobs (its allow_non_preemptible is not set); "
                     "only a non-preemptible class it may use makes a job so; ",
                     allowed));
  }
  return absl::OkStatus();
}

absl::Status CheckGrantFields(
    const json& doc, const std::string& kind,
    const std::function<bool(const std::string&, const std::string&)>& exists) {
  if (kind == "queue" || kind == "priority-class") {
    return CheckNameList(doc, "tenants", "tenant", true, exists);
  }
  if (kind != "project") return absl::OkStatus();
  if (absl::Status s = CheckNameList(doc, "priority_classes", "priority-class", false, exists);
      !s.ok()) {
    return s;
  }
  if (doc.contains("max_priority")) {
    const json& max = doc["max_priority"];
    if (!max.is_number_integer() || max.get<int64_t>() < -1000000 || max.get<int64_t>() > 1000000) {
      return absl::InvalidArgumentError("max_priority: must be an integer in [-1000000, 1000000]");
    }
  }
  if (doc.contains("allow_non_preemptible") && !doc["allow_non_preemptible"].is_boolean()) {
    return absl::InvalidArgumentError("allow_non_preemptible: must be true or false");
  }
  return absl::OkStatus();
}

}  // namespace carve
