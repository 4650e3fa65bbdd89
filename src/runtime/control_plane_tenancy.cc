// Tenancy: users, API tokens (hashed, with expiry, revocable) and who may touch which job.

#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "runtime/control_plane.h"
#include "runtime/input_limits.h"
#include "runtime/tenant_paths.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr int64_t kDayUs = 86'400'000'000;
constexpr int64_t kMaxTokenLifeUs = 366 * kDayUs;

std::string TimeText(int64_t us) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

// "30d", "12h", "90m": the token's lifetime.
absl::StatusOr<int64_t> Lifetime(const std::string& text) {
  if (text.empty()) return 30 * kDayUs;
  int64_t us = 0;
  if (text.back() == 'd') {
    auto days = ParseDurationUs(text.substr(0, text.size() - 1) + "h");
    if (!days.ok()) return absl::InvalidArgumentError("expires_in: write it as 30d, 12h or 90m");
    if (*days > kMaxTokenLifeUs / 24) {
      return absl::InvalidArgumentError("expires_in: a token lives at most 366d");
    }
    us = *days * 24;
  } else {
    auto d = ParseDurationUs(text);
    if (!d.ok()) return absl::InvalidArgumentError("expires_in: write it as 30d, 12h or 90m");
    us = *d;
  }
  if (us <= 0 || us > kMaxTokenLifeUs) {
    return absl::InvalidArgumentError("expires_in: a token lives at most 366d");
  }
  return us;
}

// When the token with public id `id` expires (0: never, or no such token).
int64_t ExpiryOf(const std::map<std::string, TokenRecord>& tokens, const std::string& id) {
  for (const auto& [hash, t] : tokens) {
    if (t.id == id) return t.expires_us;
  }
  return 0;
}

std::string LeftText(int64_t us) {
  int64_t minutes = std::max<int64_t>(us / 60'000'000, 0);
  return absl::StrCat(minutes / 60, "h", minutes % 60, "m");
}

}  // namespace

absl::Status ControlPlane::LoadTenancy() {
  auto tokens = store_->Load("token");
  if (!tokens.ok()) return tokens.status();
  for (const StoredRecord& r : *tokens) {
    TokenRecord t = TokenRecord::FromJson(json::parse(r.json, nullptr, false));
    if (t.id.empty()) t.id = r.id.substr(0, 12);
    tokens_[r.id] = t;
  }
  auto users = store_->Load("user");
  if (!users.ok()) return users.status();
  for (const StoredRecord& r : *users) {
    UserRecord u = UserRecord::FromJson(json::parse(r.json, nullptr, false));
    // Records from before ids get one derived from name and creation time: stable across
    // restarts, and different for a re-created user.
    if (u.id.empty())
      u.id = "u-" + Sha256Hex(absl::StrCat(u.name, "\n", u.created_us)).substr(0, 16);
    users_[r.id] = u;
  }
  return absl::OkStatus();
}

absl::Status ControlPlane::AddToken(const std::string& token, const std::string& name,
                                    const std::string& role) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string hash = Sha256Hex(token);
  if (tokens_.count(hash)) return absl::OkStatus();
  TokenRecord t;
  t.id = hash.substr(0, 12);
  t.name = name;
  t.role = role;
  t.description = "bootstrap token";
  t.created_us = now_();
  tokens_[hash] = t;
  StoreBatch batch;
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  Event(batch, "system", "token.created", "token/" + t.id, "bootstrap token for " + role,
        {{"role", role}, {"name", name}});
  return Durable(lock, std::move(batch));
}

absl::StatusOr<Principal> ControlPlane::Authenticate(const std::string& token) const {
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "no token: send 'Authorization: Bearer TOKEN' (carve dev writes one to "
        "carve-data/admin.token)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tokens_.find(Sha256Hex(token));
  if (it == tokens_.end()) return absl::UnauthenticatedError("the token is not valid");
  const TokenRecord& t = it->second;
  if (t.revoked) return absl::UnauthenticatedError("the token was revoked");
  if (t.expires_us != 0 && now_() >= t.expires_us) {
    return absl::UnauthenticatedError(absl::StrCat("the token expired at ", TimeText(t.expires_us),
                                                   "; `carve token create` makes a new one"));
  }
  if (t.user.empty()) return Principal{t.name, t.role, "", "", t.id, "token-" + t.id};
  auto user = users_.find(t.user);
  if (user == users_.end() || user->second.removed) {
    return absl::UnauthenticatedError("the token's user was removed");
  }
  const UserRecord& u = user->second;
  return Principal{u.name, u.role, u.tenant, u.project, t.id, u.id};
}

