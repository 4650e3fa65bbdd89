#ifndef CARVE_RUNTIME_REPLICA_MONITOR_H_
#define CARVE_RUNTIME_REPLICA_MONITOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ports/process.h"

namespace carve {

// The leader of a replica's process group (`carve internal-run --status-fd 3 -- CMD...`): runs
// CMD as its child and writes how CMD ended ("exit 3", "signal 15") to the descriptor (opened by
// the agent before it dropped privileges; `--status FILE` writes a file instead), so an agent
// that was restarted, and is no longer the parent, still learns the exit status. It ignores
// SIGTERM, SIGINT and SIGHUP itself (its child does not), so stopping the group records the
// child's end. Variables named kDeferredEnvPrefix + NAME become NAME in CMD's environment only:
// the job's LD_PRELOAD and friends never load into the monitor. Returns the child's exit code,
// or 128 + the signal that ended it.
int MonitorReplica(const std::string& status_file, const std::vector<std::string>& argv,
                   int status_fd = -1);

inline constexpr char kDeferredEnvPrefix[] = "CARVE_EXEC_ENV_";

// A job's environment as given to the monitor: variables that steer the dynamic loader or libc
// (LD_*, GCONV_PATH, MALLOC_*, ...) are renamed with kDeferredEnvPrefix, so only the job's
// command sees them.
std::map<std::string, std::string> DeferLoaderEnv(const std::map<std::string, std::string>& env);

// Reads what MonitorReplica wrote; nullopt when the file is missing or unreadable.
std::optional<ExitStatus> ReadReplicaStatus(const std::string& status_file);

}  // namespace carve

#endif  // CARVE_RUNTIME_REPLICA_MONITOR_H_
