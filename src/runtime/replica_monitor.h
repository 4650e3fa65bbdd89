#ifndef CARVE_RUNTIME_REPLICA_MONITOR_H_
#define CARVE_RUNTIME_REPLICA_MONITOR_H_

#include <optional>
#include <string>
#include <vector>

#include "ports/process.h"

namespace carve {

// The leader of a replica's process group (`carve internal-run --status FILE -- CMD...`): runs
// CMD as its child and writes how CMD ended to FILE ("exit 3", "signal 15"), so an agent that was
// restarted, and is no longer the parent, still learns the exit status. It ignores SIGTERM,
// SIGINT and SIGHUP itself (its child does not), so stopping the group records the child's end.
// Returns the child's exit code, or 128 + the signal that ended it.
int MonitorReplica(const std::string& status_file, const std::vector<std::string>& argv);

// Reads what MonitorReplica wrote; nullopt when the file is missing or unreadable.
std::optional<ExitStatus> ReadReplicaStatus(const std::string& status_file);

}  // namespace carve

#endif  // CARVE_RUNTIME_REPLICA_MONITOR_H_
