#include "platform_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "adapters/nvml/nvml_backend.h"
#include "core/base/quantity.h"
#include "ports/devices.h"
#include "ports/process.h"
#include "runtime/agent.h"
#include "runtime/api_server.h"
#include "runtime/replica_monitor.h"
#include "yaml-cpp/yaml.h"

namespace carve::app {
namespace {

[[noreturn]] void Die(const absl::Status& s) {
  std::cerr << "carve: " << s.message() << "\n";
  std::exit(1);
}

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A 256-bit random token, hex.
std::string NewToken() {
  unsigned char bytes[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  std::string hex;
  for (unsigned char b : bytes) hex += absl::StrFormat("%02x", b);
  return hex;
}

// Reads DIR/NAME.token, or creates it (mode 0600) with a fresh token.
std::string TokenFile(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name + ".token";
  std::ifstream in(path);
  std::string token;
  if (in >> token && !token.empty()) return token;
  token = NewToken();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, token.data(), token.size()) < 0) {
    Die(absl::InternalError(absl::StrCat(path, ": cannot write the token")));
  }
  ::fchmod(fd, 0600);
  ::close(fd);
  return token;
}

struct Listen {
  std::string host = "127.0.0.1";
  int port = 7070;
};

Listen ParseListen(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  Listen l;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &l.port) || l.port < 0 || l.port > 65535) {
    Die(absl::InvalidArgumentError(
        absl::StrCat("--listen \"", text, "\": write it as HOST:PORT, e.g. 127.0.0.1:7070")));
  }
  l.host = parts[0];
  return l;
}

// Blocks until SIGINT or SIGTERM.
void WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

void BlockSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

struct ServerSettings {
  std::string data = "./carve-data";
  std::string listen = "127.0.0.1:7070";
  std::string policy = "carve";
  std::string config;
  int64_t schedule_interval_ms = 200;
  int64_t node_timeout_ms = 10000;
  int64_t lost_after_ms = 10000;
};

// Settings from the YAML config file; flags given on the command line win.
void ApplyConfig(ServerSettings& s, const CLI::App& cmd) {
  if (s.config.empty()) return;
  try {
    YAML::Node y = YAML::LoadFile(s.config);
    for (const auto& kv : y) {
      std::string key = kv.first.as<std::string>();
      auto set = [&](const char* flag, auto& out) {
        if (cmd.count(flag) == 0) out = kv.second.as<std::decay_t<decltype(out)>>();
      };
      if (key == "data") {
        set("--data", s.data);
      } else if (key == "listen") {
        set("--listen", s.listen);
      } else if (key == "policy") {
        set("--policy", s.policy);
      } else if (key == "schedule_interval_ms") {
        set("--schedule-interval-ms", s.schedule_interval_ms);
      } else if (key == "node_timeout_ms") {
        set("--node-timeout-ms", s.node_timeout_ms);
      } else if (key == "lost_after_ms") {
        set("--lost-after-ms", s.lost_after_ms);
      } else {
        Die(absl::InvalidArgumentError(
            absl::StrCat(s.config, ": unknown key \"", key,
                         "\"; known: data, listen, policy, schedule_interval_ms, node_timeout_ms, "
                         "lost_after_ms")));
      }
    }
  } catch (const YAML::Exception& e) {
    Die(absl::InvalidArgumentError(absl::StrCat(s.config, ": ", e.what())));
  }
}

void AddServerFlags(CLI::App* cmd, ServerSettings& s) {
  cmd->add_option("--data", s.data, "Data directory (SQLite store, logs, tokens)")
      ->capture_default_str();
  cmd->add_option("--listen", s.listen, "HOST:PORT to serve the API on")->capture_default_str();
  cmd->add_option("--policy", s.policy, "Placement policy")->capture_default_str();
  cmd->add_option("--config", s.config, "YAML file with the same settings");
  cmd->add_option("--schedule-interval-ms", s.schedule_interval_ms, "Scheduling cycle period")
      ->capture_default_str();
  cmd->add_option("--node-timeout-ms", s.node_timeout_ms, "A node silent this long is not-ready")
      ->capture_default_str();
  cmd->add_option("--lost-after-ms", s.lost_after_ms,
                  "A not-ready node's jobs are lost after this much more silence")
      ->capture_default_str();
}

// The running controller: store, control plane, API server.
struct Controller {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store;
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<ApiServer> api;
  std::string admin_token;
  std::string agent_token;
  std::string url;
};

