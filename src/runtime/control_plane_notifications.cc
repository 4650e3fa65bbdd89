// Webhook notifications (notifier.h): the delivery thread's sources, its status and deliveries.
#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/notifier.h"
#include "runtime/scheduling_grants.h"

namespace carve {

using json = nlohmann::json;

ControlPlane::~ControlPlane() = default;

std::vector<NotificationConfig> ControlPlane::NotificationConfigs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.Notifications();
}

void ControlPlane::StartNotifications() {
  Notifier::Sources sources;
  sources.configs = [this] { return NotificationConfigs(); };
  sources.job_owner = [this](int64_t id) -> std::pair<std::string, std::string> {
    auto job = GetJob(id);
    if (!job.ok()) return {};
    const json spec = job->value("spec", json::object());
    return {spec.value("tenant", ""), spec.value("project", "")};
  };
  sources.queue_user = [this](const std::string& queue, const std::string& tenant,
                              const std::string& project) {
    std::lock_guard<std::mutex> lock(mu_);
    // As `carve queues` shows queues to a member (QueueVisible): the project's usable queues.
    const std::vector<std::string> projects =
        project.empty() ? config_.ProjectsOf(tenant) : std::vector<std::string>{project};
    return std::any_of(projects.begin(), projects.end(), [&](const std::string& p) {
      return QueueUsable(config_, tenant, p, queue);
    });
  };
  sources.now_us = now_;
  notifier_ = std::make_unique<Notifier>(store_, std::move(sources), Notifier::Options{});
  notifier_->Start();
}

void ControlPlane::StopNotifications() {
  if (notifier_) notifier_->Stop();
}

namespace {

absl::Status MayWatch(const Principal& who, const std::string& tenant) {
  if (who.role == Role::kAdmin || (who.role == Role::kTenantAdmin && who.tenant == tenant)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      "a notification's status and deliveries are for admins and its tenant's tenant-admins");
}

}  // namespace

absl::StatusOr<json> ControlPlane::NotificationStatus(const Principal& who) const {
  if (who.role != Role::kAdmin && who.role != Role::kTenantAdmin) {
    return MayWatch(who, "");
  }
  std::set<std::string> visible;
  for (const NotificationConfig& n : NotificationConfigs()) {
    if (MayWatch(who, n.tenant).ok()) visible.insert(n.name);
  }
  json out = json::array();
  for (const json& n : notifier_ ? notifier_->Status() : json::array()) {
    if (visible.count(n.value("name", ""))) out.push_back(n);
  }
  return out;
}

absl::StatusOr<json> ControlPlane::NotificationDeliveries(const std::string& name, int64_t after,
                                                          int64_t limit,
                                                          const Principal& who) const {
  std::string tenant;
  bool found = false;
  for (const NotificationConfig& n : NotificationConfigs()) {
    if (n.name == name) tenant = n.tenant, found = true;
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no notification \"", name, "\"; `carve get notifications` lists them"));
  }
  if (absl::Status s = MayWatch(who, tenant); !s.ok()) return s;
  const std::string scope = Notifier::Scope(tenant, name);
  auto records = store_->List(Notifier::kDeliveryKind, Notifier::DeliveryId(scope, after), limit);
  if (!records.ok()) return records.status();
  json out = json::array();
  for (const StoredRecord& r : *records) {
    if (!absl::StartsWith(r.id, scope + "/")) break;
    json doc = json::parse(r.json, nullptr, false);
    if (!doc.is_discarded()) out.push_back(doc);
  }
  return out;
}

}  // namespace carve
