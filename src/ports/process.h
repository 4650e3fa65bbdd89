#ifndef CARVE_PORTS_PROCESS_H_
#define CARVE_PORTS_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace carve {

// Limits for one replica's process group. Zero means "no limit".
struct ResourceLimits {
  int64_t cpu_milli = 0;   // CPU bandwidth: cpu_milli/1000 cores
  int64_t memory_mib = 0;  // hard memory limit
  int64_t pids_max = 0;    // processes and threads (pids.max): a fork bomb stops here
  // CPU asked: the group's weight under contention (cpu.weight, cpu.shares) is in proportion to
  // it, so a replica bursting to a limit above its request never keeps another below what it
  // asked. 0: the default weight.
  int64_t cpu_request_milli = 0;
};

// How a replica is started.
struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  // The replica's whole environment, over a clean one: nothing of the agent's environment is
  // inherited except LANG, LC_ALL, TZ and TERM when set; PATH defaults to
  // "/usr/local/bin:/usr/bin:/bin".
  std::map<std::string, std::string> env;
  std::string workdir;     // empty: the agent's working directory; entered as `uid`
  std::string log_path;    // stdout and stderr, appended; created 0600, opened by the agent's user
  std::string group_name;  // cgroup name, unique per replica ("job-17-r0")
  ResourceLimits limits;
  // When set: created (0600, truncated, never through a symlink) before privileges are dropped
  // and given to the command as descriptor 3, so it can report without write access to the
  // directory.
  std::string status_path;
  // Run as this user and group (no supplementary groups); -1: the agent's own. Every replica
  // runs with PR_SET_NO_NEW_PRIVS.
  int64_t uid = -1;
  int64_t gid = -1;
  // Character devices ("c 195:0") the replica may open among those the isolation governs (the
  // NVIDIA devices); empty with `restrict_devices` false: no device restriction.
  bool restrict_devices = false;
  std::vector<std::string> allowed_devices;
};

// What the isolation actually enforced, for the job record ("cgroup v2: cpu.max=150000 100000,
// memory.max=2147483648", "cgroup v1: cpu,memory", or "none: no writable cgroup hierarchy").
struct Enforcement {
  std::string mechanism;  // "cgroup-v2", "cgroup-v1" or "none"
  std::string detail;
  // Who the replica runs as: "uid 200001 gid 200001, no supplementary groups, no_new_privs".
  std::string identity;
  // How its device access is limited ("cgroup-v1 devices: ..." or "not enforced: ...").
  std::string devices;
};

struct ProcessHandle {
  pid_t pid = 0;           // leader of its own process group (pgid == pid) and session
  std::string group_path;  // cgroup directory, empty when none
  Enforcement enforcement;
};

// How a process ended.
struct ExitStatus {
  bool exited = false;  // normal exit with `code`; otherwise killed by `signal`
  int code = 0;
  int signal = 0;
};

// What a replica's processes used over their life, from its cgroup (-1: the hierarchy does not
// report it), read once they have ended.
struct ResourceUse {
  int64_t cpu_usec = -1;           // user + system CPU time of every process of the group
  int64_t peak_memory_bytes = -1;  // the group's peak memory use
  std::string source;              // the files read ("cpu.stat usage_usec, memory.peak")
};

// What ProcessLauncher::Sweep did with the groups an earlier agent left behind.
struct SweptGroups {
  std::vector<std::string> removed;  // empty groups, removed
  std::vector<std::string> killed;   // groups that still held processes: killed, then removed
  std::vector<std::string> failed;   // "group: why" for each that could not be removed
};

// Starts replicas as process groups in their own cgroups (v2 where available, else v1, else
// none: what was enforced is reported), and stops them. Thread-safe.
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  virtual absl::StatusOr<ProcessHandle> Launch(const LaunchSpec& spec) = 0;
  // Non-blocking: the exit status once the process has ended (reaping it if it is our child),
  // nullopt while it runs. For an adopted (non-child) process the status is unknown once it is
  // gone: exited=false, signal=0.
  virtual absl::StatusOr<std::optional<ExitStatus>> Poll(const ProcessHandle& handle) = 0;
  // SIGTERM to the whole group (and the cgroup), then SIGKILL after `grace_ms` if any member is
  // left. Returns once every process of the group is gone or SIGKILL was sent.
  virtual absl::Status Stop(const ProcessHandle& handle, int64_t grace_ms) = 0;
  // Removes the replica's cgroup once its processes are gone.
  virtual absl::Status Cleanup(const ProcessHandle& handle) = 0;
  // True when the handle's process (group) is still alive: for re-adopting replicas after an
  // agent restart.
  virtual bool Alive(const ProcessHandle& handle) = 0;
  // True when live process `pid` belongs to the replica: it is in the replica's cgroup, or (as
  // Alive counts members) in its process group or session. For matching device processes,
  // which NVML names only by pid, to a replica.
  virtual bool Owns(const ProcessHandle& handle, int64_t pid) {
    (void)handle;
    (void)pid;
    return false;
  }
  // Removes the groups (cgroups) whose names start with `prefix` and that no replica in `keep`
  // (their group paths) uses: those of an earlier agent's replicas that ended while it was down,
  // or that it started and never recorded. Processes still in such a group are killed first:
  // no replica this agent knows runs them.
  virtual SweptGroups Sweep(const std::string& prefix, const std::set<std::string>& keep) {
    (void)prefix;
    (void)keep;
    return {};
  }
  // How many times the kernel's OOM killer acted inside the replica's memory cgroup (cgroup v2
  // memory.events, v1 memory.oom_control "oom_kill"); 0 when unknown. Call before Cleanup.
  virtual int64_t OomKills(const ProcessHandle& handle) {
    (void)handle;
    return 0;
  }
  // CPU time and peak memory of the replica's group (cgroup v2 cpu.stat usage_usec and
  // memory.peak; v1 cpuacct.usage and memory.max_usage_in_bytes); what the hierarchy does not
  // report stays -1. Call after its processes are gone and before Cleanup.
  virtual ResourceUse Usage(const ProcessHandle& handle) {
    (void)handle;
    return {};
  }
};

// Detects the cgroup hierarchy at start (pure v2 at /sys/fs/cgroup, or a v2 mount with the
// needed controllers, else v1 cpu+memory controllers, else none) under `root_name`
// ("carve" -> /sys/fs/cgroup/carve/...).
std::unique_ptr<ProcessLauncher> MakePosixLauncher(const std::string& root_name);

}  // namespace carve

#endif  // CARVE_PORTS_PROCESS_H_
