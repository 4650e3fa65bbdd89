#ifndef CARVE_ADAPTERS_CGROUPS_CGROUPS_H_
#define CARVE_ADAPTERS_CGROUPS_CGROUPS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ports/process.h"

namespace carve {

// One replica's cgroup: a directory per hierarchy used (the primary one first; cgroup v1 has one
// per controller plus, where the kernel offers it, a cgroup2 directory for cgroup.kill), and
// what was written into them.
struct CgroupGroup {
  std::vector<std::string> dirs;
  Enforcement enforcement;
};

// The devices.allow lines, after "a" is written to devices.deny, that let a replica use every
// device but the NVIDIA character devices, and of those only `allowed` ("c 195:0"). Majors
// come from `proc_devices` (/proc/devices).
std::vector<std::string> DeviceAllowRules(absl::string_view proc_devices,
                                          const std::vector<std::string>& allowed);

// The cgroup hierarchy this machine lets us use, detected once (the lifecycle of a Mesos
// isolator, cut down: detect, create + limit, join, kill, remove). Groups live at
// <mount>/<root_name>/<group_name> in every hierarchy used:
//   cgroup-v2: a cgroup2 mount whose cgroup.controllers has cpu and memory (pure v2 at
//              /sys/fs/cgroup); cpu.max, memory.max; cgroup.kill.
//   cgroup-v1: v1 cpu and/or memory controllers; cpu.cfs_quota_us/cpu.cfs_period_us,
//              memory.limit_in_bytes; plus the cgroup2 mount (hybrid systems) for cgroup.kill.
//   none:      nothing usable; summary() says why.
// Thread-safe: nothing changes after detection.
class Cgroups {
 public:
  // Reads /proc/self/mounts. Creates <mount>/<root_name> in each hierarchy it probes.
  static std::unique_ptr<Cgroups> Detect(const std::string& root_name);
  // The same from a mounts table in /proc/self/mounts format (tests).
  static std::unique_ptr<Cgroups> DetectFromMounts(const std::string& root_name,
                                                   absl::string_view mounts_table);

  const std::string& mechanism() const { return mechanism_; }  // "cgroup-v2" | "cgroup-v1" | "none"
  // The hierarchies used, or why none is usable ("none: ...").
  const std::string& summary() const { return summary_; }
  bool available() const { return mechanism_ != "none"; }

  // Creates group `name` in every hierarchy used and writes `limits`; the enforcement lists
  // exactly what was written. AlreadyExists when a group of that name still holds processes;
  // any other error means nothing was left behind and the replica runs without a cgroup.
  // REQUIRES: available(); `name` is one path component.
  // `allowed_devices`, when given, restricts the replica's NVIDIA character devices (major 195
  // and every major /proc/devices names "nvidia*") to those device nodes (paths; missing ones
  // are skipped) through the v1 devices controller and, on cgroup v2, a BPF device program;
  // enforcement.devices says what was applied, or that nothing was.
  absl::StatusOr<CgroupGroup> Create(
      const std::string& name, const ResourceLimits& limits,
      const std::vector<std::string>* allowed_devices = nullptr) const;
  // Moves `pid` into every directory of `group`.
  static absl::Status Join(const CgroupGroup& group, pid_t pid);

  // The directories that exist of the group whose primary directory is `group_path` (for
  // handles from an earlier agent: the same group name under every hierarchy used).
  std::vector<std::string> DirsOf(const std::string& group_path) const;
  // The groups whose names start with `prefix`, found in any hierarchy used, each as its primary
  // directory (which may itself be gone: DirsOf finds the rest).
  std::vector<std::string> GroupsNamed(absl::string_view prefix) const;
  // The processes in any of `dirs` (cgroup.procs).
  static std::vector<pid_t> Procs(const std::vector<std::string>& dirs);
  // Writes "1" to cgroup.kill in each of `dirs` that has one; true when one was written.
  static bool Kill(const std::vector<std::string>& dirs);
  // Removes `dirs` (missing ones are fine), retrying while their processes drain for up to
  // `wait`. FailedPrecondition naming the directory when one stays busy.
  static absl::Status Remove(const std::vector<std::string>& dirs, std::chrono::milliseconds wait);

 private:
  enum class Kind { kV2, kV1Cpu, kV1Memory, kV1Pids, kUnified, kV1Devices };
  struct Hierarchy {
    Kind kind;
    std::string base;  // <mount>/<root_name>
  };

  // What Create wrote into a group's directories, for the record.
  struct Limited {
    std::vector<std::string> written;  // "cpu.max=150000 100000", ...
    std::vector<std::string> notes;
    bool cpu = false;
    bool memory = false;
    bool pids = false;
  };

  // Makes a group's directory; true when one left by a gone replica had to be reused.
  static absl::StatusOr<bool> MakeGroupDir(const std::string& dir);
  // Writes `limits` (or, for a reused directory, resets them) into `dir` of hierarchy `kind`.
  static absl::Status WriteLimits(Kind kind, const std::string& dir, const ResourceLimits& limits,
                                  bool reused, Limited& done);
  // Restricts the NVIDIA devices of the group in `dirs` (one per hierarchy, in order) to
  // `paths`, through every mechanism this machine has: the v1 devices controller and a cgroup v2
  // BPF device program. The record's text: which mechanisms applied, or why none did.
  absl::StatusOr<std::string> FenceDevices(const std::vector<std::string>& dirs,
                                           const std::vector<std::string>& paths) const;
  // Denies every device but the non-NVIDIA ones and `allowed` ("c 195:0") in v1 group `dir`.
  static absl::Status RestrictDevices(const std::string& dir, absl::string_view proc_devices,
                                      const std::vector<std::string>& allowed);

  std::string mechanism_ = "none";
  std::string summary_;
  std::vector<Hierarchy> hierarchies_;  // primary first
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_CGROUPS_CGROUPS_H_
