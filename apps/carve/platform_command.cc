#include "platform_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "adapters/nvml/nvml_backend.h"
#include "adapters/store/postgres_store.h"
#include "client_common.h"
#include "command_line.h"
#include "core/base/quantity.h"
#include "leader.h"
#include "ports/devices.h"
#include "ports/process.h"
#include "runtime/agent.h"
#include "runtime/api_server.h"
#include "runtime/api_socket.h"
#include "runtime/job_spec.h"
#include "runtime/labels.h"
#include "runtime/log.h"
#include "runtime/replica_monitor.h"
#include "runtime/tenant_paths.h"
#include "runtime/ui_assets.h"
#include "runtime/version.h"
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
  LogInfo(sig == SIGINT ? "SIGINT" : "SIGTERM", ": stopping");
}

// --log-level: the operator's log on stderr (runtime/log.h).
void AddLogLevelFlag(CLI::App* cmd, std::string& level) {
  cmd->add_option("--log-level", level,
                  "What the log on stderr shows: trace, debug, info, warn, "
                  "error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

void UseLogLevel(const std::string& name) {
  auto level = ParseLogLevel(name);
  if (!level.ok()) Die(level.status());
  SetLogLevel(*level);
}

struct ServerSettings {
  std::string store;  // empty: SQLite in --data; postgres://...: PostgreSQL
  // Several servers on one PostgreSQL store (leader.h): this one's name, the URL clients that ask
  // a follower are sent to, and how long the leader's lease lasts unrenewed.
  std::string name;       // empty: HOSTNAME:PORT (of --listen)
  std::string advertise;  // empty: the URL of --listen
  int64_t lease_ms = 3000;
  std::string data = "./carve-data";
  std::string checkpoint_root;  // empty: DATA/../carve-jobs/checkpoints
  std::string listen = "127.0.0.1:7070";
  std::string policy = "carve";
  std::string config;
  std::string tls_cert;  // server only; `carve dev` serves plain HTTP
  std::string tls_key;
  std::string log_level = "info";
  bool insecure = false;  // plain HTTP on a non-loopback address
  bool check_scheduler_state = false;
  int64_t schedule_interval_ms = 200;
  int64_t node_timeout_ms = 10000;
  int64_t lost_after_ms = 10000;
  int64_t reclaim_timeout_ms = 300000;
  std::string max_log_bytes = "64Mi";  // per replica; `carve dev`'s agents take it too
};

// A --max-log-bytes size ("64Mi", "65536"): at least one byte.
int64_t LogLimit(const std::string& text) {
  auto bytes = ParseBytes(text);
  if (!bytes.ok())
    Die(absl::InvalidArgumentError(absl::StrCat("--max-log-bytes: ", bytes.status().message())));
  if (*bytes < 1) Die(absl::InvalidArgumentError("--max-log-bytes: must be at least 1 byte"));
  return *bytes;
}

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
      } else if (key == "store") {
        set("--store", s.store);
      } else if (key == "name") {
        set("--name", s.name);
      } else if (key == "advertise") {
        set("--advertise", s.advertise);
      } else if (key == "lease_ms") {
        set("--lease-ms", s.lease_ms);
      } else if (key == "checkpoint_root") {
        set("--checkpoint-root", s.checkpoint_root);
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
      } else if (key == "tls_cert") {
        set("--tls-cert", s.tls_cert);
      } else if (key == "tls_key") {
        set("--tls-key", s.tls_key);
      } else if (key == "insecure") {
        set("--insecure", s.insecure);
      } else if (key == "reclaim_timeout_ms") {
        set("--reclaim-timeout-ms", s.reclaim_timeout_ms);
      } else if (key == "log_level") {
        set("--log-level", s.log_level);
      } else if (key == "max_log_bytes") {
        set("--max-log-bytes", s.max_log_bytes);
      } else {
        Die(absl::InvalidArgumentError(
            absl::StrCat(s.config, ": unknown key \"", key,
                         "\"; known: data, store, name, advertise, lease_ms, checkpoint_root, "
                         "listen, policy, schedule_interval_ms, "
                         "node_timeout_ms, lost_after_ms, reclaim_timeout_ms, max_log_bytes, "
                         "tls_cert, tls_key, insecure, log_level")));
      }
    }
  } catch (const YAML::Exception& e) {
    Die(absl::InvalidArgumentError(absl::StrCat(s.config, ": ", e.what())));
  }
}

