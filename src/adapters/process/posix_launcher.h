#ifndef CARVE_ADAPTERS_PROCESS_POSIX_LAUNCHER_H_
#define CARVE_ADAPTERS_PROCESS_POSIX_LAUNCHER_H_

#include <memory>

#include "adapters/cgroups/cgroups.h"
#include "ports/process.h"

namespace carve {

// MakePosixLauncher over a given cgroup detection (tests pass one made from a mounts table).
// REQUIRES: cgroups != nullptr.
std::unique_ptr<ProcessLauncher> MakePosixLauncherWithCgroups(std::unique_ptr<Cgroups> cgroups);

}  // namespace carve

#endif  // CARVE_ADAPTERS_PROCESS_POSIX_LAUNCHER_H_
