#ifndef CARVE_APPS_CARVE_SIM_COMMAND_H_
#define CARVE_APPS_CARVE_SIM_COMMAND_H_

#include "CLI/CLI.hpp"

namespace carve::app {

// Registers `carve sim fill`, `synth`, `compare` and `queues`.
void AddSimCommands(CLI::App& app);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_SIM_COMMAND_H_