void AddServerFlags(CLI::App* cmd, ServerSettings& s) {
  cmd->add_option("--data", s.data, "Data directory (SQLite store, logs, tokens)")
      ->capture_default_str();
  cmd->add_option("--store", s.store,
                  "postgres://USER@HOST:PORT/DB: keep the state in PostgreSQL instead of SQLite in "
                  "--data (which still holds logs and tokens); or CARVE_STORE")
      ->envname("CARVE_STORE");
  cmd->add_option(
      "--name", s.name,
      "With --store postgresql://: this server's name among those on the database "
      "(default: this machine's host name and the port of --listen; unique per server)");
  cmd->add_option("--advertise", s.advertise,
                  "With --store postgresql://: the URL a follower sends clients to while this "
                  "server leads (default: from --listen)");
  cmd->add_option("--lease-ms", s.lease_ms,
                  "With --store postgresql://: how long the leader's lease lasts unrenewed; a "
                  "follower takes over once it has run out")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{300}, int64_t{600000}));
  cmd->add_option("--checkpoint-root", s.checkpoint_root,
                  "Where jobs' checkpoint directories live, reachable by every node and outside "
                  "the data directory (default: DATA/../carve-jobs/checkpoints)");
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
  cmd->add_flag("--insecure", s.insecure,
                "Serve plain HTTP on a non-loopback address (tokens cross the network in clear)");
  cmd->add_option("--reclaim-timeout-ms", s.reclaim_timeout_ms,
                  "A reclaim not reported this long after its job ended quarantines its devices")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--check-scheduler-state", s.check_scheduler_state,
                "Check in every cycle that the cluster the scheduler keeps between cycles matches "
                "the job records (a difference is logged as an error); slower, for tests");
  AddLogLevelFlag(cmd, s.log_level);
  cmd->add_option("--max-log-bytes", s.max_log_bytes,
                  "Output stored per replica (64Mi, 65536, ...); later output is dropped and the "
                  "replica's record says log_truncated_at")
      ->capture_default_str();
}

void AddTlsFlags(CLI::App* cmd, ServerSettings& s) {
  cmd->add_option("--tls-cert", s.tls_cert, "PEM certificate (chain) to serve HTTPS with");
  cmd->add_option("--tls-key", s.tls_key, "PEM private key of --tls-cert");
}

// TLS files load, and plain HTTP is served on loopback only unless --insecure.
void CheckTransport(const ServerSettings& s, const Listen& l) {
  if (!s.tls_cert.empty() || !s.tls_key.empty()) {
    if (auto st = CheckTlsFiles(s.tls_cert, s.tls_key); !st.ok()) Die(st);
    return;
  }
  if (s.insecure || IsLoopbackHost(l.host)) return;
  Die(absl::InvalidArgumentError(absl::StrCat(
      "refusing to serve plain HTTP on ", l.host, ":", l.port,
      " (not a loopback address): bearer tokens would cross the network in clear; give "
      "--tls-cert and --tls-key, listen on 127.0.0.1, or pass --insecure")));
}

// Holds DATA/server.lock for the life of the process: a second server on the same data directory
// stops here, before it touches the store or any file of the running one.
int LockData(const std::string& data) {
  std::string path = data + "/server.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) Die(absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno))));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Die(absl::FailedPreconditionError(
        absl::StrCat(data, " is in use by another carve server; stop it or give another --data")));
  }
  return fd;
}

// Writes DATA/server whole (a reader never sees half a URL).
void WriteServerFile(const std::string& data, const std::string& url) {
  std::string tmp = data + "/server.tmp";
  std::ofstream(tmp) << url << "\n";
  std::error_code ec;
  std::filesystem::rename(tmp, data + "/server", ec);
  if (ec) Die(absl::InternalError(absl::StrCat(data, "/server: ", ec.message())));
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
  int data_lock = -1;
  std::unique_ptr<Leadership> leadership;  // several servers on PostgreSQL: this one leads
};

