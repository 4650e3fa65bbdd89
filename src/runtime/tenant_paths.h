#ifndef CARVE_RUNTIME_TENANT_PATHS_H_
#define CARVE_RUNTIME_TENANT_PATHS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace carve {

// ROOT/tenants/TENANT, created with its parents; the tenant directory is owner-only (0700).
// Tenant names are lowercase letters, digits and dashes (checked by `carve apply`).
std::string TenantDir(const std::string& root, const std::string& tenant);

// Creates `path` (and parents) and makes it owner-only (0700).
absl::Status CreatePrivateDir(const std::string& path);

// A job spec's workdir: empty, or a relative path without ".." that stays inside the job's tenant
// directory. Absolute paths are refused: the tenant directory is the only allowed root.
absl::Status CheckWorkdir(const std::string& workdir);

// Agent side: ROOT/WORKDIR created owner-only; refused when its real path (symlinks resolved)
// leaves ROOT.
absl::StatusOr<std::string> ResolveWorkdir(const std::string& root, const std::string& workdir);

}  // namespace carve

#endif  // CARVE_RUNTIME_TENANT_PATHS_H_
