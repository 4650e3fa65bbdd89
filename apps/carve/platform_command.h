#ifndef CARVE_APPS_CARVE_PLATFORM_COMMAND_H_
#define CARVE_APPS_CARVE_PLATFORM_COMMAND_H_

#include "CLI/CLI.hpp"

namespace carve::app {

// `carve server`, `carve agent` and `carve dev` (server + simulated agents in one process).
void AddPlatformCommands(CLI::App& app);
// `carve probe`, the acceptance kit's workload (probe_command.cc).
void AddProbeCommand(CLI::App& app);
// `carve submit | ls | show | explain | cancel | logs | nodes | events`.
void AddClientCommands(CLI::App& app);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_PLATFORM_COMMAND_H_
