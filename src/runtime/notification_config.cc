#include "runtime/notification_config.h"

#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/job_spec.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Field(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// scheme://host[:port][/path]: a host name or IPv4 address, no user info, a port 1-65535.
absl::Status ParseUrl(NotificationConfig& n) {
  static const std::regex kUrl(R"((https?)://([A-Za-z0-9.-]{1,253})(?::([0-9]{1,5}))?(/[^\s#]*)?)");
  std::smatch m;
  if (n.url.size() > 2048 || !std::regex_match(n.url, m, kUrl)) {
    return Field("url", "\"" + n.url.substr(0, 200) +
                            "\" is not an http:// or https:// address of a host name or IPv4 "
                            "address (no user info, at most 2048 characters)");
  }
  n.https = m[1] == "https";
  n.host = m[2];
  n.port = m[3].matched ? std::stoi(m[3].str()) : (n.https ? 443 : 80);
  if (n.port < 1 || n.port > 65535) return Field("url", "the port must be 1-65535");
  n.path = m[4].matched ? m[4].str() : "/";
  return absl::OkStatus();
}

}  // namespace

bool NotificationConfig::Wants(const std::string& type) const {
  for (const std::string& prefix : events) {
    if (absl::StartsWith(type, prefix)) return true;
  }
  return false;
}

absl::StatusOr<NotificationConfig> DecodeNotification(
    const json& doc, const std::function<bool(const std::string&)>& tenant_exists,
    const std::function<bool(const std::string&)>& project_exists) {
  static const std::set<std::string> kKnown = {"kind",       "name",   "tenant", "project",
                                               "url",        "secret", "events", "wait_longer_than",
                                               "description"};
  for (const auto& [key, value] : doc.items()) {
    if (!kKnown.count(key)) {
      return Field(key, absl::StrCat("unknown field; known: ", absl::StrJoin(kKnown, ", ")));
    }
  }
  for (const char* key : {"tenant", "project", "url", "secret", "wait_longer_than"}) {
    if (doc.contains(key) && !doc[key].is_string()) return Field(key, "must be a string");
  }
  NotificationConfig n;
  n.name = doc.value("name", "");
  n.tenant = doc.value("tenant", "");
  n.project = doc.value("project", "");
  n.url = doc.value("url", "");
  n.secret = doc.value("secret", "");
  if (n.tenant.empty()) return Field("tenant", "is required: whose events the webhook gets");
  if (!tenant_exists(n.tenant)) {
    return Field("tenant", "no tenant \"" + n.tenant + "\" (apply it first or alongside)");
  }
  if (!n.project.empty() && !project_exists(n.project)) {
    return Field("project", "no project \"" + n.project + "\" (apply it first or alongside)");
  }
  if (absl::Status s = ParseUrl(n); !s.ok()) return s;
  if (n.secret.size() < kMinNotificationSecret) {
    return Field("secret", absl::StrCat("is required, at least ", kMinNotificationSecret,
                                        " characters: it signs every delivery"));
  }
  if (doc.contains("wait_longer_than")) {
    constexpr int64_t kSecond = 1'000'000;
    auto us = ParseDurationUs(doc["wait_longer_than"].get<std::string>());
    if (!us.ok() || *us < kSecond || *us > 720 * 3600 * kSecond) {
      return Field("wait_longer_than",
                   absl::StrCat("\"", doc["wait_longer_than"].get<std::string>().substr(0, 40),
                                "\" is not a duration from 1s to 720h (e.g. 30m, 4h)"));
    }
    n.wait_longer_than_us = *us;
  }
  if (doc.contains("events")) {
    const json& events = doc["events"];
    if (!events.is_array() || events.empty()) {
      return Field("events", "must be a non-empty list of event type prefixes (job., device.)");
    }
    n.events.clear();
    for (const json& e : events) {
      if (!e.is_string() || e.get<std::string>().empty()) {
        return Field("events", "must be a non-empty list of event type prefixes (job., device.)");
      }
      n.events.push_back(e);
    }
  }
  return n;
}

json RedactNotification(const json& doc, bool keep_url) {
  json out = doc;
  if (!out.is_object()) return out;
  if (out.contains("secret")) out["secret"] = "(set)";
  if (!keep_url && out.contains("url") && out["url"].is_string()) {
    const std::string url = out["url"];
    const size_t host = url.find("://");
    const size_t path = url.find('/', host == std::string::npos ? 0 : host + 3);
    if (path != std::string::npos) out["url"] = url.substr(0, path) + "/...";
  }
  return out;
}

}  // namespace carve
