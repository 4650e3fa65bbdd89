#include "runtime/tenant_paths.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/log.h"

namespace carve {

namespace fs = std::filesystem;

absl::Status CreatePrivateDir(const std::string& path) {
  // Parents as everyone's (a umask of 077 must not close a jobs directory beside this one).
  if (absl::Status s = CreateSharedDir(fs::path(path).parent_path().string()); !s.ok()) return s;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
  if (::chmod(path.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot make it owner-only"));
  }
  return absl::OkStatus();
}

absl::Status CreateSharedDir(const std::string& path) {
  std::string at = path.empty() || path[0] != '/' ? "." : "";
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    at = absl::StrCat(at, "/", part);
    if (::mkdir(at.c_str(), 0755) == 0) {
      ::chmod(at.c_str(), 0755);
    } else if (errno != EEXIST) {
      return absl::InternalError(absl::StrCat(at, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

std::string TenantDir(const std::string& root, const std::string& tenant) {
  std::string dir = absl::StrCat(root, "/tenants/", tenant.empty() ? "default" : tenant);
  // Best effort: a failure shows again when the file in it cannot be written.
  if (absl::Status st = CreatePrivateDir(dir); !st.ok()) LogWarn(st.message());
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

namespace {

// One component below `dir`, never through a symlink.
int OpenComponent(int dir, const std::string& name) {
  static bool have_openat2 = true;
  if (have_openat2) {
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd = ::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof(how));
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    have_openat2 = false;
  }
  return ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Makes the opened directory owner-only and `owner`'s.
absl::Status Secure(int fd, const std::string& path, DirOwner owner) {
  if (owner.uid >= 0 && ::fchown(fd, static_cast<uid_t>(owner.uid),
                                 static_cast<gid_t>(owner.gid >= 0 ? owner.gid : owner.uid)) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot give it to uid ", owner.uid, ": ", std::strerror(errno)));
  }
  if (::fchmod(fd, 0700) != 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot make it owner-only"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> MakeDirBeneath(const std::string& root, const std::string& rel,
                                           DirOwner owner) {
  if (absl::Status s = CheckWorkdir(rel); !s.ok()) return s;
  if (absl::Status s = CreateSharedDir(root); !s.ok()) return s;
  int dir = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return absl::InternalError(absl::StrCat(root, ": ", std::strerror(errno)));
  std::string path = root;
  for (absl::string_view part : absl::StrSplit(rel, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    std::string name(part);
    path = absl::StrCat(path, "/", name);
    if (::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST) {
      int err = errno;
      ::close(dir);
      return absl::InternalError(absl::StrCat(path, ": ", std::strerror(err)));
    }
    int next = OpenComponent(dir, name);
    int err = errno;
    ::close(dir);
    if (next < 0) {
      if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
        return absl::PermissionDeniedError(
            absl::StrCat(path,
                         " is a symlink or not a directory; Carve never follows links in "
                         "a tenant's directories"));
      }
      return absl::InternalError(absl::StrCat(path, ": ", std::strerror(err)));
    }
    dir = next;
    if (absl::Status s = Secure(dir, path, owner); !s.ok()) {
      ::close(dir);
      return s;
    }
  }
  ::close(dir);
  return path;
}

absl::StatusOr<std::string> ResolveWorkdir(const std::string& root, const std::string& workdir,
                                           DirOwner owner) {
  return MakeDirBeneath(root, workdir, owner);
}

}  // namespace carve
