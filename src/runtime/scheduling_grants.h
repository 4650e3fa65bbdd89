// Who may use which queue and priority class, and how high a project's jobs may rank
// (docs/scheduling.md, "Who may use what"). Reads the applied configuration only: no I/O.
//
//   kind: queue            tenants: [acme]        # or ["*"]: every tenant; absent: admins only
//   kind: priority-class   tenants: [acme]        # the same; standard and exploratory: all
//   kind: project          queues: [a, b]         # exactly these queues (an admin's grant)
//                          priority_classes: [standard, deadline]   # exactly these classes
//                          max_priority: 500      # default: the standard class's priority
//                          allow_non_preemptible: true              # default false
// Admins are not limited by any of this; the built-in `default` queue is usable by every tenant.
#ifndef CARVE_RUNTIME_SCHEDULING_GRANTS_H_
#define CARVE_RUNTIME_SCHEDULING_GRANTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/sched/queueing/order.h"
#include "runtime/configuration.h"

namespace carve {

// The queues a job of `tenant`/`project` may use, in the project's order or by name.
std::vector<std::string> UsableQueues(const Configuration& config, const std::string& tenant,
                                      const std::string& project);
bool QueueUsable(const Configuration& config, const std::string& tenant, const std::string& project,
                 const std::string& queue);

// The priority classes a job of `tenant`/`project` may use.
std::vector<PriorityClass> UsableClasses(const Configuration& config, const std::string& tenant,
                                         const std::string& project);
// The class a job that names none gets: standard when usable, else the first usable one ("" when
// none is).
std::string DefaultClass(const Configuration& config, const std::string& tenant,
                         const std::string& project);

// Checks a capped (non-admin) job's resolved class, priority and preemptibility against its
// project: the class must be usable; the priority at most the larger of the class's priority and
// the project's max_priority (default: the standard class's priority); non-preemptible only when
// the class is or the project allows it. PermissionDenied says what is allowed.
absl::Status CheckSchedulingCaps(const Configuration& config, const std::string& tenant,
                                 const std::string& project, const std::string& priority_class,
                                 int64_t priority, bool preemptible);

}  // namespace carve

#endif  // CARVE_RUNTIME_SCHEDULING_GRANTS_H_
