// Identity: users, API tokens (hashed, with expiry, revocable) and node credentials.

#include "runtime/identity.h"

#include <algorithm>
#include <mutex>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/control_plane.h"
#include "runtime/input_limits.h"
#include "runtime/job_spec.h"

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

// When the token whose SHA-256 is `hash` expires (0: never, or no such token). By the full hash:
// a public id (12 digits) may be shared by a credential a join proposed before ids were checked.
int64_t ExpiryOf(const std::map<std::string, TokenRecord>& tokens, const std::string& hash) {
  auto it = tokens.find(hash);
  return it == tokens.end() ? 0 : it->second.expires_us;
}

std::string LeftText(int64_t us) {
  int64_t minutes = std::max<int64_t>(us / 60'000'000, 0);
  return absl::StrCat(minutes / 60, "h", minutes % 60, "m");
}

// Only string fields, each of `known`.
absl::Status StringFields(const json& body, const std::vector<std::string>& known) {
  if (!body.is_object()) return absl::InvalidArgumentError("body must be a JSON object");
  for (const auto& [k, v] : body.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(k, ": unknown field; known: ", absl::StrJoin(known, ", ")));
    }
    if (!v.is_string()) return absl::InvalidArgumentError(k + ": must be a string");
  }
  return absl::OkStatus();
}

// Whether `who` sees (and may revoke) a token of `owner` (null: a bootstrap token or a node
// credential, which only admins see).
bool SeesToken(const Principal& who, const UserRecord* owner) {
  return who.role == Role::kAdmin ||
         (owner != nullptr && who.role == Role::kTenantAdmin && !owner->tenant.empty() &&
          owner->tenant == who.tenant) ||
         (owner != nullptr && owner->id == who.user_id && IsUserRole(who.role));
}

}  // namespace

Identity::Identity(Clock now, Recorder record) : now_(std::move(now)), record_(std::move(record)) {}

absl::Status Identity::Load(Store& store) {
  auto tokens = store.Load("token");
  if (!tokens.ok()) return tokens.status();
  auto users = store.Load("user");
  if (!users.ok()) return users.status();
  std::unique_lock<std::shared_mutex> lock(mu_);
  for (const StoredRecord& r : *tokens) {
    auto t = TokenRecord::FromJson(json::parse(r.json, nullptr, false));
    if (!t.ok()) return t.status();
    if (t->id.empty()) t->id = r.id.substr(0, 12);
    tokens_[r.id] = *std::move(t);
  }
  for (const StoredRecord& r : *users) {
    auto u = UserRecord::FromJson(json::parse(r.json, nullptr, false));
    if (!u.ok()) return u.status();
    // Records from before ids get one derived from name and creation time: stable across
    // restarts, and different for a re-created user.
    if (u->id.empty())
      u->id = "u-" + Sha256Hex(absl::StrCat(u->name, "\n", u->created_us)).substr(0, 16);
    users_[r.id] = *std::move(u);
  }
  return absl::OkStatus();
}

absl::StatusOr<Principal> Identity::Authenticate(const std::string& token) const {
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "no token: send 'Authorization: Bearer TOKEN' (carve dev writes one to "
        "carve-data/admin.token)");
  }
  const std::string hash = Sha256Hex(token);
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = tokens_.find(hash);
  if (it == tokens_.end()) return absl::UnauthenticatedError("the token is not valid");
  const TokenRecord& t = it->second;
  if (t.revoked) return absl::UnauthenticatedError("the token was revoked");
  if (t.expires_us != 0 && now_() >= t.expires_us) {
    return absl::UnauthenticatedError(absl::StrCat("the token expired at ", TimeText(t.expires_us),
                                                   "; `carve token create` makes a new one"));
  }
  if (t.user.empty()) {
    if (!t.role) return absl::UnauthenticatedError("the token names no user and no role");
    return Principal{t.name, *t.role, "", "", t.id, "token-" + t.id, hash};
  }
  const UserRecord* u = OwnerOf(t);
  if (u == nullptr || u->removed) return absl::UnauthenticatedError("the token's user was removed");
  return Principal{u->name, u->role, u->tenant, u->project, t.id, u->id, hash};
}

