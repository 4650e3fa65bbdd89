#include <csignal>
#include <iostream>

#include "CLI/CLI.hpp"
#include "command_line.h"
#include "platform_command.h"
#include "sim_command.h"

int main(int argc, char** argv) {
  // OpenSSL writes to sockets with write(2): a peer that closes a TLS connection must not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"Carve: GPU scheduling and sharing for clusters many teams share", "carve"};
  app.require_subcommand(1);
  app.fallthrough();  // `carve show 1 -o json`: global flags after the subcommand too
  carve::app::AddSimCommands(app);
  carve::app::AddPlatformCommands(app);
  carve::app::AddClientCommands(app);
  carve::app::AddMetaCommands(app);
  carve::app::SplitArgs args = carve::app::SplitAtDashes(argc, argv);
  if (std::string wrong = carve::app::CheckCommandPlacement(app, args); !wrong.empty()) {
    std::cerr << "carve: " << wrong << "\n";
    return 2;
  }
  carve::app::SetCommandAfterDashes(std::move(args.command));
  std::vector<std::string> reversed(args.head.rbegin(), args.head.rend());  // as CLI11 takes them
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
