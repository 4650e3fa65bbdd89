#include "runtime/tenant_paths.h"

#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace carve {

namespace fs = std::filesystem;

absl::Status CreatePrivateDir(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
  if (::chmod(path.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot make it owner-only"));
  }
  return absl::OkStatus();
}

std::string TenantDir(const std::string& root, const std::string& tenant) {
  std::string dir = absl::StrCat(root, "/tenants/", tenant.empty() ? "default" : tenant);
  (void)CreatePrivateDir(dir);  // a failure shows when the file in it cannot be written
  return dir;
}

absl::Status CheckWorkdir(const std::string& workdir) {
  if (workdir.empty()) return absl::OkStatus();
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("workdir: \"", workdir, "\" ", why,
                     "; write a path relative to the job's tenant directory, e.g. \"runs/exp1\""));
  };
  if (workdir[0] == '/' || workdir[0] == '~') {
    return refuse("is absolute, and the only allowed root is the tenant's directory");
  }
  if (workdir.find('\0') != std::string::npos || workdir.size() > 1024) {
    return refuse("is not a usable path");
  }
  for (absl::string_view part : absl::StrSplit(workdir, '/')) {
    if (part == "..") return refuse("contains \"..\", which could leave the tenant's directory");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveWorkdir(const std::string& root, const std::string& workdir) {
  if (absl::Status s = CheckWorkdir(workdir); !s.ok()) return s;
  if (absl::Status s = CreatePrivateDir(root); !s.ok()) return s;
  std::error_code ec;
  fs::path real_root = fs::canonical(root, ec);
  if (ec) return absl::InternalError(absl::StrCat(root, ": ", ec.message()));
  if (workdir.empty()) return real_root.string();
  // Components that exist are followed as they are (a symlink among them is resolved below);
  // missing ones are created owner-only.
  fs::path target = real_root / workdir;
  fs::path real = fs::weakly_canonical(target, ec);
  if (ec) return absl::InternalError(absl::StrCat(target.string(), ": ", ec.message()));
  std::string prefix = real_root.string() + "/";
  if (real != real_root && !absl::StartsWith(real.string(), prefix)) {
    return absl::PermissionDeniedError(
        absl::StrCat("workdir \"", workdir, "\" resolves to ", real.string(),
                     " (through a symlink), outside the tenant's directory ", real_root.string()));
  }
  if (absl::Status s = CreatePrivateDir(real.string()); !s.ok()) return s;
  return real.string();
}

}  // namespace carve