bool Identity::AddBootstrap(const std::string& token, const std::string& name, Role role,
                            StoreBatch& batch) {
  std::string hash = Sha256Hex(token);
  TokenRecord t;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (tokens_.count(hash)) return false;
    t.id = hash.substr(0, 12);
    t.name = name;
    t.role = role;
    t.description = "bootstrap token";
    t.created_us = now_();
    tokens_[hash] = t;
  }
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  record_(batch, "system", "token.created", "token/" + t.id,
          absl::StrCat("bootstrap token for ", Name(role)), {{"role", Name(role)}, {"name", name}});
  return true;
}

absl::StatusOr<UserRecord> Identity::NewUser(const json& body, const Principal& who) {
  static const std::regex kName("[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?");
  if (absl::Status s = StringFields(body, {"name", "role", "tenant", "project"}); !s.ok()) {
    return s;
  }
  UserRecord u;
  u.name = body.value("name", "");
  const std::string role = body.value("role", "member");
  u.tenant = body.value("tenant", who.role == Role::kTenantAdmin ? who.tenant : "");
  u.project = body.value("project", "");
  if (!std::regex_match(u.name, kName)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: \"", u.name, "\" must be lowercase letters, digits, dots, dashes, underscores"));
  }
  if (std::string reserved = ReservedUserName(u.name); !reserved.empty()) {
    return absl::InvalidArgumentError(reserved);
  }
  std::optional<Role> parsed = ParseRole(role);
  if (!parsed || !IsUserRole(*parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("role: \"", role, "\" is not admin, tenant-admin, member or viewer"));
  }
  u.role = *parsed;
  if (u.role == Role::kAdmin && (!u.tenant.empty() || !u.project.empty())) {
    return absl::InvalidArgumentError("tenant: an admin belongs to no tenant; leave it out");
  }
  if (u.role != Role::kAdmin && u.tenant.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tenant: a ", role, " needs one"));
  }
  if ((u.role == Role::kMember || u.role == Role::kViewer) && u.project.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("project: a ", role, " needs one"));
  }
  if (u.role == Role::kTenantAdmin && !u.project.empty()) {
    return absl::InvalidArgumentError("project: a tenant-admin covers its whole tenant");
  }
  // Only admins make admins; a tenant-admin makes users of its own tenant.
  if (u.role == Role::kAdmin ? who.role != Role::kAdmin
                             : !Allowed(who, Access::kAdminister, u.tenant, "")) {
    return absl::PermissionDeniedError(
        who.role == Role::kTenantAdmin
            ? absl::StrCat("a tenant-admin creates users of its tenant (", who.tenant, ") only")
            : "only admins and tenant-admins create users");
  }
  return u;
}

absl::StatusOr<json> Identity::CreateUser(UserRecord u, const Principal& who, StoreBatch& batch) {
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (auto old = users_.find(u.name); old != users_.end() && !old->second.removed) {
      // User names are global: a clash with a user the caller cannot see says only that the
      // name is taken, not by whom or in which tenant (L1).
      bool visible = who.role == Role::kAdmin || old->second.tenant == who.tenant;
      if (!visible) {
        return absl::AlreadyExistsError("name: \"" + u.name +
                                        "\" is not available; choose another");
      }
      return absl::AlreadyExistsError("user \"" + u.name + "\" exists");
    }
    u.id = "u-" + RandomHex(8);
    if (u.id.size() != 18) return absl::InternalError("no randomness for a user id");
    u.created_us = now_();
    u.created_by = who.name;
    users_[u.name] = u;
  }
  batch.puts.push_back({"user", u.name, u.ToJson().dump()});
  record_(batch, "user:" + who.name, "user.created", "user/" + u.name,
          absl::StrCat("created as ", Name(u.role)),
          {{"role", Name(u.role)}, {"tenant", u.tenant}, {"project", u.project}});
  return u.ToJson();
}