std::unique_ptr<Controller> StartController(const ServerSettings& s) {
  auto c = std::make_unique<Controller>();
  std::error_code ec;
  std::filesystem::create_directories(s.data, ec);
  if (ec) Die(absl::InternalError(absl::StrCat(s.data, ": ", ec.message())));
  auto store = OpenSqliteStore(s.data + "/carve.db");
  if (!store.ok()) Die(store.status());
  c->store = *std::move(store);
  ControlPlane::Options options;
  options.policy = s.policy;
  options.log_dir = s.data + "/logs";
  options.checkpoint_root = std::filesystem::absolute(s.data + "/checkpoints").string();
  options.node_timeout_us = s.node_timeout_ms * 1000;
  options.lost_after_us = s.lost_after_ms * 1000;
  auto control = ControlPlane::Open(c->store.get(), &c->catalog, options, NowUs);
  if (!control.ok()) Die(control.status());
  c->control = *std::move(control);
  c->admin_token = TokenFile(s.data, "admin");
  c->agent_token = TokenFile(s.data, "agent");
  if (auto st = c->control->AddToken(c->admin_token, "admin", "admin"); !st.ok()) Die(st);
  if (auto st = c->control->AddToken(c->agent_token, "agents", "agent"); !st.ok()) Die(st);
  Listen l = ParseListen(s.listen);
  c->api = std::make_unique<ApiServer>(c->control.get(),
                                       ApiServer::Options{l.host, l.port, s.schedule_interval_ms});
  if (auto st = c->api->Start(); !st.ok()) Die(st);
  c->url = absl::StrCat("http://", l.host, ":", c->api->port());
  std::ofstream(s.data + "/server") << c->url << "\n";
  return c;
}

// `carve dev`'s cluster: one agent per node, simulated GPUs.
struct DevNode {
  const char* name;
  const char* yaml;
  int64_t cpu_milli;
  int64_t memory_gib;
};

constexpr DevNode kDevNodes[] = {
    {"h200-0", "gpus:\n  - {model: H200, count: 8, mode: exclusive}\n", 96000, 1024},
    {"a100-0", "gpus:\n  - {model: A100-80GB, count: 4, mode: partition, layout: dynamic}\n", 64000,
     512},
    {"l40s-0", "gpus:\n  - {model: L40S, count: 4, mode: shared}\n", 64000, 512},
    {"t4-0", "gpus:\n  - {model: T4, count: 2, mode: exclusive}\n", 32000, 128},
};

void AddDev(CLI::App& app) {
  auto s = std::make_shared<ServerSettings>();
  CLI::App* dev = app.add_subcommand(
      "dev",
      "Start a server and simulated-GPU agents on this machine (jobs run as real processes)");
  AddServerFlags(dev, *s);
  dev->callback([s, dev] {
    ApplyConfig(*s, *dev);
    BlockSignals();
    auto c = StartController(*s);
    std::vector<std::unique_ptr<Agent>> agents;
    for (const DevNode& n : kDevNodes) {
      auto devices = SimulatedBackendFromYaml(n.yaml, n.name);
      if (!devices.ok()) Die(devices.status());
      Agent::Options o;
      o.server = c->url;
      o.token = c->agent_token;
      o.node = n.name;
      o.data_dir = absl::StrCat(s->data, "/agents/", n.name);
      o.cpu_milli = n.cpu_milli;
      o.memory_mib = n.memory_gib * 1024;
      o.heartbeat_ms = 300;
      auto agent = std::make_unique<Agent>(o, *std::move(devices), MakePosixLauncher("carve"));
      if (auto st = agent->Start(); !st.ok()) Die(st);
      agents.push_back(std::move(agent));
    }
    std::string data = std::filesystem::absolute(s->data).lexically_normal().string();
    std::cout << "Carve is running at " << c->url << " (data in " << data << ")\n"
              << "  nodes: h200-0 (8x H200 exclusive), a100-0 (4x A100-80GB MIG, dynamic),\n"
              << "         l40s-0 (4x L40S shared), t4-0 (2x T4 exclusive); simulated GPUs,\n"
              << "         real processes\n"
              << "  dashboard: " << c->url << "/ (comes with the dashboard issue; the API is "
              << c->url << "/api/v1/openapi.json)\n"
              << "  admin token: " << data << "/admin.token (mode 0600)\n\n"
              << "In another terminal, from this directory:\n"
              << "  carve submit --gpus 1 --name hello -- sh -c 'echo hello from "
                 "$CUDA_VISIBLE_DEVICES; sleep 2'\n"
              << "  carve ls --all\n"
              << "  carve logs 1\n"
              << "Ctrl-C stops Carve and the jobs it runs.\n"
              << std::flush;
    WaitForSignal();
    std::cout << "stopping\n";
    for (auto& a : agents) a->Stop(true);
    c->api->Stop();
  });
}