absl::StatusOr<json> ControlPlane::CreateUser(const json& body, const Principal& who) {
  static const std::regex kName("[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?");
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k != "name" && k != "role" && k != "tenant" && k != "project") {
      return absl::InvalidArgumentError(
          absl::StrCat(k, ": unknown field; known: name, role, tenant, project"));
    }
    if (!v.is_string()) return absl::InvalidArgumentError(k + ": must be a string");
  }
  UserRecord u;
  u.name = body.value("name", "");
  u.role = body.value("role", "member");
  u.tenant = body.value("tenant", who.role == "tenant-admin" ? who.tenant : "");
  u.project = body.value("project", "");
  if (!std::regex_match(u.name, kName)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: \"", u.name, "\" must be lowercase letters, digits, dots, dashes, underscores"));
  }
  if (std::string reserved = ReservedUserName(u.name); !reserved.empty()) {
    return absl::InvalidArgumentError(reserved);
  }
  if (!IsUserRole(u.role)) {
    return absl::InvalidArgumentError(
        absl::StrCat("role: \"", u.role, "\" is not admin, tenant-admin, member or viewer"));
  }
  if (u.role == "admin" && (!u.tenant.empty() || !u.project.empty())) {
    return absl::InvalidArgumentError("tenant: an admin belongs to no tenant; leave it out");
  }
  if (u.role != "admin" && u.tenant.empty()) {
    return absl::InvalidArgumentError("tenant: a " + u.role + " needs one");
  }
  if ((u.role == "member" || u.role == "viewer") && u.project.empty()) {
    return absl::InvalidArgumentError("project: a " + u.role + " needs one");
  }
  if (u.role == "tenant-admin" && !u.project.empty()) {
    return absl::InvalidArgumentError("project: a tenant-admin covers its whole tenant");
  }
  // Only admins make admins; a tenant-admin makes users of its own tenant.
  if (u.role == "admin" ? who.role != "admin" : !Allowed(who, Access::kAdminister, u.tenant, "")) {
    return absl::PermissionDeniedError(
        who.role == "tenant-admin"
            ? absl::StrCat("a tenant-admin creates users of its tenant (", who.tenant, ") only")
            : "only admins and tenant-admins create users");
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (u.role != "admin" && !ObjectExists("tenant", u.tenant)) {
    return absl::InvalidArgumentError("tenant: no tenant \"" + u.tenant + "\"; apply it first");
  }
  if (!u.project.empty()) {
    auto project = objects_.find({"project", u.project});
    bool ours = u.project == "default" ||
                (project != objects_.end() && project->second.value("tenant", "") == u.tenant);
    if (!ours) {
      return absl::InvalidArgumentError(
          absl::StrCat("project: tenant \"", u.tenant, "\" has no project \"", u.project, "\""));
    }
  }
  if (auto old = users_.find(u.name); old != users_.end() && !old->second.removed) {
    // User names are global: a clash with a user the caller cannot see says only that the name
    // is taken, not by whom or in which tenant (L1).
    bool visible = who.role == "admin" || old->second.tenant == who.tenant;
    if (!visible) {
      return absl::AlreadyExistsError("name: \"" + u.name + "\" is not available; choose another");
    }
    return absl::AlreadyExistsError("user \"" + u.name + "\" exists");
  }
  u.id = "u-" + RandomHex(8);
  if (u.id.size() != 18) return absl::InternalError("no randomness for a user id");
  u.created_us = now_();
  u.created_by = who.name;
  users_[u.name] = u;
  StoreBatch batch;
  batch.puts.push_back({"user", u.name, u.ToJson().dump()});
  Event(batch, "user:" + who.name, "user.created", "user/" + u.name, "created as " + u.role,
        {{"role", u.role}, {"tenant", u.tenant}, {"project", u.project}});
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return u.ToJson();
}

json ControlPlane::ListUsers(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (const auto& [name, u] : users_) {
    if (u.removed) continue;
    bool visible = who.role == "admin" || (who.role == "tenant-admin" && u.tenant == who.tenant) ||
                   u.name == who.name;
    if (visible) out.push_back(u.ToJson());
  }
  return out;
}