json Identity::ListUsers(const Principal& who) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  json out = json::array();
  for (const auto& [name, u] : users_) {
    if (u.removed) continue;
    bool visible = who.role == Role::kAdmin ||
                   (who.role == Role::kTenantAdmin && u.tenant == who.tenant) || u.name == who.name;
    if (visible) out.push_back(u.ToJson());
  }
  return out;
}

absl::StatusOr<json> Identity::RemoveUser(const std::string& name, const Principal& who,
                                          StoreBatch& batch) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = users_.find(name);
  bool visible = it != users_.end() && !it->second.removed &&
                 (who.role == Role::kAdmin ||
                  (who.role == Role::kTenantAdmin && it->second.tenant == who.tenant));
  if (!visible) return absl::NotFoundError("no user \"" + name + "\"");
  UserRecord& u = it->second;
  u.removed = true;
  batch.puts.push_back({"user", u.name, u.ToJson().dump()});
  int revoked = 0;
  for (auto& [hash, t] : tokens_) {
    if (t.user != name || t.revoked) continue;
    t.revoked = true;
    ++revoked;
    batch.puts.push_back({"token", hash, t.ToJson().dump()});
  }
  record_(batch, "user:" + who.name, "user.removed", "user/" + name,
          absl::StrCat("removed; ", revoked, " tokens revoked"),
          {{"tenant", u.tenant}, {"project", u.project}, {"tokens_revoked", revoked}});
  return json{{"removed", name}, {"tokens_revoked", revoked}};
}

absl::StatusOr<json> Identity::CreateToken(const json& body, const Principal& who,
                                           StoreBatch& batch) {
  if (absl::Status s = StringFields(body, {"user", "expires_in", "description"}); !s.ok()) {
    return s;
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
  std::unique_lock<std::shared_mutex> lock(mu_);
  // A token cannot outlive the token that creates it (M3: a 1-day token minted a 366-day one).
  // Bootstrap tokens never expire. Left out, the lifetime is capped; asked for, it is refused.
  int64_t now = now_();
  int64_t parent_expires = ExpiryOf(tokens_, who.token_hash);
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
                 (self || who.role == Role::kAdmin ||
                  (who.role == Role::kTenantAdmin && it->second.tenant == who.tenant));
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
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  record_(batch, "user:" + who.name, "token.created", "token/" + t.id,
          "token for " + user + " until " + TimeText(t.expires_us),
          {{"user", user},
           {"tenant", it->second.tenant},
           {"project", it->second.project},
           {"expires_us", t.expires_us}});
  json out = t.ToJson();
  out["token"] = secret;
  return out;
}

const UserRecord* Identity::OwnerOf(const TokenRecord& t) const {
  auto u = users_.find(t.user);
  // A token made before the user of that name was (re-)created is the removed one's.
  if (u == users_.end() || t.created_us < u->second.created_us) return nullptr;
  return &u->second;
}

std::string Identity::TenantOf(const TokenRecord& t) const {
  const UserRecord* u = OwnerOf(t);
  return u == nullptr ? "" : u->tenant;
}

json Identity::ListTokens(const Principal& who) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  json out = json::array();
  for (const auto& [hash, t] : tokens_) {
    const UserRecord* owner = OwnerOf(t);
    if (!SeesToken(who, owner)) continue;
    json j = t.ToJson();
    if (owner != nullptr) j["role"] = Name(owner->role);
    j["tenant"] = owner != nullptr ? owner->tenant : "";
    out.push_back(j);
  }
  return out;
}

