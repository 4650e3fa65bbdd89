// `carve probe`: run inside a job, it reports what the job got (runtime/probe.h).
#include <iostream>
#include <memory>
#include <string>

#include "platform_command.h"
#include "runtime/job_spec.h"
#include "runtime/probe.h"

namespace carve::app {

void AddProbeCommand(CLI::App& app) {
  auto options = std::make_shared<ProbeOptions>();
  auto hold = std::make_shared<std::string>("0s");
  CLI::App* probe = app.add_subcommand(
      "probe",
      "Report from inside a job what it got: devices, device memory it could take, cgroup and MPS "
      "limits, compute progress per second (one JSON object per line)");
  probe->add_option("--memory-mib", options->memory_mib, "Device memory to take, in MiB")
      ->check(CLI::NonNegativeNumber);
  probe->add_option("--step-mib", options->step_mib, "Take it in steps of this many MiB")
      ->check(CLI::PositiveNumber);
  probe->add_option("--hold", *hold, "Keep the memory this long after the last step (e.g. 5s)");
  probe->add_option("--seconds", options->seconds, "Compute this many seconds")
      ->check(CLI::NonNegativeNumber);
  probe->add_option("--exit-code", options->exit_code, "Exit with this code after the compute")
      ->check(CLI::Range(0, 255));
  probe->add_flag("--crash", options->crash, "Crash (SIGSEGV) after the compute");
  probe->add_flag("--checkpoint", options->checkpoint,
                  "Resume the compute where an earlier attempt stopped ($CARVE_CHECKPOINT_DIR)");
  probe->callback([options, hold] {
    auto held = ParseDurationUs(*hold);
    if (!held.ok()) {
      std::cerr << "carve probe: --hold: " << held.status().message() << "\n";
      std::exit(2);
    }
    options->hold_ms = *held / 1000;
    std::exit(RunProbe(*options, ProbeHost::Real(), std::cout));
  });
}

}  // namespace carve::app
