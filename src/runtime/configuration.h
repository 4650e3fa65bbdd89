// The applied configuration (`carve apply`): tenants, projects, queues and priority classes as
// typed records, each decoded once when it is applied or loaded. JSON stays at the edges: a
// record keeps the document it was applied as, which is what the store holds and `carve get`
// lists. Not thread-safe: the control plane holds it under its lock. Who may use which queue and
// class is answered from it in scheduling_grants.h.
#ifndef CARVE_RUNTIME_CONFIGURATION_H_
#define CARVE_RUNTIME_CONFIGURATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/queueing/order.h"
#include "core/sched/queueing/quota.h"
#include "nlohmann/json.hpp"
#include "runtime/labels.h"
#include "runtime/notification_config.h"
#include "runtime/price_config.h"
#include "runtime/reservation_config.h"

namespace carve {

// kind: tenant — the Unix user and group its jobs run as on every node (never root).
struct TenantConfig {
  std::string name;
  std::optional<int64_t> uid;
  std::optional<int64_t> gid;
};

// kind: project — belongs to one tenant; an admin may pin its queues and classes.
struct ProjectConfig {
  std::string name;
  std::string tenant;
  std::optional<std::vector<std::string>> queues = {};            // exactly these, in order
  std::optional<std::vector<std::string>> priority_classes = {};  // exactly these, in order
  std::optional<int64_t> max_priority = {};  // default: the standard class's priority
  bool allow_non_preemptible = false;
};

enum class IdleAction { kFlag, kStop };
std::string Name(IdleAction action);

// kind: queue
//   name: team-a
//   pool: default                 # optional: only nodes of this pool (node label `pool`)
//   cohort: research              # optional: lends and borrows unused quota within the cohort
//   weight: 2                     # fair-share weight, default 1
//   quota: {gpus: 8, gpus/H200: 8, gpu-share: 2, mig/3g.40gb: 4, cpu: 64, memory: 512Gi}
//   borrowing_limit: {gpus: 4}    # optional, per resource: most it may use above its quota
//   lending_limit: {gpus: 2}      # optional, per resource: most of its unused quota it lends
//   tenants: [acme]               # who may use it (scheduling_grants.h)
//   idle_after: 30m               # optional: GPUs without activity this long are idle ...
//   idle_action: flag             # ... and are flagged (event job.idle) or stopped
struct QueueConfig {
  QueueSpec spec;
  std::optional<std::vector<std::string>> tenants;  // "*": every tenant; absent: admins only
  std::optional<int64_t> idle_after_us;             // GPUs without activity this long: idle
  std::string idle_after;                           // as written ("30m"), for messages
  IdleAction idle_action = IdleAction::kFlag;
};

// kind: priority-class.
struct PriorityClassConfig {
  PriorityClass priority_class;
  std::optional<std::vector<std::string>> tenants;  // absent: standard and exploratory for all
};

// kind: pool
//   name: train
//   selector: {gpu-class: h200}   # the nodes with every one of these labels (runtime/labels.h)
// A node's own `pool` label wins over any selector; of several matching pools the first by name.
struct PoolConfig {
  PoolSelector selector;  // its name is the pool's
};

// One applied document, decoded.
struct ConfigObject {
  std::variant<TenantConfig, ProjectConfig, QueueConfig, PriorityClassConfig, PoolConfig,
               NotificationConfig, PriceConfig, ReservationConfig>
      record;
  nlohmann::json doc;  // as applied: what the store keeps and `carve get` lists
  const std::string& kind() const;
  const std::string& name() const;
};

// Whether (kind, name) exists or is applied alongside: for references between documents.
using ExistsFn = std::function<bool(const std::string& kind, const std::string& name)>;

// The kinds `carve apply` configures here (node documents are the control plane's).
inline constexpr const char* kConfigKinds[] = {"tenant", "project",      "queue", "priority-class",
                                               "pool",   "notification", "price", "reservation"};

// Decodes one document of a configuration kind; the error names the field ("quota.gpus/Z9: no
// GPU model ..."). `exists` answers the references (a project's tenant and queues, a grant's
// tenants and classes).
absl::StatusOr<ConfigObject> DecodeConfig(const nlohmann::json& doc, const GpuCatalog& catalog,
                                          const ExistsFn& exists);

// A resource list for reports: {"gpus": "8", "memory": "64Gi"}.
nlohmann::json ResourcesToJson(const ResourceList& list);

class Configuration {
 public:
  explicit Configuration(const GpuCatalog* catalog) : catalog_(catalog) {}

  // A stored document, at start: DataLoss naming the record when it does not decode. The decoder
  // is the one `carve apply` uses, so a change that makes it stricter must migrate stored
  // documents first, or a server that accepted them will not start again.
  absl::Status Load(const std::string& kind, const std::string& name, const std::string& bytes);
  // Replaces (or adds) the object; raises revision().
  void Put(ConfigObject object);

  // Whether an object exists; every kind has a built-in "default" (and the built-in classes).
  bool Exists(const std::string& kind, const std::string& name) const;
  const TenantConfig* Tenant(const std::string& name) const;
  const ProjectConfig* Project(const std::string& name) const;
  const QueueConfig* Queue(const std::string& name) const;
  const PriorityClassConfig* Class(const std::string& name) const;  // applied only
  // The applied queues, for the scheduler.
  std::vector<QueueSpec> QueueSpecs() const;
  // The applied pools' selectors, by name (PoolOf).
  std::vector<PoolSelector> Pools() const;
  // The applied notifications (notification_config.h), by name.
  std::vector<NotificationConfig> Notifications() const;
  // The applied prices (price_config.h), by name.
  std::vector<PriceConfig> Prices() const;
  // The applied reservations (reservation_config.h), by name.
  std::vector<ReservationConfig> Reservations() const;
  // The built-in tiers, overridden or extended by applied classes.
  std::vector<PriorityClass> Classes() const;
  // The projects of `tenant`, "default" first.
  std::vector<std::string> ProjectsOf(const std::string& tenant) const;
  // The applied documents of `kind`, after the built-in default.
  nlohmann::json List(const std::string& kind) const;

  uint64_t revision() const { return revision_; }
  size_t size() const { return objects_.size(); }
  const GpuCatalog& catalog() const { return *catalog_; }
  // The applied queues, by name.
  std::vector<const QueueConfig*> Queues() const;

 private:
  const ConfigObject* Find(const std::string& kind, const std::string& name) const;
  // Calls `f` with each applied object of `kind`, by name.
  template <typename F>
  void Each(const std::string& kind, F f) const;

  const GpuCatalog* catalog_;
  std::map<std::pair<std::string, std::string>, ConfigObject> objects_;  // (kind, name)
  uint64_t revision_ = 0;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_CONFIGURATION_H_