absl::StatusOr<json> Identity::RevokeToken(const std::string& id, const Principal& who,
                                           StoreBatch& batch) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  // Ids are unique since joins are checked (CheckJoin); a store from before may hold a node
  // credential that copied another token's id. Never a silent pick among those the caller sees.
  int seen = 0;
  for (const auto& [hash, t] : tokens_) {
    if (t.id == id && SeesToken(who, OwnerOf(t))) ++seen;
  }
  if (seen > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(seen, " tokens have id ", id,
                     "; revoke node credentials by node (carve revoke-node-credential) first"));
  }
  for (auto& [hash, t] : tokens_) {
    if (t.id != id) continue;
    std::string tenant = TenantOf(t);
    if (!SeesToken(who, OwnerOf(t))) continue;
    if (t.revoked) return absl::FailedPreconditionError("token " + id + " is already revoked");
    t.revoked = true;
    batch.puts.push_back({"token", hash, t.ToJson().dump()});
    record_(batch, "user:" + who.name, "token.revoked", "token/" + id, "revoked",
            {{"user", t.user.empty() ? t.name : t.user}, {"tenant", tenant}});
    return t.ToJson();
  }
  return absl::NotFoundError("no token " + id + "; `carve token ls` lists them");
}

bool Identity::IdTaken(const std::string& id) const {
  for (const auto& [hash, t] : tokens_) {
    if (t.id == id) return true;
  }
  return false;
}

const TokenRecord* Identity::NodeCredential(const std::string& node) const {
  for (const auto& [hash, t] : tokens_) {
    if (t.role == Role::kNode && t.name == node && !t.revoked) return &t;
  }
  return nullptr;
}

absl::StatusOr<std::optional<std::string>> Identity::CheckJoin(const std::string& node,
                                                               const std::string& proposed) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  // The same join again (the server died or the answer was lost after the commit, and the agent
  // retried): the node's live credential is the one proposed, so it is not bound twice.
  auto mine = proposed.empty() ? tokens_.end() : tokens_.find(proposed);
  if (mine != tokens_.end() && mine->second.role == Role::kNode && mine->second.name == node &&
      !mine->second.revoked) {
    return std::optional<std::string>(mine->second.id);
  }
  if (NodeCredential(node) != nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node \"", node,
        "\" is already joined: its agent authenticates with the node credential in its data "
        "directory (node.token), not the join token; an admin releases the name with `carve "
        "revoke-node-credential ",
        node, "`"));
  }
  if (mine != tokens_.end()) {  // never rebinds another token
    return absl::InvalidArgumentError(
        "node_credential_sha256: that credential is already in use; make a new one");
  }
  // The joining agent chooses the hash, and its first 12 digits become the public id that people
  // revoke tokens by: one copying another token's id (the join token's own, whose holder can
  // hash it) would shadow that token (red team, IdentityRedTeamTest).
  if (!proposed.empty() && IdTaken(proposed.substr(0, 12))) {
    return absl::InvalidArgumentError(
        "node_credential_sha256: its first 12 digits are another token's id; make a new one");
  }
  return std::optional<std::string>();
}

std::string Identity::BindNodeCredential(const std::string& node, const std::string& hash,
                                         StoreBatch& batch) {
  TokenRecord t;
  t.id = hash.substr(0, 12);
  t.name = node;
  t.role = Role::kNode;
  t.description = "node credential for " + node;
  t.created_us = now_();
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    tokens_[hash] = t;
  }
  batch.puts.push_back({"token", hash, t.ToJson().dump()});
  record_(batch, "agent:" + node, "node.joined", "node/" + node,
          "the join token's holder got node credential " + t.id + ", bound to this node",
          {{"credential", t.id}});
  return t.id;
}

absl::StatusOr<json> Identity::RevokeNodeCredential(const std::string& node, const Principal& who,
                                                    StoreBatch& batch) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  json ids = json::array();
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    for (auto& [hash, t] : tokens_) {
      if (t.role != Role::kNode || t.name != node || t.revoked) continue;
      t.revoked = true;
      ids.push_back(t.id);
      batch.puts.push_back({"token", hash, t.ToJson().dump()});
    }
  }
  if (ids.empty()) {
    return absl::NotFoundError(absl::StrCat("node \"", node,
                                            "\" holds no credential; its agent joins with the join "
                                            "token (agent.token)"));
  }
  record_(batch, "user:" + who.name, "node.credential-revoked", "node/" + node,
          "node credential revoked; the node's agent joins again with the join token",
          {{"credentials", ids}});
  return json{{"node", node}, {"revoked", ids}};
}

}  // namespace carve