// Each tenant's jobs run as its own Unix user and start in a directory under `dir`: every
// directory above it must let others through (a checkout under /root, mode 0700, made every job
// fail with "cannot change to workdir ...: Permission denied").
absl::Status OthersCanEnter(const std::filesystem::path& dir) {
  // The path as written and as resolved: a link may lead through a closed directory.
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(dir, ec);
  if (!ec && resolved != std::filesystem::absolute(dir).lexically_normal()) {
    if (absl::Status s = OthersCanEnter(resolved); !s.ok()) return s;
  }
  for (std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal(); !p.empty();
       p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "jobs run as their tenant's own Unix user and could not enter %s (mode %04o), which "
          "holds their directories (%s): run carve dev from a directory others may enter, pass "
          "--data DIR elsewhere (e.g. /var/tmp/carve/data), or chmod o+x %s",
          p.string(), st.st_mode & 07777, dir.string(), p.string()));
    }
    if (p == p.root_path()) break;
  }
  return absl::OkStatus();
}

// The parent of DATA: where `carve-jobs` goes by default.
std::filesystem::path BesideData(const std::string& data) {
  return std::filesystem::absolute(data).lexically_normal().parent_path();
}

// Everything the server keeps (store and its WAL, tokens, logs) is owner-only: files the server
// creates from now on (umask 077), and what an older version left readable.
void MakeDataPrivate(const std::string& data) {
  ::umask(077);
  std::error_code ec;
  std::filesystem::create_directories(data, ec);
  if (ec) Die(absl::InternalError(absl::StrCat(data, ": ", ec.message())));
  if (::chmod(data.c_str(), 0700) != 0) {
    Die(absl::InternalError(absl::StrCat(data, ": cannot make it owner-only (0700)")));
  }
  for (auto it = std::filesystem::recursive_directory_iterator(data, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink(ec)) continue;  // never chmod through a link
    ::chmod(it->path().c_str(), it->is_directory(ec) ? 0700 : 0600);
  }
}

