#ifndef CARVE_APPS_CARVE_CLIENT_CONNECTION_H_
#define CARVE_APPS_CARVE_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api_client.h"

namespace carve::app {

// The server and token a client command talks to, and how it prints.
struct Connection {
  std::string server;
  std::string token;
  std::string output = "table";
};

// Prints "carve: MESSAGE" and exits (2 for bad input, 1 otherwise).
[[noreturn]] void Die(const absl::Status& s);
// Flags, then CARVE_SERVER / CARVE_TOKEN, then what `carve dev` wrote to ./carve-data.
ApiClient Client(const Connection& c);
nlohmann::json Check(absl::StatusOr<nlohmann::json> r);
// Prints `j` as JSON or YAML when asked; returns false when the caller should print a table.
bool Structured(const Connection& c, const nlohmann::json& j);

// `carve user | token | whoami | audit | usage | export | utilization` (admin_command.cc).
void AddAdminCommands(CLI::App& app, std::shared_ptr<Connection> c);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_CLIENT_CONNECTION_H_
