// `carve sim agents` and `carve sim submit`: load on a live server, for docs/scale.md.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client_common.h"
#include "runtime/agent_swarm.h"

namespace carve::app {
namespace {

// "name credential" lines.
std::map<std::string, std::string> ReadCredentials(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string name, credential;
  while (in >> name >> credential) out[name] = credential;
  return out;
}

void WriteCredentials(const std::string& path,
                      const std::map<std::string, std::string>& credentials) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::string text;
  for (const auto& [name, credential] : credentials)
    absl::StrAppend(&text, name, " ", credential, "\n");
  const bool written =
      fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!written) Die(absl::InternalError(absl::StrCat("--credentials ", path, ": cannot write")));
}

void PrintWindow(double at_s, const nlohmann::json& w) {
  const nlohmann::json& l = w["heartbeat_latency"];
  std::cout << absl::StrFormat(
                   "%7.0fs  beats/s %7.0f  p50 %7.1f ms  p99 %8.1f ms  max %8.1f ms  failed %5d  "
                   "late %5d  waits %6d (refused %6d)  running %6d  started %5d  ended %5d",
                   at_s, w["heartbeats_per_second"].get<double>(), l.value("p50_ms", 0.0),
                   l.value("p99_ms", 0.0), l.value("max_ms", 0.0),
                   w["heartbeats_failed"].get<int64_t>(), w["late_beats"].get<int64_t>(),
                   w["waits_answered"].get<int64_t>(), w["waits_refused"].get<int64_t>(),
                   w["replicas_running"].get<int64_t>(), w["replicas_started"].get<int64_t>(),
                   w["replicas_ended"].get<int64_t>())
            << std::endl;
}

void AddAgents(CLI::App& sim, std::shared_ptr<Connection> c) {
  auto o = std::make_shared<SwarmOptions>();
  auto token_file = std::make_shared<std::string>("carve-data/agent.token");
  auto duration_s = std::make_shared<int64_t>(0);
  auto report_s = std::make_shared<int64_t>(10);
  auto json_path = std::make_shared<std::string>();
  auto state = std::make_shared<std::string>("sim-agents.credentials");
  CLI::App* agents = sim.add_subcommand(
      "agents",
      "Thousands of simulated agents in one process against a live server: each node registers, "
      "heartbeats and waits for work as `carve agent` does; its replicas run on a virtual "
      "workload (no process starts; `sleep N` lasts N seconds) and their reclaim records say "
      "unchecked");
  agents->add_option("--nodes", o->nodes, "Nodes to simulate")->capture_default_str();
  agents
      ->add_option("--profile", o->profile,
                   "mixed: 8xH100, 8xA100-80GB, 8xH200, 4xL40S nodes in turn; h100: all 8xH100")
      ->capture_default_str();
  agents->add_option("--prefix", o->prefix, "Node names are PREFIX-00001, ...")
      ->capture_default_str();
  agents
      ->add_option("--join-token-file", *token_file,
                   "File with the join token (the server's agent.token; or CARVE_JOIN_TOKEN)")
      ->capture_default_str();
  agents->add_option("--heartbeat-ms", o->heartbeat_ms, "Each node's heartbeat period")
      ->capture_default_str();
  agents->add_option("--threads", o->threads, "Heartbeats in flight at most")
      ->capture_default_str();
  agents->add_flag("!--no-wait", o->wait,
                   "Nodes do not wait for work between heartbeats (GET /api/v1/agents/wait)");
  agents->add_option("--job-ms", o->job_ms, "How long a replica runs unless its command is sleep N")
      ->capture_default_str();
  agents->add_option("--duration-s", *duration_s, "Stop after this long (0: at SIGINT/SIGTERM)")
      ->capture_default_str();
  agents->add_option("--report-s", *report_s, "Print a line of figures this often")
      ->capture_default_str();
  agents->add_option("--json", *json_path, "Write every report line and the whole run as JSON");
  agents
      ->add_option("--credentials", *state,
                   "Where the nodes' credentials are kept (0600) between runs: a node joins "
                   "once, and registers with its own credential after")
      ->capture_default_str();
  agents->callback([=] {
    o->server = ServerUrl(*c);
    o->ca_file = c->ca;
    if (const char* t = std::getenv("CARVE_JOIN_TOKEN"); t != nullptr) o->token = t;
    if (o->token.empty()) {
      std::ifstream in(*token_file);
      std::getline(in, o->token);
    }
    if (o->token.empty()) {
      Die(absl::InvalidArgumentError(
          absl::StrCat("no join token: --join-token-file ", *token_file,
                       " is missing or empty (the server "
                       "writes one to DATA/agent.token), and CARVE_JOIN_TOKEN is not set")));
    }
    if (o->nodes < 1 || o->heartbeat_ms < 10 || o->threads < 1 || *report_s < 1) {
      Die(absl::InvalidArgumentError(
          "--nodes and --threads must be at least 1, --heartbeat-ms at least 10, --report-s 1"));
    }
    o->credentials = ReadCredentials(*state);
    BlockStopSignals();
    AgentSwarm swarm(*o);
    const auto begun = std::chrono::steady_clock::now();
    absl::Status registered = swarm.Register();
    WriteCredentials(*state, swarm.Credentials());  // those that joined, whatever failed after
    if (!registered.ok()) Die(registered);
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
    };
    std::cout << absl::StrFormat("%d nodes registered in %.1f s", o->nodes, elapsed()) << std::endl;
    swarm.Start();
    nlohmann::json windows = nlohmann::json::array();
    bool stop = false;
    while (!stop) {
      int64_t wait_ms = *report_s * 1000;
      if (*duration_s > 0) {
        wait_ms = std::min<int64_t>(wait_ms, *duration_s * 1000 - int64_t(elapsed() * 1000));
      }
      stop = StopSignalled(std::max<int64_t>(wait_ms, 0)) ||
             (*duration_s > 0 && elapsed() >= static_cast<double>(*duration_s));
      nlohmann::json w = swarm.Window();
      w["at_s"] = elapsed();
      PrintWindow(elapsed(), w);
      windows.push_back(std::move(w));
    }
    swarm.Stop();
    if (!json_path->empty()) {
      std::ofstream out(*json_path);
      out << nlohmann::json{{"options",
                             {{"nodes", o->nodes},
                              {"profile", o->profile},
                              {"heartbeat_ms", o->heartbeat_ms},
                              {"threads", o->threads},
                              {"wait", o->wait}}},
                            {"windows", windows}}
                 .dump(2)
          << "\n";
      if (!out) Die(absl::InternalError(*json_path + ": cannot write"));
    }
  });
}