// The port and the data directory are taken before anything is written: a server that cannot
// start changes no file of the one that runs.
std::unique_ptr<Controller> StartController(const ServerSettings& s) {
  UseLogLevel(s.log_level);  // a log_level from --config is checked here
  const int64_t max_log_bytes = LogLimit(s.max_log_bytes);
  Listen l = ParseListen(s.listen);
  CheckTransport(s, l);
  auto listen_fd = ListenExclusive(l.host, l.port);
  if (!listen_fd.ok()) Die(listen_fd.status());
  auto c = std::make_unique<Controller>();
  // DATA's missing parents are everyone's (0755, not the umask's 0700): the jobs directory beside
  // DATA must stay reachable by every tenant's user. DATA itself is owner-only.
  if (absl::Status st = CreatePrivateDir(s.data); !st.ok()) Die(st);
  ::umask(077);
  c->data_lock = LockData(s.data);
  MakeDataPrivate(s.data);
  std::string checkpoint_root = s.checkpoint_root.empty()
                                    ? (BesideData(s.data) / "carve-jobs/checkpoints").string()
                                    : s.checkpoint_root;
  checkpoint_root = std::filesystem::absolute(checkpoint_root).lexically_normal().string();
  std::string data = std::filesystem::absolute(s.data).lexically_normal().string();
  if (checkpoint_root == data || absl::StartsWith(checkpoint_root, data + "/")) {
    Die(absl::InvalidArgumentError(absl::StrCat("--checkpoint-root ", checkpoint_root,
                                                " is inside the private data directory ", data)));
  }
  LogInfo("carve server ", CarveVersion(), " starting: data ", data, ", policy ", s.policy);
  if (!s.store.empty() && !IsPostgresUrl(s.store)) {
    Die(absl::InvalidArgumentError(absl::StrCat("--store ", s.store,
                                                ": not a postgres:// or postgresql:// URL (without "
                                                "--store the state is SQLite in --data)")));
  }
  int fd = *listen_fd;
  if (!s.store.empty()) {
    const std::string scheme = s.tls_cert.empty() ? "http://" : "https://";
    // The machine's name, not the listen address: two machines listening on 0.0.0.0:7070 under
    // one name would take the lease from each other (a holder takes its own back at once).
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    LeaderSettings lead{
        s.store, s.name.empty() ? absl::StrCat(host, ":", LocalPort(fd)) : s.name,
        // A wildcard listen address reaches no one: the host name stands in for it.
        s.advertise.empty()
            ? absl::StrCat(scheme,
                           l.host == "0.0.0.0" || l.host == "::" || l.host.empty() ? host : l.host,
                           ":", LocalPort(fd))
            : s.advertise,
        s.lease_ms, s.tls_cert, s.tls_key};
    const int port = LocalPort(fd);
    // A follower is a running server too: its URL is where it answers (503, naming the leader).
    c->leadership = FollowUntilLeader(
        lead, fd, [&] { WriteServerFile(s.data, absl::StrCat(scheme, l.host, ":", port)); });
    if (c->leadership == nullptr) {
      LogInfo("carve server stopped before it led");
      std::exit(0);
    }
    if (fd < 0) {  // the follower's API closed its socket: the leader's takes the same port
      auto again = ListenExclusive(l.host, port);
      if (!again.ok()) Die(again.status());
      fd = *again;
    }
  }
  auto store = s.store.empty() ? OpenSqliteStore(s.data + "/carve.db")
                               : OpenFencedPostgresStore(s.store, c->leadership->holder(),
                                                         c->leadership->term(), s.lease_ms / 2);
  if (!store.ok()) Die(store.status());
  c->store = *std::move(store);
  LogInfo("store opened: ", s.store.empty() ? data + "/carve.db" : "PostgreSQL");
  ControlPlane::Options options;
  options.policy = s.policy;
  options.log_dir = s.data + "/logs";
  options.checkpoint_root = checkpoint_root;
  options.node_timeout_us = s.node_timeout_ms * 1000;
  options.lost_after_us = s.lost_after_ms * 1000;
  options.reclaim_timeout_us = s.reclaim_timeout_ms * 1000;
  options.max_log_bytes = max_log_bytes;
  options.check_kept_cluster = s.check_scheduler_state;
  auto control = ControlPlane::Open(c->store.get(), &c->catalog, options, NowUs);
  if (!control.ok()) Die(control.status());
  c->control = *std::move(control);
  c->admin_token = TokenFile(s.data, "admin");
  c->agent_token = TokenFile(s.data, "agent");
  if (auto st = c->control->AddToken(c->admin_token, "admin", Role::kAdmin); !st.ok()) Die(st);
  if (auto st = c->control->AddToken(c->agent_token, "agents", Role::kAgent); !st.ok()) Die(st);
  ApiServer::Options api{l.host, l.port, s.schedule_interval_ms};
  api.tls_cert = s.tls_cert;
  api.tls_key = s.tls_key;
  api.listen_fd = fd;
  if (c->leadership) {
    api.role = "leader";
    api.term = c->leadership->term();
  }
  c->api = std::make_unique<ApiServer>(c->control.get(), api);
  if (auto st = c->api->Start(); !st.ok()) Die(st);
  c->url = absl::StrCat(s.tls_cert.empty() ? "http://" : "https://", l.host, ":", c->api->port());
  WriteServerFile(s.data, c->url);
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
    BlockStopSignals();
    // As root, each tenant's jobs run as its own user; otherwise all run as this user.
    const bool single_user = ::geteuid() != 0;
    const std::filesystem::path jobs = BesideData(s->data) / "carve-jobs";
    if (!single_user) {
      if (absl::Status st = OthersCanEnter(jobs); !st.ok()) Die(st);
    }
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
      o.jobs_dir = (jobs / n.name).string();
      o.single_user = single_user;
      o.cpu_milli = n.cpu_milli;
      o.memory_mib = n.memory_gib * 1024;
      o.heartbeat_ms = 300;
      // The agents live in the server's process (no server restart without them): each stops
      // its replicas once cut off as long as a node takes to be not-ready.
      o.fence_after_ms = s->node_timeout_ms;
      o.max_log_bytes = LogLimit(s->max_log_bytes);
      auto agent = std::make_unique<Agent>(o, *std::move(devices), MakePosixLauncher("carve"));
      if (auto st = agent->Start(); !st.ok()) Die(st);
      agents.push_back(std::move(agent));
    }
    std::string data = std::filesystem::absolute(s->data).lexically_normal().string();
    std::cout << "Carve is running at " << c->url << " (data in " << data << ")\n"
              << "  nodes: h200-0 (8x H200 exclusive), a100-0 (4x A100-80GB MIG, dynamic),\n"
              << "         l40s-0 (4x L40S shared), t4-0 (2x T4 exclusive); simulated GPUs,\n"
              << "         real processes\n"
              << (UiAssets().empty()
                      ? absl::StrCat("  dashboard: not in this build (-DCARVE_BUILD_UI=OFF); the "
                                     "API is ",
                                     c->url, "/api/v1/openapi.json\n")
                      : absl::StrCat("  dashboard: ", c->url,
                                     "/ui/ (sign in with the admin token below)\n"))
              << "  admin token: " << data << "/admin.token (mode 0600)\n"
              << "  jobs: " << jobs.string() << " (work and checkpoint directories)\n"
              << (single_user ? absl::StrCat("  single-user: not root, so every job runs as uid ",
                                             ::geteuid(), ", not isolated from each other\n")
                              : "  each tenant's jobs run as its own Unix user\n")
              << "\n"
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
    LogInfo("carve dev stopped");
  });
}