void AddServer(CLI::App& app) {
  auto s = std::make_shared<ServerSettings>();
  CLI::App* server = app.add_subcommand("server", "Run the controller: REST API and scheduler");
  AddServerFlags(server, *s);
  server->callback([s, server] {
    ApplyConfig(*s, *server);
    BlockSignals();
    auto c = StartController(*s);
    std::cout << "carve server listening on " << c->url << "; admin token in " << s->data
              << "/admin.token, agent token in " << s->data << "/agent.token\n"
              << std::flush;
    WaitForSignal();
    c->api->Stop();
  });
}

void AddAgent(CLI::App& app) {
  auto o = std::make_shared<Agent::Options>();
  auto devices_file = std::make_shared<std::string>();
  auto nvml_library = std::make_shared<std::string>(kNvmlLibrary);
  auto token_file = std::make_shared<std::string>();
  auto cpu = std::make_shared<std::string>("8");
  auto memory = std::make_shared<std::string>("32Gi");
  o->node = "node-0";
  o->data_dir = "./carve-agent";
  CLI::App* agent =
      app.add_subcommand("agent", "Run a node agent: discover GPUs, register, run assigned jobs");
  agent->add_option("--server", o->server, "Server URL")->capture_default_str();
  agent->add_option("--token-file", *token_file, "File holding the agent token")->required();
  agent->add_option("--node", o->node, "This node's name")->capture_default_str();
  agent->add_option("--devices", *devices_file,
                    "YAML file of simulated GPUs (default: discover real GPUs through NVML)");
  agent
      ->add_option("--nvml-library", *nvml_library,
                   "The NVML library to load (a driver outside the loader's path)")
      ->capture_default_str();
  agent->add_option("--cpu", *cpu, "CPU this node offers")->capture_default_str();
  agent->add_option("--memory", *memory, "Memory this node offers")->capture_default_str();
  agent->add_option("--data", o->data_dir, "Agent data directory")->capture_default_str();
  agent->add_option("--heartbeat-ms", o->heartbeat_ms, "Heartbeat period")->capture_default_str();
  agent->add_option("--mps-control", o->mps_control,
                    "MPS control program started (-d) per shared GPU (default: "
                    "nvidia-cuda-mps-control; simulated GPUs: a simulated one; none: no daemon)");
  agent->add_option("--mps-dir", o->mps_dir,
                    "Directory for the MPS daemons' pipes and logs, reachable by jobs "
                    "(default /tmp/carve-mps-<hash>)");
  agent->callback([o, devices_file, nvml_library, token_file, cpu, memory] {
    std::ifstream in(*token_file);
    if (!(in >> o->token)) Die(absl::NotFoundError(*token_file + ": cannot read the token"));
    auto c = ParseCpuMilli(*cpu);
    if (!c.ok()) Die(c.status());
    auto m = ParseMemMib(*memory);
    if (!m.ok()) Die(m.status());
    o->cpu_milli = c->units();
    o->memory_mib = m->units();
    auto devices = devices_file->empty() ? OpenNvmlBackendFromLibrary(*nvml_library)
                                         : OpenSimulatedBackend(*devices_file, o->node);
    if (!devices.ok()) Die(devices.status());
    BlockSignals();
    Agent agent(*o, *std::move(devices), MakePosixLauncher("carve"));
    if (auto st = agent.Start(); !st.ok()) Die(st);
    std::cout << "carve agent " << o->node << " registered with " << o->server << "\n"
              << std::flush;
    WaitForSignal();
    agent.Stop(false);  // jobs keep running; the next agent re-adopts them
  });
}

// Hidden: the group leader of every replica (see runtime/replica_monitor.h).
void AddInternalRun(CLI::App& app) {
  auto status = std::make_shared<std::string>();
  auto argv = std::make_shared<std::vector<std::string>>();
  CLI::App* run = app.add_subcommand("internal-run", "");
  run->group("");  // not listed in --help
  run->add_option("--status", *status, "")->required();
  run->add_option("command", *argv, "")->required();
  run->callback([status, argv] { std::exit(MonitorReplica(*status, *argv)); });
}

// Hidden: the simulated MPS control program (runtime/mps_supervisor.h).
void AddInternalSimMps(CLI::App& app) {
  auto daemon = std::make_shared<bool>(false);
  CLI::App* mps = app.add_subcommand("internal-sim-mps", "");
  mps->group("");
  mps->add_flag("-d", *daemon, "");
  mps->callback([daemon] { std::exit(SimulatedMpsControl(*daemon)); });
}

}  // namespace

void AddPlatformCommands(CLI::App& app) {
  AddInternalRun(app);
  AddInternalSimMps(app);
  AddDev(app);
  AddServer(app);
  AddAgent(app);
}

}  // namespace carve::app
