// Tenancy: the calls on users and tokens (identity.h keeps them), and who may touch which job.

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/tenant_paths.h"

namespace carve {

using json = nlohmann::json;

template <typename T>
absl::StatusOr<T> ControlPlane::Committed(std::unique_lock<std::mutex>& lock,
                                          absl::StatusOr<T> answer, StoreBatch batch) {
  if (!answer.ok()) return answer;
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return answer;
}

absl::Status ControlPlane::AddToken(const std::string& token, const std::string& name, Role role) {
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  if (!identity_.AddBootstrap(token, name, role, batch)) return absl::OkStatus();
  return Durable(lock, std::move(batch));
}

absl::StatusOr<Principal> ControlPlane::Authenticate(const std::string& token) const {
  return identity_.Authenticate(token);
}

absl::StatusOr<json> ControlPlane::CreateUser(const json& body, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kWrite); !s.ok()) return s;
  auto u = Identity::NewUser(body, who);
  if (!u.ok()) return u.status();
  std::unique_lock<std::mutex> lock(mu_);
  if (u->role != Role::kAdmin && !config_.Exists("tenant", u->tenant)) {
    return absl::InvalidArgumentError("tenant: no tenant \"" + u->tenant + "\"; apply it first");
  }
  if (!u->project.empty()) {
    const ProjectConfig* project = config_.Project(u->project);
    bool ours = u->project == "default" || (project != nullptr && project->tenant == u->tenant);
    if (!ours) {
      return absl::InvalidArgumentError(
          absl::StrCat("project: tenant \"", u->tenant, "\" has no project \"", u->project, "\""));
    }
  }
  StoreBatch batch;
  auto made = identity_.CreateUser(*std::move(u), who, batch);
  return Committed(lock, std::move(made), std::move(batch));
}

json ControlPlane::ListUsers(const Principal& who) const {
  if (!Authorize(who, Verb::kRead).ok()) return json::array();
  return identity_.ListUsers(who);
}

absl::StatusOr<json> ControlPlane::RemoveUser(const std::string& name, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kWrite); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  auto removed = identity_.RemoveUser(name, who, batch);
  return Committed(lock, std::move(removed), std::move(batch));
}

absl::StatusOr<json> ControlPlane::CreateToken(const json& body, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kWrite); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  auto made = identity_.CreateToken(body, who, batch);
  return Committed(lock, std::move(made), std::move(batch));
}

json ControlPlane::ListTokens(const Principal& who) const {
  if (!Authorize(who, Verb::kRead).ok()) return json::array();
  return identity_.ListTokens(who);
}

absl::StatusOr<json> ControlPlane::RevokeToken(const std::string& id, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kWrite); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  auto revoked = identity_.RevokeToken(id, who, batch);
  return Committed(lock, std::move(revoked), std::move(batch));
}

absl::StatusOr<json> ControlPlane::RevokeNodeCredential(const std::string& node,
                                                        const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  std::unique_lock<std::mutex> lock(mu_);
  StoreBatch batch;
  auto revoked = identity_.RevokeNodeCredential(node, who, batch);
  return Committed(lock, std::move(revoked), std::move(batch));
}

absl::Status ControlPlane::CheckJob(int64_t id, const Principal& who, Access access) const {
  std::string tenant, project;
  bool live = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const JobRecord* job = jobs_.Find(id); job != nullptr) {
      live = true;
      tenant = job->spec.tenant;
      project = job->spec.project;
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
    return absl::PermissionDeniedError(absl::StrCat("a ", Name(who.role), " only reads jobs"));
  }
  return absl::OkStatus();
}

absl::Status ControlPlane::AuthorizeSubmit(json& body, const Principal& who) const {
  if (absl::Status s = Authorize(who, Verb::kWrite); !s.ok()) return s;
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
        who.role == Role::kViewer
            ? std::string("a viewer cannot submit jobs")
            : absl::StrCat("you (", Name(who.role), " of ", who.tenant,
                           who.project.empty() ? "" : "/" + who.project,
                           ") cannot submit to tenant \"", tenant, "\" project \"", project, "\""));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const ProjectConfig* p = config_.Project(project);
  if (project != "default" && p != nullptr && p->tenant != tenant) {
    // Only admins learn whose project it is; others get the answer for a missing one (L1).
    if (who.role != Role::kAdmin) return NoSuchObject("project", project);
    return absl::InvalidArgumentError(absl::StrCat(
        "project: \"", project, "\" belongs to tenant \"", p->tenant, "\", not \"", tenant, "\""));
  }
  return absl::OkStatus();
}

}  // namespace carve
