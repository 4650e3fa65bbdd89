// Audit: the hash-chained event log read as audit records (actor, tenant, time, target, reason,
// details), exported per tenant and time range, and verified link by link.
#include "runtime/audit_log.h"

#include "runtime/archive.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace carve {

using json = nlohmann::json;

std::string EventTenant(const std::string& type, const json& details) {
  if (!details.is_object()) return "";
  if (details.contains("tenant") && details["tenant"].is_string()) return details["tenant"];
  if (type == "tenant.applied") return details.value("name", "");
  return "";
}

namespace {

json AuditRecord(const StoredEvent& e) {
  json details = json::parse(e.details_json, nullptr, false);
  std::string tenant = EventTenant(e.type, details);
  std::string project =
      details.is_object() && details.contains("project") && details["project"].is_string()
          ? details["project"].get<std::string>()
          : "";
  return {{"seq", e.seq},
          {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(e.time_us),
                                    absl::UTCTimeZone())},
          {"time_us", e.time_us},
          {"actor", e.actor},
          {"tenant", tenant},
          {"project", project},
          {"action", e.type},
          {"target", e.subject},
          {"reason", e.reason},
          {"details", details},
          {"prev_hash", e.prev_hash},
          {"hash", e.hash}};
}

}  // namespace

absl::StatusOr<json> AuditLog::Events(int64_t after, int64_t limit) const {
  barrier_();
  auto events = store_->Events(after, limit);
  if (!events.ok()) return events.status();
  json out = json::array();
  for (const StoredEvent& e : *events) {
    out.push_back({{"seq", e.seq},
                   {"time_us", e.time_us},
                   {"actor", e.actor},
                   {"type", e.type},
                   {"subject", e.subject},
                   {"reason", e.reason},
                   {"details", json::parse(e.details_json, nullptr, false)},
                   {"hash", e.hash}});
  }
  return out;
}

absl::StatusOr<json> AuditLog::Event(int64_t seq) const {
  auto list = Events(seq - 1, 1);
  if (!list.ok()) return list.status();
  if (list->empty() || (*list)[0]["seq"] != seq) {
    return absl::NotFoundError(absl::StrCat("no event ", seq, "; `carve events` lists them"));
  }
  return (*list)[0];
}

absl::StatusOr<json> AuditLog::AuditPage(const Query& query, const Principal& who, int64_t after,
                                         int64_t limit, int64_t* next) const {
  if (absl::Status s = Authorize(who, Verb::kReport); !s.ok()) return s;
  Query q = query;
  if (who.role == Role::kTenantAdmin) {
    if (q.tenant.empty()) q.tenant = who.tenant;
    if (q.tenant != who.tenant) {
      return absl::PermissionDeniedError(
          absl::StrCat("a tenant-admin exports only its tenant (", who.tenant, ")"));
    }
  }
  barrier_();
  json out = json::array();
  constexpr int64_t kPage = 2000;
  for (;;) {
    auto events = store_->Events(after, kPage);
    if (!events.ok()) return events.status();
    for (const StoredEvent& e : *events) {
      after = e.seq;
      if (e.time_us < q.since_us || (q.until_us > 0 && e.time_us >= q.until_us)) continue;
      json record = AuditRecord(e);
      if (!q.tenant.empty() && record["tenant"] != q.tenant) continue;
      out.push_back(std::move(record));
      if (static_cast<int64_t>(out.size()) >= limit) {
        *next = after;
        return out;
      }
    }
    if (static_cast<int64_t>(events->size()) < kPage) {
      *next = 0;
      return out;
    }
  }
}

absl::StatusOr<json> AuditLog::Verify() const {
  barrier_();
  absl::Status chain = store_->VerifyEventChain();
  int64_t count = 0;
  StoredEvent head;
  for (int64_t after = 0;;) {
    auto events = store_->Events(after, 10000);
    if (!events.ok()) return events.status();
    if (events->empty()) break;
    count += static_cast<int64_t>(events->size());
    head = events->back();
    after = head.seq;
  }
  json out = {
      {"ok", chain.ok()}, {"events", count}, {"head_seq", head.seq}, {"head_hash", head.hash}};
  if (!chain.ok()) out["error"] = std::string(chain.message());
  // A store that began with `carve import` keeps the exported server's log apart (archive.h).
  auto imported = store_->LastId(kImportedEventKind);
  if (!imported.ok()) return imported.status();
  if (imported->has_value()) {
    auto check = VerifyImportedEvents(*store_);
    out["imported"] =
        check.ok() ? *check : json{{"ok", false}, {"error", std::string(check.status().message())}};
    if (!check.ok()) out["ok"] = false;
  }
  return out;
}

}  // namespace carve
