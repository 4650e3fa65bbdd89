// kind: notification — a tenant's webhook for the events it wants (docs/operations.md,
// "Notifications"):
//   kind: notification
//   name: acme-alerts
//   tenant: acme                   # whose events; a tenant's webhook never gets another's
//   project: vision                # optional: only that project's job events
//   url: https://hooks.example.com/carve
//   secret: a-long-random-string   # signs each delivery (HMAC-SHA256); never listed back
//   events: [job., device.]        # event type prefixes; default [job.]
//   wait_longer_than: 30m          # optional: a job.wait-exceeded event once a job of the
//                                  # tenant has waited this long (once per wait)
#ifndef CARVE_RUNTIME_NOTIFICATION_CONFIG_H_
#define CARVE_RUNTIME_NOTIFICATION_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve {

struct NotificationConfig {
  std::string name;
  std::string tenant;
  std::string project;  // "": every project of the tenant
  std::string url;
  std::string secret;
  // The URL, parsed at apply: scheme, host (a name or IPv4 address), port 1-65535, path.
  bool https = false;
  std::string host;
  int port = 0;
  std::string path = "/";
  std::vector<std::string> events = {"job."};
  int64_t wait_longer_than_us = 0;  // 0: no job.wait-exceeded events

  // Whether events of `type` are wanted (job.wait-exceeded: see WantsWait).
  bool Wants(const std::string& type) const;
  // Whether a job.wait-exceeded event written for `threshold_us` is this notification's.
  bool WantsWait(int64_t threshold_us) const {
    return wait_longer_than_us > 0 && threshold_us == wait_longer_than_us;
  }
};

inline constexpr size_t kMinNotificationSecret = 16;
inline constexpr char kWaitExceeded[] = "job.wait-exceeded";

// Decodes the fields after kind and name (checked by the caller); `tenant_exists` and
// `project_exists(tenant, project)` answer references.
absl::StatusOr<NotificationConfig> DecodeNotification(
    const nlohmann::json& doc, const std::function<bool(const std::string&)>& tenant_exists,
    const std::function<bool(const std::string&)>& project_exists);

// The document without its secret ("(set)"); `keep_url` false: the URL cut to scheme, host and
// port (its path and query may themselves be a credential), as the notification.applied event,
// which the tenant's members read, shows it.
nlohmann::json RedactNotification(const nlohmann::json& doc, bool keep_url);

}  // namespace carve

#endif  // CARVE_RUNTIME_NOTIFICATION_CONFIG_H_
