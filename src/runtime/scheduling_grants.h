// Who may use which queue and priority class, and how high a project's jobs may rank
// (docs/scheduling.md, "Who may use what"). Reads the applied documents only: no I/O.
//
//   kind: queue            tenants: [acme]        # or ["*"]: every tenant; absent: admins only
//   kind: priority-class   tenants: [acme]        # the same; standard and exploratory default to
//   all kind: project          queues: [a, b]         # exactly these queues (an admin's grant)
//                          priority_classes: [standard, deadline]   # exactly these classes
//                          max_priority: 500      # default: the standard class's priority
//                          allow_non_preemptible: true              # default false
// Admins are not limited by any of this; the built-in `default` queue is usable by every tenant.
#ifndef CARVE_RUNTIME_SCHEDULING_GRANTS_H_
#define CARVE_RUNTIME_SCHEDULING_GRANTS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/sched/queueing/order.h"
#include "nlohmann/json.hpp"

namespace carve {

// The applied documents by (kind, name).
using ObjectMap = std::map<std::pair<std::string, std::string>, nlohmann::json>;

// The queues a job of `tenant`/`project` may use, in the project's order or by name.
std::vector<std::string> UsableQueues(const ObjectMap& objects, const std::string& tenant,
                                      const std::string& project);
bool QueueUsable(const ObjectMap& objects, const std::string& tenant, const std::string& project,
                 const std::string& queue);

// The priority classes a job of `tenant`/`project` may use.
std::vector<PriorityClass> UsableClasses(const ObjectMap& objects, const std::string& tenant,
                                         const std::string& project);
// The class a job that names none gets: standard when usable, else the first usable one ("" when
// none is).
std::string DefaultClass(const ObjectMap& objects, const std::string& tenant,
                         const std::string& project);

// Checks a capped (non-admin) job's resolved class, priority and preemptibility against its
// project: the class must be usable; the priority at most the larger of the class's priority and
// the project's max_priority (default: the standard class's priority); non-preemptible only when
// the class is or the project allows it. PermissionDenied says what is allowed.
absl::Status CheckSchedulingCaps(const ObjectMap& objects, const std::string& tenant,
                                 const std::string& project, const std::string& priority_class,
                                 int64_t priority, bool preemptible);

// Apply-time checks of the grant fields of a queue, priority-class or project document; `exists`
// says whether a (kind, name) exists or is applied alongside. The error names the field.
absl::Status CheckGrantFields(
    const nlohmann::json& doc, const std::string& kind,
    const std::function<bool(const std::string&, const std::string&)>& exists);

}  // namespace carve

#endif  // CARVE_RUNTIME_SCHEDULING_GRANTS_H_
