// What every CLI command that talks to the server shares: the connection flags, the client,
// error exits and output formats.
#ifndef CARVE_APPS_CARVE_CLIENT_COMMON_H_
#define CARVE_APPS_CARVE_CLIENT_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api_client.h"

namespace carve::app {

// --server, --token, --ca and -o, shared by every client command.
struct Connection {
  std::string server;
  std::string token;
  std::string ca;  // PEM CA file for an https server
  std::string output = "table";
};

// Prints the error and exits: 2 for bad input, 1 otherwise.
[[noreturn]] void Die(const absl::Status& s);
// Flags, then CARVE_SERVER / CARVE_TOKEN / CARVE_CA, then what `carve dev` wrote to
// ./carve-data.
ApiClient Client(const Connection& c);
// The server, token and CA Client would use (Die without a token).
Connection Resolved(const Connection& c);
// The server Client talks to, resolved the same way.
std::string ServerUrl(const Connection& c);
// The value, or Die.
nlohmann::json Check(absl::StatusOr<nlohmann::json> r);
// Prints `j` as JSON or YAML when asked; returns false when the caller should print a table, and
// then first escapes the control characters in every string of `j` (TerminalSafe): what others
// named their jobs, queues or reasons cannot steer the terminal or forge table rows (M6).
bool Structured(const Connection& c, nlohmann::json& j);
// A time in microseconds in the local zone, "2026-12-03 16:45:01" (with the zone's name, "...
// UTC", when `zone`); "-" for 0.
std::string LocalTime(int64_t us, bool zone = false);
// j[key] as text: a string as it is, another value as JSON, "" when absent or null.
std::string Text(const nlohmann::json& j, const char* key);
// The wall clock, microseconds since the epoch.
int64_t NowUs();
// A time flag in microseconds: "2026-11-30T10:00:00Z", "2026-11-30", "@1764496800" (Unix
// seconds) or how long ago ("24h", "7d"); 0 for ""; Die naming `flag` otherwise.
int64_t TimeFlag(const std::string& flag, const std::string& text);
// The whole text of the file at `path` (standard input for "-"), or Die saying it cannot be
// opened.
std::string ReadFileOrDie(const std::string& path);
// Blocks SIGINT and SIGTERM in this thread and the threads it starts after, so that one thread
// takes them with StopSignalled.
void BlockStopSignals();
// Waits up to `ms` for SIGINT or SIGTERM (blocked by BlockStopSignals); true when one came.
bool StopSignalled(int64_t ms);
// A job id from the command line, or Die.
int64_t JobId(const std::string& text);

// Command groups beside AddClientCommands, each in its own file.
void AddOperationsCommands(CLI::App& app, std::shared_ptr<Connection> c);  // relayout, scale
void AddQueueCommands(CLI::App& app, std::shared_ptr<Connection> c);       // queues, explain
// user, token, whoami, audit, usage, export usage, utilization (admin_command.cc).
void AddAdminCommands(CLI::App& app, std::shared_ptr<Connection> c);
void AddPocCommands(CLI::App& app, std::shared_ptr<Connection> c);  // poc run, poc verify
// `carve export all` (under `carve export`) and `carve import` (archive_command.cc).
void AddExportAll(CLI::App& exp, std::shared_ptr<Connection> c);
void AddImport(CLI::App& app);
void AddStore(CLI::App& app);
// `carve show JOB` as a page: sections for the request, timeline, replicas, attempts and
// preemption, times in the local zone (show_command.cc).
void PrintJobPage(const nlohmann::json& job);
void AddJobsCommands(CLI::App& app, std::shared_ptr<Connection> c);  // ls, cancel, logs, history
// `carve sim agents` and `carve sim submit`, under the `sim` AddSimCommands made.
void AddSimLiveCommands(CLI::App& app, std::shared_ptr<Connection> c);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_CLIENT_COMMON_H_