absl::StatusOr<json> ControlPlane::RemoveUser(const std::string& name, const Principal& who) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = users_.find(name);
  bool visible =
      it != users_.end() && !it->second.removed &&
      (who.role == "admin" || (who.role == "tenant-admin" && it->second.tenant == who.tenant));
  if (!visible) return absl::NotFoundError("no user \"" + name + "\"");
  UserRecord& u = it->second;
  u.removed = true;
  StoreBatch batch;
  batch.puts.push_back({"user", u.name, u.ToJson().dump()});
  int revoked = 0;
  for (auto& [hash, t] : tokens_) {
    if (t.user != name || t.revoked) continue;
    t.revoked = true;
    ++revoked;
    batch.puts.push_back({"token", hash, t.ToJson().dump()});
  }
  Event(batch, "user:" + who.name, "user.removed", "user/" + name,
        absl::StrCat("removed; ", revoked, " tokens revoked"),
        {{"tenant", u.tenant}, {"project", u.project}, {"tokens_revoked", revoked}});
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return json{{"removed", name}, {"tokens_revoked", revoked}};
}

absl::StatusOr<json> ControlPlane::CreateToken(const json& body, const Principal& who) {
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (k != "user" && k != "expires_in" && k != "description") {
      return absl::InvalidArgumentError(
          absl::StrCat(k, ": unknown field; known: user, expires_in, description"));
    }
    if (!v.is_string()) return absl::InvalidArgumentError(k + ": must be a string");
  }
  std::string user = body.value("user", who.name);
  std::string expires_in = body.value("expires_in", "");
  auto life = Lifetime(expires_in);
  if (!life.ok()) return life.status();
  if (absl::Status s =
          CheckPrintable("description", body.value("description", ""), kMaxReasonBytes);
      !s.ok()) {
    return s;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // A token cannot outlive the token that creates it (M3: a 1-day token minted a 366-day one).
  // Bootstrap tokens never expire. Left out, the lifetime is capped; asked for, it is refused.
  int64_t now = now_();
  int64_t parent_expires = ExpiryOf(tokens_, who.token_id);
  if (parent_expires != 0 && now + *life > parent_expires) {
    int64_t left = parent_expires - now;
    if (!expires_in.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expires_in: a token cannot outlive the token that creates it; yours expires at ",
          TimeText(parent_expires), ", so at most ", LeftText(left)));
    }
    life = left;
  }
  auto it = users_.find(user);
  bool self = it != users_.end() && user == who.name && IsUserRole(who.role);
  bool visible = it != users_.end() && !it->second.removed &&
                 (self || who.role == "admin" ||
                  (who.role == "tenant-admin" && it->second.tenant == who.tenant));
  if (!visible) {
    return absl::NotFoundError("no user \"" + user + "\"; `carve user create` makes one");
  }
  std::string secret = "carve_" + RandomHex(32);
  if (secret.size() != 70) return absl::InternalError("no randomness for a token");
  std::string hash = Sha256Hex(secret);
  TokenRecord t;
  t.id = hash.substr(0, 12);
  t.user = user;
  t.description = body.value("description", "");
  t.created_us = now;
  t.expires_us = t.created_us + *life;
  tokens_[hash] = t;
  StoreBatch batch;
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  Event(batch, "user:" + who.name, "token.created", "token/" + t.id,
        "token for " + user + " until " + TimeText(t.expires_us),
        {{"user", user},
         {"tenant", it->second.tenant},
         {"project", it->second.project},
         {"expires_us", t.expires_us}});
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  json out = t.ToJson();
  out["token"] = secret;
  return out;
}

json ControlPlane::ListTokens(const Principal& who) const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  for (const auto& [hash, t] : tokens_) {
    auto u = users_.find(t.user);
    std::string tenant = u == users_.end() ? "" : u->second.tenant;
    bool visible = who.role == "admin" ||
                   (who.role == "tenant-admin" && !tenant.empty() && tenant == who.tenant) ||
                   (!t.user.empty() && t.user == who.name);
    if (!visible) continue;
    json j = t.ToJson();
    if (u != users_.end()) j["role"] = u->second.role;
    j["tenant"] = tenant;
    out.push_back(j);
  }
  return out;
}

absl::StatusOr<json> ControlPlane::RevokeToken(const std::string& id, const Principal& who) {
  std::unique_lock<std::mutex> lock(mu_);
  for (auto& [hash, t] : tokens_) {
    if (t.id != id) continue;
    auto u = users_.find(t.user);
    std::string tenant = u == users_.end() ? "" : u->second.tenant;
    bool visible = who.role == "admin" ||
                   (who.role == "tenant-admin" && !tenant.empty() && tenant == who.tenant) ||
                   (!t.user.empty() && t.user == who.name && IsUserRole(who.role));
    if (!visible) break;
    if (t.revoked) return absl::FailedPreconditionError("token " + id + " is already revoked");
    t.revoked = true;
    StoreBatch batch;
    batch.puts.push_back({"token", hash, t.ToJson().dump()});
    Event(batch, "user:" + who.name, "token.revoked", "token/" + id, "revoked",
          {{"user", t.user.empty() ? t.name : t.user}, {"tenant", tenant}});
    if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
    return t.ToJson();
  }
  return absl::NotFoundError("no token " + id + "; `carve token ls` lists them");
}