void AddSubmitLoad(CLI::App& sim, std::shared_ptr<Connection> c) {
  auto o = std::make_shared<SubmitLoadOptions>();
  auto command = std::make_shared<std::string>("sleep 30");
  auto json_path = std::make_shared<std::string>();
  CLI::App* submit = sim.add_subcommand(
      "submit",
      "Submit many jobs to a live server from several connections at once; prints the "
      "submissions per second and their latency");
  submit->add_option("--jobs", o->jobs, "Jobs to submit")->capture_default_str();
  submit->add_option("--clients", o->clients, "Connections submitting at once")
      ->capture_default_str();
  submit->add_option("--command", *command, "Each job's command (split at spaces)")
      ->capture_default_str();
  submit->add_option("--gpus", o->gpus, "GPUs each job asks for")->capture_default_str();
  submit
      ->add_option("--key-prefix", o->key_prefix,
                   "Idempotency keys are PREFIX-N (a rerun with the same prefix submits nothing "
                   "twice)")
      ->capture_default_str();
  submit->add_option("--json", *json_path, "Also write the result as JSON to this file");
  submit->callback([=] {
    const Connection r = Resolved(*c);
    o->server = r.server;
    o->token = r.token;
    o->ca_file = r.ca;
    o->command = absl::StrSplit(*command, ' ', absl::SkipEmpty());
    if (o->jobs < 1 || o->clients < 1 || o->command.empty()) {
      Die(absl::InvalidArgumentError(
          "--jobs and --clients must be at least 1, --command not empty"));
    }
    absl::StatusOr<nlohmann::json> result = SubmitLoad(*o);
    if (!result.ok()) Die(result.status());
    const nlohmann::json& l = (*result)["latency"];
    std::cout << absl::StrFormat(
                     "%d jobs in %.1f s: %.0f/s, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d failed",
                     o->jobs, (*result)["seconds"].get<double>(),
                     (*result)["per_second"].get<double>(), l.value("p50_ms", 0.0),
                     l.value("p99_ms", 0.0), l.value("max_ms", 0.0), (*result)["failed"].get<int>())
              << std::endl;
    if (!json_path->empty()) std::ofstream(*json_path) << result->dump(2) << "\n";
  });
}

}  // namespace

void AddSimLiveCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* sim = app.get_subcommand("sim");
  AddAgents(*sim, c);
  AddSubmitLoad(*sim, c);
}

}  // namespace carve::app
