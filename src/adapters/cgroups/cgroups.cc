#include "adapters/cgroups/cgroups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "adapters/cgroups/device_filter.h"

namespace carve {
namespace {

constexpr int64_t kCpuPeriodUs = 100000;
constexpr int64_t kMinCpuQuotaUs = 1000;  // the kernel refuses less than 1 ms per period

std::string ErrnoText(int err) {
  char buf[128];
  return strerror_r(err, buf, sizeof(buf));  // the GNU variant: returns the message
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", ErrnoText(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// Cgroup interface files take one value per write(2).
absl::Status WriteFile(const std::string& path, absl::string_view value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  ssize_t n;
  do {
    n = write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  close(fd);
  if (n < 0) return ErrnoStatus(err, absl::StrCat("write \"", value, "\" to ", path));
  if (static_cast<size_t>(n) != value.size()) {
    return absl::UnavailableError(absl::StrCat("short write of \"", value, "\" to ", path));
  }
  return absl::OkStatus();
}

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Readable by everyone whatever the umask (a job may read its own group's statistics; only
// root writes the files in it).
absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("mkdir ", path));
  }
  chmod(path.c_str(), 0755);
  return absl::OkStatus();
}

struct Mount {
  std::string path;
  std::string type;  // "cgroup" | "cgroup2"
  std::vector<std::string> options;

