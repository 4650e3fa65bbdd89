#ifndef CARVE_RUNTIME_TENANCY_H_
#define CARVE_RUNTIME_TENANCY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/states.h"

namespace carve {

// Who is calling: resolved from a bearer token. Roles:
//   admin         everything
//   tenant-admin  everything inside its tenant (jobs, users, tokens, audit, usage)
//   member        submit, see and cancel its project's jobs
//   viewer        read its project
//   agent         the join token (agent.token): registers nodes that hold no credential yet
//   node          one node's credential (name = the node): the agent calls for that node only
struct Principal {
  std::string name;
  Role role = Role::kViewer;
  std::string tenant = {};    // tenant-admin, member, viewer
  std::string project = {};   // member, viewer
  std::string token_id = {};  // the token used ("" for none); {} keeps Principal{name, role} valid
  // Stable for the life of the user (a re-created user of the same name gets another); a
  // bootstrap token's principal has "token-" + its token id.
  std::string user_id = {};
  // The token's full SHA-256 (the key it is stored under): what Identity looks the caller's own
  // token up by. token_id is only its first 12 digits, for people and the audit to read.
  std::string token_hash = {};
};

// A person or service account. Stored as kind "user", id = name.
struct UserRecord {
  std::string id;  // "u-" and 16 hex digits, never re-used (see Principal::user_id)
  std::string name;
  Role role = Role::kMember;  // admin | tenant-admin | member | viewer
  std::string tenant;
  std::string project;
  int64_t created_us = 0;
  std::string created_by;
  bool removed = false;

  nlohmann::json ToJson() const;
  // DataLoss for a record this server cannot read (a role it does not know).
  static absl::StatusOr<UserRecord> FromJson(const nlohmann::json& j);
};

// An API token. Stored as kind "token", id = hex SHA-256 of the secret (the secret itself is never
// stored). `user` names a UserRecord; bootstrap tokens (admin.token, agent.token) and node
// credentials (role "node", name = the node) carry their own name and role instead.
struct TokenRecord {
  std::string id;  // public id: the first 12 hex digits of the hash
  std::string user;
  std::string name;          // bootstrap tokens: principal name
  std::optional<Role> role;  // bootstrap tokens and node credentials: principal role
  std::string description;
  int64_t created_us = 0;
  int64_t expires_us = 0;  // 0: never (bootstrap tokens only)
  bool revoked = false;

  nlohmann::json ToJson() const;
  static absl::StatusOr<TokenRecord> FromJson(const nlohmann::json& j);
};

// What a caller wants to do with something that belongs to (tenant, project).
enum class Access { kRead, kWrite, kAdminister };

// The authorizer: every REST route names one verb, checked by Authorize before the call reaches
// the control plane, which checks it again (it is also called in-process); what a verb allows
// on one object (a job, a user, a node) is decided by Allowed and ActsAs below. Nothing else
// compares roles.
enum class Verb {
  kRead,       // any person: what its tenancy lets it see (jobs, queues, events, usage, audit)
  kWrite,      // any person: submit, cancel, renew, scale, its own tokens (Allowed decides)
  kConfigure,  // admins: apply tenant, project, queue, class and node documents
  kOperate,    // admins: cordon, drain, maintenance, re-layouts, dead nodes, node credentials
  kInspect,    // admins: platform-wide utilization, the audit chain's check
  kReport,     // admins and tenant-admins: /metrics, the audit export (a tenant-admin's: its
               // tenant's)
  kJoin,       // the join token (agent.token), a node's credential, admins: register a node
  kNodeCall,   // a node's credential, admins: heartbeats, logs, waiting for work
};
// OK, or PermissionDenied saying which roles the verb needs.
absl::Status Authorize(const Principal& who, Verb verb);
// Whether `who` may act as node `node` (a node's credential acts only as its own node;
// admins act as any). `what`: the call, for the message ("heartbeats").
absl::Status ActsAs(const Principal& who, const std::string& node, const std::string& what);
// Whether calls by `who` skip the per-token rate limit (admins, agents, nodes).
bool Unlimited(const Principal& who);

bool IsUserRole(Role role);  // admin, tenant-admin, member, viewer
// Names that audit actors use ("admin", "scheduler", "system", "agent:NODE", ...): no user may
// take one, so `user:NAME` in the audit is never mistaken for the platform. An error or "".
std::string ReservedUserName(const std::string& name);
// Whether `who` may do `access` on an object of `tenant`/`project` (project "" = tenant-wide).
bool Allowed(const Principal& who, Access access, const std::string& tenant,
             const std::string& project);
// Whether `who` sees an event whose details name `tenant`/`project` ("" = platform event).
bool SeesEvent(const Principal& who, const nlohmann::json& details);

// What of a list `who` may see: events naming its tenant/project, its tenant and its tenant's
// projects (queues are shared and listed to everyone; jobs: ControlPlane::JobsPage).
nlohmann::json VisibleEvents(const nlohmann::json& events, const Principal& who);
// Nodes for non-admins: quarantine and fence reasons name other tenants' jobs, so only the fact
// that a GPU is out remains; per-GPU utilization is left out.
nlohmann::json VisibleNodes(const nlohmann::json& nodes, const Principal& who);
nlohmann::json VisibleObjects(const std::string& kind, const nlohmann::json& objects,
                              const Principal& who);

// The answer for a job that does not exist, and for one the caller may not see: the same bytes.
std::string NoJobMessage(int64_t id);

}  // namespace carve

#endif  // CARVE_RUNTIME_TENANCY_H_
