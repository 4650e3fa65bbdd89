#ifndef CARVE_RUNTIME_TENANT_PATHS_H_
#define CARVE_RUNTIME_TENANT_PATHS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace carve {

// ROOT/tenants/TENANT, created with its parents; the tenant directory is owner-only (0700).
// Tenant names are lowercase letters, digits and dashes (checked by `carve apply`).
std::string TenantDir(const std::string& root, const std::string& tenant);

// Creates `path` and its missing parents traversable by everyone (0755, whatever the umask):
// the roots that jobs of every tenant reach their own directories through.
absl::Status CreateSharedDir(const std::string& path);

// Creates `path` (and parents) and makes it owner-only (0700).
absl::Status CreatePrivateDir(const std::string& path);

// A job spec's workdir: empty, or a relative path without ".." that stays inside the job's tenant
// directory. Absolute paths are refused: the tenant directory is the only allowed root.
absl::Status CheckWorkdir(const std::string& workdir);

// Who owns the directories made for a tenant's jobs; -1: the agent's own user.
struct DirOwner {
  int64_t uid = -1;
  int64_t gid = -1;
};

// Agent side: ROOT/REL, every component below ROOT created (0700) or opened without ever
// following a symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it, else
// openat O_NOFOLLOW one component at a time), then made owner-only and owned by `owner` through
// the opened descriptor, so a link a job planted can neither redirect the agent nor have it
// chmod/chown anything outside. ROOT itself is trusted (created when missing). REL is checked
// like a workdir. PermissionDenied naming the component when one is a symlink or not a directory.
absl::StatusOr<std::string> MakeDirBeneath(const std::string& root, const std::string& rel,
                                           DirOwner owner = {});

// A job's working directory: ROOT/WORKDIR made by MakeDirBeneath.
absl::StatusOr<std::string> ResolveWorkdir(const std::string& root, const std::string& workdir,
                                           DirOwner owner = {});

}  // namespace carve

#endif  // CARVE_RUNTIME_TENANT_PATHS_H_
