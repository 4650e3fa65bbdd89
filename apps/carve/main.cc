#include <csignal>
#include <iostream>

#include "CLI/CLI.hpp"
#include "platform_command.h"
#include "sim_command.h"

int main(int argc, char** argv) {
  // OpenSSL writes to sockets with write(2): a peer that closes a TLS connection must not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"Carve: GPU scheduling and sharing for clusters many teams share"};
  app.require_subcommand(1);
  app.fallthrough();  // `carve show 1 -o json`: global flags after the subcommand too
  carve::app::AddSimCommands(app);
  carve::app::AddPlatformCommands(app);
  carve::app::AddClientCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