const TokenRecord* ControlPlane::NodeCredential(const std::string& node) const {
  for (const auto& [hash, t] : tokens_) {
    if (t.role == "node" && t.name == node && !t.revoked) return &t;
  }
  return nullptr;
}

std::string ControlPlane::BindNodeCredential(const std::string& node, const std::string& hash,
                                             StoreBatch& batch) {
  TokenRecord t;
  t.id = hash.substr(0, 12);
  t.name = node;
  t.role = "node";
  t.description = "node credential for " + node;
  t.created_us = now_();
  tokens_[hash] = t;
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  Event(batch, "agent:" + node, "node.joined", "node/" + node,
        "the join token's holder got node credential " + t.id + ", bound to this node",
        {{"credential", t.id}});
  return t.id;
}

absl::StatusOr<json> ControlPlane::RevokeNodeCredential(const std::string& node,
                                                        const Principal& who) {
  if (who.role != "admin") {
    return absl::PermissionDeniedError("only admins revoke node credentials");
  }
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  json ids = json::array();
  for (auto& [hash, t] : tokens_) {
    if (t.role != "node" || t.name != node || t.revoked) continue;
    t.revoked = true;
    ids.push_back(t.id);
    batch.puts.push_back({"token", hash, t.ToJson().dump()});
  }
  if (ids.empty()) {
    return absl::NotFoundError(absl::StrCat("node \"", node,
                                            "\" holds no credential; its agent joins with the join "
                                            "token (agent.token)"));
  }
  Event(batch, "user:" + who.name, "node.credential-revoked", "node/" + node,
        "node credential revoked; the node's agent joins again with the join token",
        {{"credentials", ids}});
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return json{{"node", node}, {"revoked", ids}};
}

absl::Status ControlPlane::CheckJob(int64_t id, const Principal& who, Access access) const {
  std::string tenant, project;
  bool live = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      live = true;
      tenant = it->second.spec.tenant;
      project = it->second.spec.project;
    }
  }
  if (!live) {  // not in memory: finished (committed before it left) or none
    auto done = DoneJob(id);
    if (absl::IsNotFound(done.status())) return absl::NotFoundError(NoJobMessage(id));
    if (!done.ok()) return done.status();
    tenant = done->spec.tenant;
    project = done->spec.project;
  }
  if (!Allowed(who, Access::kRead, tenant, project)) return absl::NotFoundError(NoJobMessage(id));
  if (!Allowed(who, access, tenant, project)) {
    return absl::PermissionDeniedError(absl::StrCat("a ", who.role, " only reads jobs"));
  }
  return absl::OkStatus();
}

absl::Status ControlPlane::AuthorizeSubmit(json& body, const Principal& who) const {
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  for (const char* key : {"tenant", "project", "workdir"}) {  // (a fuzz finding: a list threw)
    if (body.contains(key) && !body[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(key, ": must be a string"));
    }
  }
  if (!body.contains("tenant") && !who.tenant.empty()) body["tenant"] = who.tenant;
  if (!body.contains("project") && !who.project.empty()) body["project"] = who.project;
  std::string tenant = body.value("tenant", "default");
  std::string project = body.value("project", "default");
  if (body.contains("workdir")) {
    if (absl::Status s = CheckWorkdir(body["workdir"].get<std::string>()); !s.ok()) return s;
  }
  if (!Allowed(who, Access::kWrite, tenant, project)) {
    return absl::PermissionDeniedError(
        who.role == "viewer"
            ? std::string("a viewer cannot submit jobs")
            : absl::StrCat("you (", who.role, " of ", who.tenant,
                           who.project.empty() ? "" : "/" + who.project,
                           ") cannot submit to tenant \"", tenant, "\" project \"", project, "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto p = objects_.find({"project", project});
  if (project != "default" && p != objects_.end() && p->second.value("tenant", "") != tenant) {
    // Only admins learn whose project it is; others get the answer for a missing one (L1).
    if (who.role != "admin") return NoSuchObject("project", project);
    return absl::InvalidArgumentError(
        absl::StrCat("project: \"", project, "\" belongs to tenant \"",
                     p->second.value("tenant", ""), "\", not \"", tenant, "\""));
  }
  return absl::OkStatus();
}

}  // namespace carve
