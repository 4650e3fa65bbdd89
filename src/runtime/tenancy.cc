#include "runtime/tenancy.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Unreadable(const std::string& what, const json& role) {
  return absl::DataLossError(absl::StrCat("stored ", what, " is unreadable: role ", role.dump(),
                                          " is not one this server knows"));
}

}  // namespace

json UserRecord::ToJson() const {
  return {{"id", id},
          {"name", name},
          {"role", Name(role)},
          {"tenant", tenant},
          {"project", project},
          {"created_us", created_us},
          {"created_by", created_by},
          {"removed", removed}};
}

absl::StatusOr<UserRecord> UserRecord::FromJson(const json& j) {
  if (!j.is_object()) return absl::DataLossError("stored user is not a JSON object");
  try {
    UserRecord u;
    u.name = j.value("name", "");
    u.removed = j.value("removed", false);
    std::optional<Role> role = ParseRole(j.value("role", ""));
    // A removed user never authenticates: a role this server cannot read does not matter there.
    if ((!role || !IsUserRole(*role)) && !u.removed) {
      return Unreadable("user \"" + u.name + "\"", j.value("role", json()));
    }
    u.role = role && IsUserRole(*role) ? *role : Role::kViewer;
    u.tenant = j.value("tenant", "");
    u.project = j.value("project", "");
    u.created_us = j.value("created_us", int64_t{0});
    u.created_by = j.value("created_by", "");
    u.id = j.value("id", "");
    return u;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("stored user is unreadable: ", e.what()));
  }
}

json TokenRecord::ToJson() const {
  json j = {{"id", id},
            {"description", description},
            {"created_us", created_us},
            {"expires_us", expires_us},
            {"revoked", revoked}};
  if (!user.empty()) j["user"] = user;
  if (!name.empty()) j["name"] = name;
  if (role) j["role"] = Name(*role);
  return j;
}

absl::StatusOr<TokenRecord> TokenRecord::FromJson(const json& j) {
  if (!j.is_object()) return absl::DataLossError("stored token is not a JSON object");
  try {
    TokenRecord t;
    t.id = j.value("id", "");
    t.user = j.value("user", "");
    t.name = j.value("name", "");
    t.revoked = j.value("revoked", false);
    if (std::string role = j.value("role", ""); !role.empty()) {
      t.role = ParseRole(role);
      // A revoked token never authenticates: its role does not matter.
      if (!t.role && !t.revoked) return Unreadable("token " + t.id, j["role"]);
    }
    t.description = j.value("description", "");
    t.created_us = j.value("created_us", int64_t{0});
    t.expires_us = j.value("expires_us", int64_t{0});
    return t;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("stored token is unreadable: ", e.what()));
  }
}

bool IsUserRole(Role role) {
  return role == Role::kAdmin || role == Role::kTenantAdmin || role == Role::kMember ||
         role == Role::kViewer;
}

absl::Status Authorize(const Principal& who, Verb verb) {
  const Role r = who.role;
  switch (verb) {
    case Verb::kRead:
    case Verb::kWrite:
      if (IsUserRole(r)) return absl::OkStatus();
      return absl::PermissionDeniedError(
          absl::StrCat("this call needs a person's role (admin, tenant-admin, member or viewer); "
                       "the caller's is ",
                       Name(r)));
    case Verb::kConfigure:
      if (r == Role::kAdmin) return absl::OkStatus();
      return absl::PermissionDeniedError("only admins apply configuration");
    case Verb::kOperate:
      if (r == Role::kAdmin) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "only admins operate nodes (cordon, drain, maintenance, layouts, dead nodes, "
          "credentials)");
    case Verb::kInspect:
      if (r == Role::kAdmin) return absl::OkStatus();
      return absl::PermissionDeniedError("this call needs the admin role");
    case Verb::kReport:
      if (r == Role::kAdmin || r == Role::kTenantAdmin) return absl::OkStatus();
      return absl::PermissionDeniedError(
          "this call (/metrics, the audit export) needs the admin or tenant-admin role");
    case Verb::kJoin:
      if (r == Role::kAgent || r == Role::kNode || r == Role::kAdmin) return absl::OkStatus();
      return absl::PermissionDeniedError("only agents register nodes (the join token)");
    case Verb::kNodeCall:
      if (r == Role::kNode || r == Role::kAdmin) return absl::OkStatus();
      if (r == Role::kAgent) {
        return absl::PermissionDeniedError(
            "a join token only registers nodes; heartbeats, logs and waiting for work use the "
            "node credential that registration returned (node.token)");
      }
      return absl::PermissionDeniedError("only agents call this, with their node's credential");
  }
  return absl::PermissionDeniedError("unknown verb");
}

absl::Status ActsAs(const Principal& who, const std::string& node, const std::string& what) {
  if (who.role != Role::kNode || who.name == node) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("this node credential belongs to node \"",
                                                  who.name, "\"; it ", what, " only as that node"));
}

bool Unlimited(const Principal& who) {
  return who.role == Role::kAdmin || who.role == Role::kAgent || who.role == Role::kNode;
}

std::string ReservedUserName(const std::string& name) {
  static const std::set<std::string> kReserved = {"admin",  "admins",    "administrator", "root",
                                                  "system", "scheduler", "agent",         "agents",
                                                  "node",   "nodes",     "controller",    "server",
                                                  "carve",  "import"};  // `carve import` applies
                                                                        // the archive's
                                                                        // configuration as "import"
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
  if (who.role == Role::kAdmin) return true;
  if (who.tenant.empty() || who.tenant != tenant) return false;
  if (who.role == Role::kTenantAdmin) return true;
  if (who.project.empty() || who.project != project) return false;
  if (who.role == Role::kMember) return access != Access::kAdminister;
  if (who.role == Role::kViewer) return access == Access::kRead;
  return false;
}

bool SeesEvent(const Principal& who, const json& details) {
  if (who.role == Role::kAdmin) return true;
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
  if (who.role == Role::kAdmin) return nodes;
  json out = nodes;
  for (json& n : out) {
    for (const char* key : {"quarantined", "fenced", "cordoned_gpus"}) {
      if (!n.contains(key) || !n[key].is_object()) continue;
      for (json& why : n[key]) why = "out of service";
    }
    // Per-GPU utilization shows how busy other tenants' jobs are (L1), the live MIG instances
    // their sizes, places and UUIDs, and the grants per GPU their shares: admins only.
    if (n.contains("gpus") && n["gpus"].is_array()) {
      for (json& g : n["gpus"]) {
        if (!g.is_object()) continue;
        g.erase("utilization_pct");
        g.erase("mig_live");
        g.erase("allocated_milli");  // where other tenants' shares sit, and how large
        g.erase("grants");
      }
    }
  }
  return out;
}

json VisibleObjects(const std::string& kind, const json& objects, const Principal& who) {
  // Queues, pools and prices are everyone's to read (prices: what a job will cost).
  if (who.role == Role::kAdmin || kind == "queue" || kind == "pool" || kind == "price") {
    return objects;
  }
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
