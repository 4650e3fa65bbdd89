#include "runtime/tenancy.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"

namespace carve {

using json = nlohmann::json;

json UserRecord::ToJson() const {
  return {{"id", id},
          {"name", name},
          {"role", role},
          {"tenant", tenant},
          {"project", project},
          {"created_us", created_us},
          {"created_by", created_by},
          {"removed", removed}};
}

UserRecord UserRecord::FromJson(const json& j) {
  UserRecord u;
  u.name = j.value("name", "");
  u.role = j.value("role", "");
  u.tenant = j.value("tenant", "");
  u.project = j.value("project", "");
  u.created_us = j.value("created_us", int64_t{0});
  u.created_by = j.value("created_by", "");
  u.removed = j.value("removed", false);
  u.id = j.value("id", "");
  return u;
}

json TokenRecord::ToJson() const {
  json j = {{"id", id},
            {"description", description},
            {"created_us", created_us},
            {"expires_us", expires_us},
            {"revoked", revoked}};
  if (!user.empty()) j["user"] = user;
  if (!name.empty()) j["name"] = name;
  if (!role.empty()) j["role"] = role;
  return j;
}

TokenRecord TokenRecord::FromJson(const json& j) {
  TokenRecord t;
  t.id = j.value("id", "");
  t.user = j.value("user", "");
  t.name = j.value("name", "");
  t.role = j.value("role", "");
  t.description = j.value("description", "");
  t.created_us = j.value("created_us", int64_t{0});
  t.expires_us = j.value("expires_us", int64_t{0});
  t.revoked = j.value("revoked", false);
  return t;
}

bool IsUserRole(const std::string& role) {
  return role == "admin" || role == "tenant-admin" || role == "member" || role == "viewer";
}

std::string ReservedUserName(const std::string& name) {
  static const std::set<std::string> kReserved = {
      "admin",  "admins", "administrator", "root",       "system", "scheduler", "agent",
      "agents", "node",   "nodes",         "controller", "server", "carve"};
  if (kReserved.count(name)) {
    return absl::StrCat(
        "name: \"", name,
        "\" is reserved for the platform's own actors in the audit; choose another");
  }
  for (const char* prefix : {"agent", "node", "system", "scheduler", "admin"}) {
    size_t n = std::strlen(prefix);
    if (name.size() > n && name.compare(0, n, prefix) == 0 &&
        std::string("-._:").find(name[n]) != std::string::npos) {
      return absl::StrCat("name: \"", name, "\" starts with \"", prefix, std::string(1, name[n]),
                          "\", which is reserved for the platform's own actors; choose another");
    }
  }
  return "";
}

bool Allowed(const Principal& who, Access access, const std::string& tenant,
             const std::string& project) {
  if (who.role == "admin") return true;
  if (who.tenant.empty() || who.tenant != tenant) return false;
  if (who.role == "tenant-admin") return true;
  if (who.project.empty() || who.project != project) return false;
  if (who.role == "member") return access != Access::kAdminister;
  if (who.role == "viewer") return access == Access::kRead;
  return false;
}

bool SeesEvent(const Principal& who, const json& details) {
  if (who.role == "admin") return true;
  if (!details.is_object()) return false;
  std::string tenant = details.value("tenant", "");
  if (tenant.empty()) return false;  // platform events: admins only
  return Allowed(who, Access::kRead, tenant, details.value("project", ""));
}

json VisibleEvents(const json& events, const Principal& who) {
  json out = json::array();
  for (const json& e : events) {
    if (SeesEvent(who, e["details"])) out.push_back(e);
  }
  return out;
}

json VisibleNodes(const json& nodes, const Principal& who) {
  if (who.role == "admin") return nodes;
  json out = nodes;
  for (json& n : out) {
    for (const char* key : {"quarantined", "fenced", "cordoned_gpus"}) {
      if (!n.contains(key) || !n[key].is_object()) continue;
      for (json& why : n[key]) why = "out of service";
    }
    // Per-GPU utilization shows how busy other tenants' jobs are (L1): admins only.
    if (n.contains("gpus") && n["gpus"].is_array()) {
      for (json& g : n["gpus"]) {
        if (g.is_object()) g.erase("utilization_pct");
      }
    }
  }
  return out;
}

json VisibleObjects(const std::string& kind, const json& objects, const Principal& who) {
  if (who.role == "admin" || kind == "queue") return objects;
  json out = json::array();
  for (const json& o : objects) {
    std::string tenant = kind == "tenant" ? o.value("name", "") : o.value("tenant", "default");
    if (kind == "project" && o.value("name", "") == "default") tenant = who.tenant;
    if (tenant == who.tenant) out.push_back(o);
  }
  return out;
}

std::string NoJobMessage(int64_t id) {
  return absl::StrCat("no job ", id, "; `carve ls --all` lists jobs");
}

}  // namespace carve
