#include "runtime/scheduling_grants.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {

namespace {

using Names = std::optional<std::vector<std::string>>;

bool Listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Whether a queue's or class's `tenants` grants `tenant`; `fallback` when it says nothing.
bool Grants(const Names& tenants, const std::string& tenant, bool fallback) {
  if (!tenants) return fallback;
  return Listed(*tenants, "*") || Listed(*tenants, tenant);
}

std::string ClassList(const std::vector<PriorityClass>& classes) {
  std::vector<std::string> names;
  for (const PriorityClass& c : classes)
    names.push_back(absl::StrCat(c.name, " (", c.priority, ")"));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

int64_t StandardPriority(const Configuration& config) {
  for (const PriorityClass& c : config.Classes()) {
    if (c.name == "standard") return c.priority;
  }
  return 100;
}

}  // namespace

std::vector<std::string> UsableQueues(const Configuration& config, const std::string& tenant,
                                      const std::string& project) {
  const ProjectConfig* p = config.Project(project);
  if (p != nullptr && p->queues) return *p->queues;
  // The built-in default queue serves everyone unless an applied document for it says otherwise.
  std::vector<std::string> out;
  const QueueConfig* fallback = config.Queue("default");
  if (Grants(fallback == nullptr ? std::nullopt : fallback->tenants, tenant, true)) {
    out.push_back("default");
  }
  for (const QueueConfig* q : config.Queues()) {
    if (q->spec.name != "default" && Grants(q->tenants, tenant, false)) {
      out.push_back(q->spec.name);
    }
  }
  return out;
}

bool QueueUsable(const Configuration& config, const std::string& tenant, const std::string& project,
                 const std::string& queue) {
  return config.Exists("queue", queue) && Listed(UsableQueues(config, tenant, project), queue);
}

std::vector<PriorityClass> UsableClasses(const Configuration& config, const std::string& tenant,
                                         const std::string& project) {
  const ProjectConfig* p = config.Project(project);
  const Names* list = p != nullptr && p->priority_classes ? &p->priority_classes : nullptr;
  std::vector<PriorityClass> out;
  for (const PriorityClass& c : config.Classes()) {
    const PriorityClassConfig* applied = config.Class(c.name);
    bool usable = list != nullptr ? Listed(**list, c.name)
                                  : Grants(applied == nullptr ? std::nullopt : applied->tenants,
                                           tenant, c.name == "standard" || c.name == "exploratory");
    if (usable) out.push_back(c);
  }
  if (list != nullptr) {  // in the project's order
    auto rank = [&](const PriorityClass& c) {
      return std::find((*list)->begin(), (*list)->end(), c.name) - (*list)->begin();
    };
    std::stable_sort(out.begin(), out.end(), [&](const PriorityClass& a, const PriorityClass& b) {
      return rank(a) < rank(b);
    });
  }
  return out;
}

std::string DefaultClass(const Configuration& config, const std::string& tenant,
                         const std::string& project) {
  std::vector<PriorityClass> usable = UsableClasses(config, tenant, project);
  for (const PriorityClass& c : usable) {
    if (c.name == "standard") return c.name;
  }
  return usable.empty() ? "" : usable.front().name;
}

absl::Status CheckSchedulingCaps(const Configuration& config, const std::string& tenant,
                                 const std::string& project, const std::string& priority_class,
                                 int64_t priority, bool preemptible) {
  std::vector<PriorityClass> usable = UsableClasses(config, tenant, project);
  std::string allowed = "classes allowed: " + ClassList(usable);
  auto cls = std::find_if(usable.begin(), usable.end(),
                          [&](const PriorityClass& c) { return c.name == priority_class; });
  if (cls == usable.end()) {
    // The same answer whether the class does not exist or is not this project's to use.
    return absl::PermissionDeniedError(absl::StrCat("priority_class: no class \"", priority_class,
                                                    "\" that project ", project, " may use; ",
                                                    allowed));
  }
  const ProjectConfig* p = config.Project(project);
  bool has_max = p != nullptr && p->max_priority.has_value();
  int64_t max = has_max ? *p->max_priority : StandardPriority(config);
  if (priority > std::max(max, cls->priority)) {
    return absl::PermissionDeniedError(
        absl::StrCat("priority: ", priority, " exceeds project ", project, "'s max_priority ", max,
                     has_max ? "" : " (the default: the standard class's priority)", " and class ",
                     cls->name, "'s priority ", cls->priority, "; ", allowed));
  }
  bool may_pin = p != nullptr && p->allow_non_preemptible;
  if (!preemptible && cls->preemptible && !may_pin) {
    return absl::PermissionDeniedError(
        absl::StrCat("preemptible: project ", project,
                     " may not run non-preemptible jobs (its allow_non_preemptible is not set); "
                     "only a non-preemptible class it may use makes a job so; ",
                     allowed));
  }
  return absl::OkStatus();
}

}  // namespace carve