void AddServer(CLI::App& app) {
  auto s = std::make_shared<ServerSettings>();
  CLI::App* server = app.add_subcommand("server", "Run the controller: REST API and scheduler");
  AddServerFlags(server, *s);
  AddTlsFlags(server, *s);
  server->callback([s, server] {
    ApplyConfig(*s, *server);
    BlockStopSignals();
    auto c = StartController(*s);
    std::cout << "carve server listening on " << c->url << "; admin token in " << s->data
              << "/admin.token, join token for agents in " << s->data << "/agent.token\n"
              << std::flush;
    WaitForSignal();
    c->api->Stop();
    if (c->leadership) c->leadership->Release();
    LogInfo("carve server stopped");
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
  agent
      ->add_option("--server", o->server,
                   "Server URL, or several separated by commas (servers on one PostgreSQL store: "
                   "the agent follows the one that leads)")
      ->capture_default_str();
  agent
      ->add_option("--token-file", *token_file,
                   "File holding the join token (the server's agent.token); the agent then keeps "
                   "its own node credential in DATA/node.token")
      ->required();
  agent->add_option("--ca", o->ca_file,
                    "PEM CA that signed an https server's certificate (or CARVE_CA)");
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
  agent
      ->add_option("--fence-after-ms", o->fence_after_ms,
                   "Stop every replica on this node after this long without an answer from the "
                   "server, so that a cut-off node never runs a job beside its next attempt; the "
                   "server then declares them lost only after this and the stop grace (0: never; "
                   "a server down this long also stops them)")
      ->check(CLI::Range(int64_t{0}, kMaxFenceAfterMs))
      ->capture_default_str();
  agent->add_option_function<std::vector<std::string>>(
      "--label",
      [o](const std::vector<std::string>& labels) {
        for (const std::string& label : labels) {
          auto kv = ParseLabel(label);
          if (!kv.ok())
            Die(absl::InvalidArgumentError(absl::StrCat("--label: ", kv.status().message())));
          o->labels[kv->first] = kv->second;
        }
      },
      "KEY=VALUE node label, repeatable (pool=NAME puts the node in a queue's pool)");
  agent->add_option_function<std::vector<std::string>>(
      "--resource",
      [o](const std::vector<std::string>& resources) {
        for (const std::string& text : resources) {
          auto kv = ParseExtraResource(text);
          if (!kv.ok()) Die(kv.status());
          o->extra[kv->first] = kv->second;
        }
        if (absl::Status s = CheckExtraResources(o->extra, "--resource"); !s.ok()) Die(s);
      },
      "NAME=AMOUNT extra resource this node offers in whole units, repeatable (rdma_gbps=400); "
      "jobs ask for it in resources.extra");
  agent
      ->add_option("--job-pids-max", o->job_pids_max,
                   "Processes and threads one job replica may have (pids.max; 0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  auto log_level = std::make_shared<std::string>("info");
  AddLogLevelFlag(agent, *log_level);
  agent->add_option("--mps-control", o->mps_control,
                    "MPS control program started (-d) per shared GPU (default: "
                    "nvidia-cuda-mps-control; simulated GPUs: a simulated one; none: no daemon)");
  agent->add_option("--mps-dir", o->mps_dir,
                    "Directory for the MPS daemons' pipes and logs, reachable by jobs "
                    "(default /tmp/carve-mps-<hash>)");
  agent->add_option("--jobs-dir", o->jobs_dir,
                    "Directory for jobs' work and checkpoint directories, outside --data "
                    "(default: DATA/../carve-jobs)");
  agent
      ->add_option("--break", o->broken,
                   "Break the agent on purpose, for the acceptance kit's tests: reclaim-checks "
                   "(every reclaim reported verified, unchecked), versions (none reported)")
      ->check(CLI::IsMember({"reclaim-checks", "versions"}))
      ->group("");  // hidden: never for a deployment
  agent->add_flag("--single-user", o->single_user,
                  "Run every job as this agent's user (needed when not root): jobs are then "
                  "not isolated from each other");
  auto uid_range = std::make_shared<std::string>("200000-265535");
  agent
      ->add_option("--uid-range", *uid_range,
                   "uids for tenants without one on their tenant document, as FIRST-LAST")
      ->capture_default_str();
  auto max_log = std::make_shared<std::string>("64Mi");
  agent
      ->add_option("--max-log-bytes", *max_log,
                   "Output shipped per replica (64Mi, 65536, ...); the node's copy is freed as it "
                   "is shipped or passes the limit (hole punching, each heartbeat)")
      ->capture_default_str();
  agent->callback(
      [o, devices_file, nvml_library, token_file, cpu, memory, uid_range, log_level, max_log] {
        UseLogLevel(*log_level);
        o->max_log_bytes = LogLimit(*max_log);
        std::vector<std::string> range = absl::StrSplit(*uid_range, '-');
        if (range.size() != 2 || !absl::SimpleAtoi(range[0], &o->uid_min) ||
            !absl::SimpleAtoi(range[1], &o->uid_max) || o->uid_min < 1 || o->uid_max < o->uid_min ||
            o->uid_max > 4294967294) {
          Die(absl::InvalidArgumentError(absl::StrCat(
              "--uid-range \"", *uid_range, "\": write FIRST-LAST, e.g. 200000-265535 (never 0)")));
        }
        if (o->fence_after_ms > 0 && o->fence_after_ms < 4 * o->heartbeat_ms) {
          Die(absl::InvalidArgumentError(absl::StrCat(
              "--fence-after-ms ", o->fence_after_ms, ": at least 4 heartbeats (--heartbeat-ms ",
              o->heartbeat_ms, "), or one slow answer would stop every job on the node")));
        }
        ::umask(077);
        std::ifstream in(*token_file);
        if (!(in >> o->token)) Die(absl::NotFoundError(*token_file + ": cannot read the token"));
        if (o->ca_file.empty() && std::getenv("CARVE_CA")) o->ca_file = std::getenv("CARVE_CA");
        auto c = ParseCpuMilli(*cpu);
        if (!c.ok()) Die(c.status());
        auto m = ParseMemMib(*memory);
        if (!m.ok()) Die(m.status());
        o->cpu_milli = c->units();
        o->memory_mib = m->units();
        auto devices = devices_file->empty() ? OpenNvmlBackendFromLibrary(*nvml_library)
                                             : OpenSimulatedBackend(*devices_file, o->node);
        if (!devices.ok()) Die(devices.status());
        BlockStopSignals();
        Agent agent(*o, *std::move(devices), MakePosixLauncher("carve"));
        if (auto st = agent.Start(); !st.ok()) Die(st);
        std::cout << "carve agent " << o->node << " registered with " << o->server << "\n"
                  << std::flush;
        LogInfo("carve agent ", CarveVersion(), ": node ", o->node, " registered with ", o->server);
        WaitForSignal();
        agent.Stop(false);  // jobs keep running; the next agent re-adopts them
        LogInfo("carve agent ", o->node, " stopped; its jobs keep running");
      });
}

// Hidden: the group leader of every replica (see runtime/replica_monitor.h).
void AddInternalRun(CLI::App& app) {
  auto status = std::make_shared<std::string>();
  auto status_fd = std::make_shared<int>(-1);
  auto argv = std::make_shared<std::vector<std::string>>();
  CLI::App* run = app.add_subcommand("internal-run", "");
  run->group("");  // not listed in --help
  run->add_option("--status", *status, "");
  run->add_option("--status-fd", *status_fd, "");
  run->add_option("command", *argv, "");
  TakesCommand(run);
  run->callback([status, status_fd, argv] {
    std::exit(MonitorReplica(*status, CommandAfterDashes(*argv), *status_fd));
  });
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
  AddProbeCommand(app);
  AddDev(app);
  AddServer(app);
  AddAgent(app);
}

}  // namespace carve::app