  bool Has(absl::string_view option) const {
    return std::find(options.begin(), options.end(), option) != options.end();
  }
};

// /proc/self/mounts escapes blanks in paths as octal ("\040").
std::string Unescape(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3') {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

std::vector<Mount> ParseMounts(absl::string_view table) {
  std::vector<Mount> mounts;
  for (absl::string_view line : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 4) continue;
    if (fields[2] != "cgroup" && fields[2] != "cgroup2") continue;
    Mount mount;
    mount.path = Unescape(fields[1]);
    mount.type = std::string(fields[2]);
    for (absl::string_view option : absl::StrSplit(fields[3], ',')) {
      mount.options.emplace_back(option);
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

// Creates <mount>/<root> level by level; returns the deepest directory.
absl::StatusOr<std::string> MakeRoot(const std::string& mount, const std::string& root,
                                     bool enable_v2_controllers) {
  std::string path = mount;
  auto enable = [&](const std::string& dir) -> absl::Status {
    if (!enable_v2_controllers) return absl::OkStatus();
    absl::StatusOr<std::string> current = ReadFile(dir + "/cgroup.subtree_control");
    if (!current.ok()) return current.status();
    std::vector<absl::string_view> on =
        absl::StrSplit(*current, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    bool cpu = std::find(on.begin(), on.end(), "cpu") != on.end();
    bool memory = std::find(on.begin(), on.end(), "memory") != on.end();
    // pids where the kernel offers it (a job's fork bomb stops at its pids.max); optional.
    if (std::find(on.begin(), on.end(), "pids") == on.end()) {
      WriteFile(dir + "/cgroup.subtree_control", "+pids").IgnoreError();
    }
    if (cpu && memory) return absl::OkStatus();
    return WriteFile(dir + "/cgroup.subtree_control", "+cpu +memory");
  };
  if (absl::Status s = enable(path); !s.ok()) return s;
  for (absl::string_view part : absl::StrSplit(root, '/', absl::SkipEmpty())) {
    absl::StrAppend(&path, "/", part);
    if (absl::Status s = MakeDir(path); !s.ok()) return s;
    if (absl::Status s = enable(path); !s.ok()) return s;
  }
  return path;
}

bool ValidRoot(const std::string& root) {
  if (root.empty() || root.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(root, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return root.find('\n') == std::string::npos;
}

std::string Parent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A v1 devices hierarchy, when one is mounted read-write.
std::optional<std::string> DevicesBase(const std::vector<Mount>& mounts, const std::string& root) {
  for (const Mount& mount : mounts) {
    if (mount.type != "cgroup" || !mount.Has("devices") || mount.Has("ro")) continue;
    if (!Exists(mount.path + "/devices.deny")) continue;
    absl::StatusOr<std::string> base = MakeRoot(mount.path, root, false);
    if (base.ok()) return *base;
  }
  return std::nullopt;
}

// A character device node's number; nullopt for anything else.
std::optional<DeviceNumber> CharDevice(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return std::nullopt;
  return DeviceNumber{major(st.st_rdev), minor(st.st_rdev)};
}

}  // namespace

std::vector<std::string> DeviceAllowRules(absl::string_view proc_devices,
                                          const std::vector<std::string>& allowed) {
  std::vector<std::string> rules = {"b *:* rwm", "c *:* m"};
  bool chars = false;
  for (absl::string_view line : absl::StrSplit(proc_devices, '\n', absl::SkipEmpty())) {
    if (line == "Character devices:") {
      chars = true;
      continue;
    }
    if (line == "Block devices:") chars = false;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int major = 0;
    if (!chars || f.size() != 2 || !absl::SimpleAtoi(f[0], &major)) continue;
    if (major == 195 || absl::StartsWith(f[1], "nvidia")) continue;
    rules.push_back(absl::StrCat("c ", major, ":* rwm"));
  }
  for (const std::string& rule : allowed) rules.push_back(rule + " rwm");
  return rules;
}

std::unique_ptr<Cgroups> Cgroups::Detect(const std::string& root_name) {
  absl::StatusOr<std::string> mounts = ReadFile("/proc/self/mounts");
  if (!mounts.ok()) {
    auto cgroups = std::make_unique<Cgroups>();
    cgroups->summary_ = absl::StrCat("none: ", mounts.status().message());
    return cgroups;
  }
  return DetectFromMounts(root_name, *mounts);
}

std::unique_ptr<Cgroups> Cgroups::DetectFromMounts(const std::string& root_name,
                                                   absl::string_view mounts_table) {
  auto cgroups = std::make_unique<Cgroups>();
  if (!ValidRoot(root_name)) {
    cgroups->summary_ = absl::StrCat("none: invalid cgroup root name \"", root_name, "\"");
    return cgroups;
  }
  std::vector<Mount> mounts = ParseMounts(mounts_table);
  if (mounts.empty()) {
    cgroups->summary_ = "none: no cgroup hierarchy mounted";
    return cgroups;
  }
  std::vector<std::string> why;  // why each hierarchy looked at was not used

  // cgroup v2 with the cpu and memory controllers (pure v2, or a hybrid that moved them).
  const Mount* unified = nullptr;
  for (const Mount& mount : mounts) {
    if (mount.type != "cgroup2") continue;
    if (unified == nullptr) unified = &mount;
    std::string where = absl::StrCat("cgroup2 at ", mount.path);
    absl::StatusOr<std::string> controllers = ReadFile(mount.path + "/cgroup.controllers");
    if (!controllers.ok()) {
      why.push_back(absl::StrCat(where, ": ", controllers.status().message()));
      continue;
    }
    std::vector<absl::string_view> names =
        absl::StrSplit(*controllers, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    std::vector<std::string> missing;
    for (const char* needed : {"cpu", "memory"}) {
      if (std::find(names.begin(), names.end(), needed) == names.end()) missing.push_back(needed);
    }
    if (!missing.empty()) {
      why.push_back(absl::StrCat(where, " has no ", absl::StrJoin(missing, ", "), " controller"));
      continue;
    }
    if (mount.Has("ro")) {
      why.push_back(absl::StrCat(where, " is mounted read-only"));
      continue;
    }
    absl::StatusOr<std::string> base = MakeRoot(mount.path, root_name, true);
    if (!base.ok()) {
      why.push_back(absl::StrCat(where, ": ", base.status().message()));
      continue;
    }
    cgroups->mechanism_ = "cgroup-v2";
    cgroups->hierarchies_.push_back({Kind::kV2, *base});
    cgroups->summary_ = absl::StrCat("cgroup-v2: cpu, memory at ", *base);
    if (std::optional<std::string> devices = DevicesBase(mounts, root_name)) {
      cgroups->hierarchies_.push_back({Kind::kV1Devices, *devices});
      absl::StrAppend(&cgroups->summary_, "; v1 devices at ", *devices);
    }
    return cgroups;
  }

  // cgroup v1: the cpu and memory controllers, each where it is mounted.
  std::vector<std::string> used;
  for (auto [controller, kind, limit_file] :
       {std::tuple<const char*, Kind, const char*>{"cpu", Kind::kV1Cpu, "cpu.cfs_quota_us"},
        {"memory", Kind::kV1Memory, "memory.limit_in_bytes"},
        {"pids", Kind::kV1Pids, nullptr}}) {  // (the root group has no pids.max)
    // (A named copy: clang 14, which builds the fuzz targets, cannot capture a binding.)
    auto it = std::find_if(mounts.begin(), mounts.end(), [name = controller](const Mount& mount) {
      return mount.type == "cgroup" && mount.Has(name);
    });
    if (it == mounts.end()) {
      why.push_back(absl::StrCat("no cgroup v1 ", controller, " hierarchy mounted"));
      continue;
    }
    std::string where = absl::StrCat("cgroup v1 ", controller, " at ", it->path);
    if (it->Has("ro")) {
      why.push_back(absl::StrCat(where, " is mounted read-only"));
      continue;
    }
    if (limit_file != nullptr && !Exists(absl::StrCat(it->path, "/", limit_file))) {
      why.push_back(absl::StrCat(where, " has no ", limit_file));
      continue;
    }
    absl::StatusOr<std::string> base = MakeRoot(it->path, root_name, false);
    if (!base.ok()) {
      why.push_back(absl::StrCat(where, ": ", base.status().message()));
      continue;
    }
    cgroups->hierarchies_.push_back({kind, *base});
    used.push_back(absl::StrCat(controller, " at ", *base));
  }
  if (cgroups->hierarchies_.empty()) {
    cgroups->summary_ = absl::StrCat("none: ", absl::StrJoin(why, "; "));
    return cgroups;
  }
  cgroups->mechanism_ = "cgroup-v1";
  // A cgroup2 mount beside v1 (hybrid) limits nothing but gives cgroup.kill and a procs list
  // that no process leaves by itself.
  if (unified != nullptr && !unified->Has("ro")) {
    absl::StatusOr<std::string> base = MakeRoot(unified->path, root_name, false);
    if (base.ok()) {
      cgroups->hierarchies_.push_back({Kind::kUnified, *base});
      used.push_back(absl::StrCat("cgroup2 (for cgroup.kill) at ", *base));
    } else {
      why.push_back(absl::StrCat("cgroup2 at ", unified->path, ": ", base.status().message()));
    }
  }
  if (std::optional<std::string> devices = DevicesBase(mounts, root_name)) {
    cgroups->hierarchies_.push_back({Kind::kV1Devices, *devices});
    used.push_back(absl::StrCat("devices at ", *devices));
  }
  cgroups->summary_ = absl::StrCat("cgroup-v1: ", absl::StrJoin(used, ", "));
  if (!why.empty()) absl::StrAppend(&cgroups->summary_, "; ", absl::StrJoin(why, "; "));
  return cgroups;
}

absl::StatusOr<CgroupGroup> Cgroups::Create(const std::string& name, const ResourceLimits& limits,
                                            const std::vector<std::string>* allowed_devices) const {
  if (limits.cpu_milli < 0 || limits.memory_mib < 0 || limits.pids_max < 0 ||
      limits.memory_mib > std::numeric_limits<int64_t>::max() / (1024 * 1024) ||
      limits.cpu_milli > std::numeric_limits<int64_t>::max() / kCpuPeriodUs) {
    return absl::InvalidArgumentError(absl::StrCat("invalid limits: cpu_milli=", limits.cpu_milli,
                                                   ", memory_mib=", limits.memory_mib,
                                                   ", pids_max=", limits.pids_max));
  }
  CgroupGroup group;
  group.enforcement.mechanism = mechanism_;
  Limited done;
  auto fail = [&](absl::Status status) {
    Remove(group.dirs, std::chrono::milliseconds(0)).IgnoreError();
    return status;
  };
  for (const Hierarchy& hierarchy : hierarchies_) {
    std::string dir = absl::StrCat(hierarchy.base, "/", name);
    absl::StatusOr<bool> reused = MakeGroupDir(dir);
    if (!reused.ok()) return fail(reused.status());
    group.dirs.push_back(dir);
    absl::Status status = WriteLimits(hierarchy.kind, dir, limits, *reused, done);
    if (status.ok() && hierarchy.kind == Kind::kV1Devices && allowed_devices == nullptr &&
        *reused) {
      status = WriteFile(dir + "/devices.allow", "a");
    }
    if (!status.ok()) return fail(status);
  }
  std::vector<std::string>& notes = done.notes;
  if (limits.cpu_milli > 0 && !done.cpu) notes.push_back("cpu not limited: no cpu hierarchy");
  if (limits.memory_mib > 0 && !done.memory) {
    notes.push_back("memory not limited: no memory hierarchy");
  }
  if (limits.pids_max > 0 && !done.pids) notes.push_back("pids not limited: no pids controller");
  if (allowed_devices != nullptr) {
    absl::StatusOr<std::string> devices = FenceDevices(group.dirs, *allowed_devices);
    if (!devices.ok()) return fail(devices.status());
    group.enforcement.devices = *devices;
  }
  group.enforcement.detail = absl::StrCat(
      mechanism_, ": ", done.written.empty() ? "no limits" : absl::StrJoin(done.written, ", "));
  if (!notes.empty()) absl::StrAppend(&group.enforcement.detail, "; ", absl::StrJoin(notes, "; "));
  return group;
}

absl::StatusOr<bool> Cgroups::MakeGroupDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0) {
    chmod(dir.c_str(), 0755);
    return false;
  }
  if (errno != EEXIST) return ErrnoStatus(errno, absl::StrCat("mkdir ", dir));
  // Left by a replica of that name that is gone: made anew (which also drops a device program
  // attached to it), or, when it cannot be removed, reused with what it limited reset.
  if (!Procs({dir}).empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat("cgroup ", dir, " already exists and holds processes"));
  }
  if (rmdir(dir.c_str()) == 0 && mkdir(dir.c_str(), 0755) == 0) {
    chmod(dir.c_str(), 0755);
    return false;
  }
  return Exists(dir) ? absl::StatusOr<bool>(true) : ErrnoStatus(errno, absl::StrCat("mkdir ", dir));
}

namespace {

// cgroup v1's cpu.shares for a CPU request, as the kubelet sets it (1024 per core, at least 2);
// the default (1024) for none.
int64_t CpuShares(int64_t request_milli) {
  return request_milli > 0 ? std::max<int64_t>(2, request_milli * 1024 / 1000) : 1024;
}

// cgroup v2's cpu.weight for the same request (the kernel's mapping of shares, 1 to 10000); the
// default (100) for none.
int64_t CpuWeight(int64_t request_milli) {
  if (request_milli <= 0) return 100;
  return std::clamp<int64_t>(1 + (CpuShares(request_milli) - 2) * 9999 / 262142, 1, 10000);
}

}  // namespace

absl::Status Cgroups::WriteLimits(Kind kind, const std::string& dir, const ResourceLimits& limits,
                                  bool reused, Limited& done) {
  const int64_t quota_us = std::max(kMinCpuQuotaUs, limits.cpu_milli * (kCpuPeriodUs / 1000));
  const int64_t memory_bytes = limits.memory_mib * 1024 * 1024;
  absl::Status status;
  auto write = [&](const char* file, const std::string& value, const std::string& shown) {
    if (!status.ok()) return;
    status.Update(WriteFile(absl::StrCat(dir, "/", file), value));
    if (!shown.empty()) done.written.push_back(shown);
  };
  bool cpu = limits.cpu_milli > 0 || reused;
  bool memory = limits.memory_mib > 0 || reused;
  bool pids = limits.pids_max > 0 || reused;
  std::string pids_value = limits.pids_max > 0 ? absl::StrCat(limits.pids_max) : "max";
  switch (kind) {
    case Kind::kV2: {
      std::string cpu_value = limits.cpu_milli > 0 ? absl::StrCat(quota_us, " ", kCpuPeriodUs)
                                                   : absl::StrCat("max ", kCpuPeriodUs);
      std::string memory_value = limits.memory_mib > 0 ? absl::StrCat(memory_bytes) : "max";
      if (cpu) write("cpu.max", cpu_value, absl::StrCat("cpu.max=", cpu_value));
      if ((limits.cpu_request_milli > 0 || reused) && Exists(dir + "/cpu.weight")) {
        const std::string weight = absl::StrCat(CpuWeight(limits.cpu_request_milli));
        write("cpu.weight", weight,
              limits.cpu_request_milli > 0 ? absl::StrCat("cpu.weight=", weight) : "");
      }
      if (memory) write("memory.max", memory_value, absl::StrCat("memory.max=", memory_value));
      // pids.max exists only where the pids controller is enabled for the group.
      if (pids && Exists(dir + "/pids.max")) {
        write("pids.max", pids_value, absl::StrCat("pids.max=", pids_value));
        done.pids = true;
      }
      done.cpu |= cpu;
      done.memory |= memory;
      break;
    }
    case Kind::kV1Cpu:
      if (cpu) {
        int64_t value = limits.cpu_milli > 0 ? quota_us : -1;
        write("cpu.cfs_period_us", absl::StrCat(kCpuPeriodUs), "");
        write("cpu.cfs_quota_us", absl::StrCat(value),
              absl::StrCat("cpu.cfs_quota_us=", value, "/", kCpuPeriodUs));
        if (limits.cpu_request_milli > 0 || reused) {
          const std::string shares = absl::StrCat(CpuShares(limits.cpu_request_milli));
          write("cpu.shares", shares,
                limits.cpu_request_milli > 0 ? absl::StrCat("cpu.shares=", shares) : "");
        }
        done.cpu = true;
      }
      break;
    case Kind::kV1Memory:
      if (memory) {
        int64_t value = limits.memory_mib > 0 ? memory_bytes : -1;
        write("memory.limit_in_bytes", absl::StrCat(value),
              absl::StrCat("memory.limit_in_bytes=", value));
        done.memory = true;
      }
      break;
    case Kind::kV1Pids:
      if (pids) {
        write("pids.max", pids_value, absl::StrCat("pids.max=", pids_value));
        done.pids = true;
      }
      break;
    case Kind::kUnified:
      if (Exists(dir + "/cgroup.kill")) done.notes.push_back("stop via cgroup.kill");
      break;
    case Kind::kV1Devices:
      break;
  }
  return status;
}

absl::StatusOr<std::string> Cgroups::FenceDevices(const std::vector<std::string>& dirs,
                                                  const std::vector<std::string>& paths) const {
  absl::StatusOr<std::string> proc_devices = ReadFile("/proc/devices");
  if (!proc_devices.ok()) return proc_devices.status();
  std::vector<std::string> rules;
  std::vector<DeviceNumber> numbers;
  std::vector<std::string> names;
  for (const std::string& path : paths) {
    if (std::optional<DeviceNumber> device = CharDevice(path)) {
      std::string number = absl::StrCat(device->major, ":", device->minor);
      rules.push_back("c " + number);
      numbers.push_back(*device);
      names.push_back(absl::StrCat(path, " (", number, ")"));
    }
  }
  std::vector<std::string> applied;
  std::vector<std::string> why;
  for (size_t i = 0; i < hierarchies_.size() && i < dirs.size(); ++i) {
    const std::string& dir = dirs[i];
    switch (hierarchies_[i].kind) {
      case Kind::kV1Devices:
        if (absl::Status s = RestrictDevices(dir, *proc_devices, rules); !s.ok()) return s;
        applied.push_back("cgroup-v1 devices");
        break;
      case Kind::kV2:
      case Kind::kUnified:
        if (absl::Status s = AttachDeviceFilter(dir, NvidiaMajors(*proc_devices), numbers);
            s.ok()) {
          applied.push_back("cgroup-v2 BPF device program");
        } else {
          why.push_back(std::string(s.message()));
        }
        break;
      default:
        break;
    }
  }
  if (applied.empty()) {
    if (why.empty()) why.push_back("no cgroup v1 devices controller and no cgroup v2 group");
    return absl::StrCat("not enforced: ", absl::StrJoin(why, "; "),
                        ", so the replica can open every NVIDIA device its file modes allow");
  }
  return absl::StrCat(absl::StrJoin(applied, " + "), ": NVIDIA devices denied except ",
                      names.empty() ? std::string("none") : absl::StrJoin(names, ", "));
}

absl::Status Cgroups::RestrictDevices(const std::string& dir, absl::string_view proc_devices,
                                      const std::vector<std::string>& allowed) {
  if (absl::Status s = WriteFile(dir + "/devices.deny", "a"); !s.ok()) return s;
  for (const std::string& rule : DeviceAllowRules(proc_devices, allowed)) {
    if (absl::Status s = WriteFile(dir + "/devices.allow", rule); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Cgroups::Join(const CgroupGroup& group, pid_t pid) {
  for (const std::string& dir : group.dirs) {
    if (absl::Status s = WriteFile(dir + "/cgroup.procs", absl::StrCat(pid)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> Cgroups::DirsOf(const std::string& group_path) const {
  std::vector<std::string> dirs;
  if (group_path.empty()) return dirs;
  if (Exists(group_path)) dirs.push_back(group_path);
  const std::string parent = Parent(group_path);
  bool ours = std::any_of(hierarchies_.begin(), hierarchies_.end(),
                          [&](const Hierarchy& h) { return h.base == parent; });
  if (!ours) return dirs;
  const std::string name = Basename(group_path);
  for (const Hierarchy& hierarchy : hierarchies_) {
    std::string dir = absl::StrCat(hierarchy.base, "/", name);
    if (dir != group_path && Exists(dir)) dirs.push_back(dir);
  }
  return dirs;
}

std::vector<std::string> Cgroups::GroupsNamed(absl::string_view prefix) const {
  std::set<std::string> names;
  for (const Hierarchy& hierarchy : hierarchies_) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(hierarchy.base, error)) {
      std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, prefix) && entry.is_directory(error)) names.insert(name);
    }
  }
  std::vector<std::string> groups;
  if (hierarchies_.empty()) return groups;
  for (const std::string& name : names) groups.push_back(hierarchies_[0].base + "/" + name);
  return groups;
}

std::vector<pid_t> Cgroups::Procs(const std::vector<std::string>& dirs) {
  std::vector<pid_t> pids;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> text = ReadFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
    }
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

bool Cgroups::Kill(const std::vector<std::string>& dirs) {
  bool killed = false;
  for (const std::string& dir : dirs) {
    std::string file = dir + "/cgroup.kill";
    if (Exists(file) && WriteFile(file, "1").ok()) killed = true;
  }
  return killed;
}

absl::Status Cgroups::Remove(const std::vector<std::string>& dirs, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (const std::string& dir : dirs) {
    for (;;) {
      if (rmdir(dir.c_str()) == 0 || errno == ENOENT) break;
      int err = errno;
      if (err == EBUSY && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      if (err == EBUSY) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cgroup ", dir, " still busy (processes: ", absl::StrJoin(Procs({dir}), " "), ")"));
      }
      return ErrnoStatus(err, absl::StrCat("rmdir ", dir));
    }
  }
  return absl::OkStatus();
}

}  // namespace carve
