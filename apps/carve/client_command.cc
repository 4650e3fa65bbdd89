// The CLI over the REST API: submit, ls, show, cancel, logs, nodes, events.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client_common.h"
#include "command_line.h"
#include "httplib.h"
#include "platform_command.h"
#include "runtime/api_client.h"
#include "runtime/job_spec.h"
#include "runtime/records.h"
#include "runtime/states.h"
#include "yaml-cpp/yaml.h"

namespace carve::app {
namespace {

using json = nlohmann::json;

// What `carve nodes` shows: ready, not-ready, cordoned, or maintenance (active or planned).
std::string NodeState(const json& n) {
  const json window = n.value("maintenance", json());
  if (window.is_object() && window.value("phase", "") == "active") return "maintenance";
  if (!n.value("cordoned_by", "").empty()) return "cordoned";
  if (window.is_object()) return n.value("state", "") + "*";  // a window is planned
  return n.value("state", "");
}

// One GPU as `carve nodes` counts it: down (its node not ready, or the GPU cordoned, draining,
// quarantined or unhealthy), in use (some grant holds it), or free.
std::string GpuUse(const json& node, const json& g) {
  if (node.value("state", "") != "ready" || !node.value("cordoned_by", "").empty() ||
      g.value("state", "available") != "available" || g.value("health", "healthy") != "healthy") {
    return "down";
  }
  return g.value("grants", 0) > 0 ? "in use" : "free";
}

// As sinfo shows partitions: per GPU model and mode, how many GPUs are free, in use and down,
// and for shared GPUs the compute left to hand out.
void PrintGpuSummary(const json& nodes) {
  struct Count {
    int total = 0, used = 0, free = 0, down = 0;
    int64_t share_free_milli = 0;
  };
  std::map<std::pair<std::string, std::string>, Count> by;
  for (const json& n : nodes) {
    for (const json& g : n["gpus"]) {
      Count& c = by[{g.value("model", ""), g.value("mode", "")}];
      ++c.total;
      const std::string use = GpuUse(n, g);
      (use == "down" ? c.down : use == "free" ? c.free : c.used)++;
      if (use != "down" && g.value("mode", "") == "shared") {
        c.share_free_milli += std::max<int64_t>(0, 1000 - g.value("allocated_milli", int64_t{0}));
      }
    }
  }
  std::cout << absl::StrFormat("%-12s %-10s %6s %7s %5s %5s  %s\n", "MODEL", "MODE", "TOTAL",
                               "IN USE", "FREE", "DOWN", "SHARES FREE");
  for (const auto& [key, c] : by) {
    std::cout << absl::StrFormat(
        "%-12s %-10s %6d %7d %5d %5d  %s\n", key.first, key.second, c.total, c.used, c.free, c.down,
        key.second == "shared" ? absl::StrFormat("%.2f GPU", c.share_free_milli / 1000.0) : "-");
  }
}

struct SubmitFlags {
  std::string file;
  std::string name, mode, gpu_memory, gpu_compute, profile, cpu, memory, max_runtime, queue, kind,
      idempotency_key, priority_class, topology, isolation;
  std::vector<std::string> gpu_models, env, command;
  int gpus = -1;
  int replicas = 0;
  int64_t priority = 0;
  bool allow_unschedulable = false;
  bool quiet = false;
};

json SpecFromFlags(const SubmitFlags& f, const CLI::App& cmd) {
  json spec = json::object();
  if (!f.file.empty()) {
    auto parsed = YamlToJson(ReadFileOrDie(f.file));  // YAML is a superset of JSON
    if (!parsed.ok())
      Die(absl::InvalidArgumentError(absl::StrCat(f.file, ": ", parsed.status().message())));
    spec = *parsed;
  }
  json& r = spec["resources"];
  if (r.is_null()) r = json::object();
  auto put = [&](const char* flag, json& where, const char* key, const json& value) {
    if (cmd.count(flag) > 0) where[key] = value;
  };
  put("--name", spec, "name", f.name);
  put("--queue", spec, "queue", f.queue);
  put("--kind", spec, "kind", f.kind);
  put("--priority", spec, "priority", f.priority);
  put("--priority-class", spec, "priority_class", f.priority_class);
  put("--topology", spec, "topology", f.topology);
  put("--isolation", spec, "isolation", f.isolation);
  put("--replicas", spec, "replicas", f.replicas);
  put("--max-runtime", spec, "max_runtime", f.max_runtime);
  put("--gpus", r, "gpus", f.gpus);
  put("--mode", r, "mode", f.mode);
  put("--gpu-memory", r, "gpu_memory", f.gpu_memory);
  put("--gpu-compute", r, "gpu_compute", f.gpu_compute);
  put("--profile", r, "profile", f.profile);
  put("--gpu-model", r, "gpu_model", f.gpu_models);
  put("--cpu", r, "cpu", f.cpu);
  put("--memory", r, "memory", f.memory);
  // Flags that imply a mode, so `--gpu-compute 30%` alone asks for a share.
  if (cmd.count("--mode") == 0 && cmd.count("--gpu-compute") > 0) r["mode"] = "shared";
  if (cmd.count("--mode") == 0 && cmd.count("--profile") > 0) r["mode"] = "partition";
  for (const std::string& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      Die(absl::InvalidArgumentError(absl::StrCat("--env \"", kv, "\": write it as KEY=VALUE")));
    }
    spec["env"][kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!f.command.empty()) spec["command"] = f.command;
  if (r.empty()) spec.erase("resources");
  return spec;
}

// A YAML or JSON file that exists: what `-f` takes.
bool LooksLikeJobFile(const std::string& arg) {
  const bool named =
      absl::EndsWith(arg, ".yaml") || absl::EndsWith(arg, ".yml") || absl::EndsWith(arg, ".json");
  std::error_code ec;
  return named && std::filesystem::is_regular_file(arg, ec);
}

void AddSubmit(CLI::App& app, std::shared_ptr<Connection> c) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd =
      app.add_subcommand("submit", "Submit a job: -f job.yaml and/or flags, then -- COMMAND");
  cmd->add_option("-f,--file", f->file, "Job file (YAML or JSON; - for standard input)");
  cmd->add_option("--name", f->name, "Job name");
  // Checked as typed, before CLI11 converts it: `--gpus 0.5` is the first thing a user asking for
  // part of a GPU types, and "Could not convert" did not say how to ask for it.
  cmd->add_option("--gpus", f->gpus, "GPUs (0: CPU-only)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int whole = 0;
            if (absl::SimpleAtoi(text, &whole)) return "";
            return absl::StrCat("\"", text,
                                "\" is not a whole number of GPUs; part of one GPU is "
                                "--mode shared --gpu-compute 50% (with --gpu-memory 8Gi for a "
                                "memory cap), or a MIG instance: --profile 3g.40gb");
          },
          ""));
  cmd->add_option("--mode", f->mode, "exclusive | shared | partition");
  cmd->add_option("--gpu-memory", f->gpu_memory, "Shared: device memory cap, e.g. 10Gi");
  cmd->add_option("--gpu-compute", f->gpu_compute, "Shared: compute share, e.g. 30%");
  cmd->add_option("--profile", f->profile, "Partition: MIG profile, e.g. 3g.40gb");
  cmd->add_option("--gpu-model", f->gpu_models, "Allowed GPU models");
  cmd->add_option("--cpu", f->cpu, "CPU per replica, e.g. 2 or 500m");
  cmd->add_option("--memory", f->memory, "Memory per replica, e.g. 8Gi");
  cmd->add_option("--replicas", f->replicas, "Replicas (all or nothing)");
  cmd->add_option("--max-runtime", f->max_runtime, "Stop after, e.g. 30m or 2h");
  cmd->add_option("--queue", f->queue, "Queue");
  cmd->add_option("--kind", f->kind,
                  "training | inference | batch | evaluation | interactive | data");
  cmd->add_option("--priority", f->priority, "Priority (higher first; default from the class)");
  cmd->add_option("--priority-class", f->priority_class,
                  "critical | standard | exploratory, or an applied priority class");
  cmd->add_option("--topology", f->topology, "compact: replicas on one node, NVLink domain, rack");
  cmd->add_option("--isolation", f->isolation,
                  "Shared GPUs: enforced (default) | best-effort (caps may not be enforced)");
  cmd->add_option("--env", f->env, "KEY=VALUE (repeatable)");
  cmd->add_option("--idempotency-key", f->idempotency_key,
                  "Submitting again with the same key returns the first job");
  cmd->add_flag("-q,--quiet", f->quiet,
                "Print only the job id (for scripts: id=$(carve submit -q ...))");
  cmd->add_flag("--allow-unschedulable", f->allow_unschedulable,
                "Queue it even when no node could run it (a cluster still growing)");
  cmd->add_option("command", f->command, "The command, after --");
  TakesCommand(cmd);
  cmd->callback([c, f, cmd] {
    // `carve submit job.yaml` ran the file as the job's command (exit code 127 on the node).
    if (f->file.empty() && f->command.size() == 1 && LooksLikeJobFile(f->command[0])) {
      Die(absl::InvalidArgumentError(
          absl::StrCat(f->command[0], " is a job file: submit it with -f ", f->command[0],
                       " (to run it as the job's command, put it after --)")));
    }
    f->command = CommandAfterDashes(f->command);
    json spec = SpecFromFlags(*f, *cmd);
    std::map<std::string, std::string> headers;
    if (!f->idempotency_key.empty()) headers["Idempotency-Key"] = f->idempotency_key;
    json job = Check(Client(*c).Post(
        f->allow_unschedulable ? "/api/v1/jobs?allow_unschedulable=true" : "/api/v1/jobs", spec,
        headers));
    if (Structured(*c, job)) return;
    if (f->quiet) {
      std::cout << job.value("id", int64_t{0}) << "\n";
      return;
    }
    std::cout << "job " << job.value("id", int64_t{0}) << " " << job.value("state", "") << " ("
              << job.value("name", "") << "); `carve show " << job.value("id", int64_t{0})
              << "`, `carve logs " << job.value("id", int64_t{0}) << " -f`\n";
  });
}

// A node's versions (the set jobs' records name by id) and the residue its agent sees.
void PrintNodeEvidence(const json& n) {
  const json v = n.value("versions", json());
  if (v.is_object()) {
    std::set<std::string> vbios;
    for (const json& g : v.value("gpus", json::array())) vbios.insert(g.value("vbios", ""));
    vbios.erase("");
    std::cout << "           versions " << v.value("id", "") << ": carve " << v.value("carve", "?")
              << ", driver " << v.value("driver", "?") << " (CUDA " << v.value("cuda_driver", "?")
              << ", NVML " << v.value("nvml", "?") << "), " << v.value("kernel", "?");
    if (!vbios.empty()) std::cout << ", VBIOS " << absl::StrJoin(vbios, "/");
    std::cout << "\n";
  }
  const json residue = n.value("residue", json::object());
  for (const auto& [index, r] : residue.items()) {
    std::vector<std::string> pids;
    for (const json& p : r.value("processes", json::array())) {
      pids.push_back(absl::StrCat(p.value("pid", int64_t{0})));
    }
    std::cout << "           residue gpu " << index << ": "
              << (pids.empty() ? "" : "pid " + absl::StrJoin(pids, ", ") + " ")
              << (r.contains("unexplained_mib")
                      ? absl::StrCat(r.value("unexplained_mib", int64_t{0}), " MiB unexplained")
                      : "")
              << "\n";
  }
}

struct EventFlags {
  int64_t after = 0;
  int64_t job = 0;
  std::string type, since;
  bool follow = false;
};

void AddEvents(CLI::App& app, std::shared_ptr<Connection> c) {
  auto f = std::make_shared<EventFlags>();
  CLI::App* events = app.add_subcommand("events", "The event log (hash-chained), filtered");
  events->add_option("--after", f->after, "Only events after this sequence number");
  events->add_option("--job", f->job, "Only this job's events");
  events->add_option("--type", f->type, "Only events of this type or prefix (job., node.drained)");
  events->add_option("--since", f->since, "Only events since (1h, 7d, 2026-11-30, ...)");
  events->add_flag("-f,--follow", f->follow, "Keep printing new events (Ctrl-C stops)");
  events->callback([c, f] {
    const int64_t since_us = TimeFlag("--since", f->since);
    ApiClient api = Client(*c);
    json all = json::array();
    bool header = c->output == "table";
    std::string query;
    if (f->job > 0) absl::StrAppend(&query, "&job=", f->job);
    if (!f->type.empty()) absl::StrAppend(&query, "&type=", f->type);
    if (since_us > 0) absl::StrAppend(&query, "&since_us=", since_us);
    for (int64_t after = f->after;;) {
      std::map<std::string, std::string> headers;
      auto text =
          api.GetText(absl::StrCat("/api/v1/events?after=", after, "&limit=1000", query), &headers);
      if (!text.ok()) Die(text.status());
      json kept = json::parse(*text, nullptr, false);
      if (!kept.is_array()) Die(absl::InternalError("the server's event page is not a list"));
      // The server reads a page, then keeps what matches: go on from what it read.
      int64_t scanned = 0, scanned_to = after;
      for (const auto& [name, value] : headers) {
        if (absl::EqualsIgnoreCase(name, "X-Carve-Scanned"))
          (void)absl::SimpleAtoi(value, &scanned);
        if (absl::EqualsIgnoreCase(name, "X-Carve-Scanned-To")) {
          (void)absl::SimpleAtoi(value, &scanned_to);
        }
      }
      after = std::max(after, scanned_to);
      if (c->output != "table") {
        for (json& e : kept) all.push_back(std::move(e));
      } else {
        Structured(*c, kept);  // terminal-safe
        if (header) {
          std::cout << absl::StrFormat("%-6s %-19s %-24s %-16s %-14s %s\n", "SEQ", "TIME", "TYPE",
                                       "ACTOR", "SUBJECT", "REASON");
          header = false;
        }
        for (const json& e : kept) {
          std::cout << absl::StrFormat(
              "%-6d %-19s %-24s %-16s %-14s %s\n", e.value("seq", int64_t{0}),
              LocalTime(e.value("time_us", int64_t{0})), e.value("type", ""), e.value("actor", ""),
              e.value("subject", ""), e.value("reason", ""));
        }
        std::cout << std::flush;
      }
      if (scanned >= 1000) continue;
      if (!f->follow || c->output != "table") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (c->output != "table") Structured(*c, all);
  });
}

void AddQueries(CLI::App& app, std::shared_ptr<Connection> c) {
  auto id = std::make_shared<std::string>();
  CLI::App* show = app.add_subcommand("show", "Show one job (JOB) or event (event/SEQ)");
  show->add_option("job", *id, "Job id, or event/SEQ")->required();
  show->callback([c, id] {
    std::string path = id->rfind("event/", 0) == 0
                           ? absl::StrCat("/api/v1/events/", JobId(id->substr(6)))
                           : absl::StrCat("/api/v1/jobs/", JobId(*id));
    json job = Check(Client(*c).Get(path));
    const bool event = id->rfind("event/", 0) == 0;
    if (c->output == "table" && event) c->output = "yaml";
    if (!Structured(*c, job)) PrintJobPage(job);
  });
  CLI::App* renew = app.add_subcommand("renew", "Renew an interactive job's lease");
  renew->add_option("job", *id, "Job id")->required();
  renew->callback([c, id] {
    json job =
        Check(Client(*c).Post(absl::StrCat("/api/v1/jobs/", JobId(*id), "/renew"), json::object()));
    if (!Structured(*c, job)) std::cout << "job " << *id << ": lease renewed\n";
  });
  CLI::App* nodes = app.add_subcommand("nodes", "List nodes and their GPUs");
  auto pool = std::make_shared<std::string>();
  nodes->add_option("--pool", *pool, "Only the nodes of this pool (their label pool=NAME)");
  nodes->callback([c, pool] {
    json list = Check(Client(*c).Get(
        pool->empty() ? "/api/v1/nodes"
                      : "/api/v1/nodes?pool=" + httplib::detail::encode_query_param(*pool)));
    if (Structured(*c, list)) return;
    PrintGpuSummary(list);
    std::cout << absl::StrFormat("\n%-10s %-10s %-10s %-34s %-9s %-8s %-9s %s\n", "NODE", "STATE",
                                 "POOL", "GPUS", "GPU FREE", "CPU", "MEMORY", "REPLICAS");
    for (const json& n : list) {
      std::map<std::string, int> kinds;
      int free = 0;
      for (const json& g : n["gpus"]) {
        ++kinds[absl::StrCat(g.value("model", ""), " ", g.value("mode", ""))];
        free += GpuUse(n, g) == "free";
      }
      std::vector<std::string> parts;
      for (const auto& [k, count] : kinds) parts.push_back(absl::StrCat(count, "x ", k));
      std::cout << absl::StrFormat("%-10s %-10s %-10s %-34s %-9s %-8s %-9s %d\n",
                                   n.value("name", ""), NodeState(n), n.value("pool", "default"),
                                   parts.empty() ? "-" : absl::StrJoin(parts, ", "),
                                   absl::StrCat(free, "/", n["gpus"].size()),
                                   absl::StrCat(n.value("cpu_milli", int64_t{0}) / 1000),
                                   absl::StrCat(n.value("memory_mib", int64_t{0}) / 1024, "Gi"),
                                   n.value("replicas", int64_t{0}));
      for (const json& g : n["gpus"]) {
        if (g.value("health", "healthy") != "healthy") {
          std::cout << "           " << g.value("health", "") << " gpu " << g.value("index", 0)
                    << ": " << g.value("health_reason", "") << "\n";
        }
      }
      for (const json& g : n["gpus"]) {
        std::string state = g.value("state", "available");
        if (state != "available" && state != "quarantined") {
          std::cout << "           " << state << " gpu " << g.value("index", 0) << "\n";
        }
      }
      const json window = n.value("maintenance", json());
      if (window.is_object()) {
        std::cout << "           maintenance " << window.value("phase", "") << ": "
                  << window.value("reason", "") << " (by " << window.value("by", "") << ")\n";
      }
      const json quarantined = n.value("quarantined", json::object());
      for (const auto& [index, why] : quarantined.items()) {
        std::cout << "           quarantined gpu " << index << ": " << why.get<std::string>()
                  << "\n";
      }
      PrintNodeEvidence(n);
    }
  });
  for (const char* action : {"cordon", "uncordon", "drain"}) {
    auto node = std::make_shared<std::string>();
    auto gpu = std::make_shared<int>(-1);
    CLI::App* cmd = app.add_subcommand(
        action, std::string(action) == "drain"
                    ? "Stop new work on a node and move its jobs by their recovery policy"
                : std::string(action) == "cordon" ? "Stop new work on a node"
                                                  : "Put a node back in service");
    cmd->add_option("node", *node, "Node name")->required();
    cmd->add_option("--gpu", *gpu, "Only this GPU of the node");
    cmd->callback([c, node, action, gpu] {
      std::string query = *gpu >= 0 ? absl::StrCat("?gpu=", *gpu) : "";
      json n = Check(Client(*c).Post(absl::StrCat("/api/v1/nodes/", *node, "/", action, query),
                                     json::object()));
      if (Structured(*c, n)) return;
      std::cout << "node " << *node << " " << action << "ed";
      std::vector<std::string> moved;
      for (const json& id : n.value("jobs_moved", json::array())) moved.push_back(id.dump());
      if (!moved.empty()) {
        std::cout << "; " << (moved.size() == 1 ? "job " : "jobs ") << absl::StrJoin(moved, ", ")
                  << " moved by their recovery policy";
      }
      std::cout << "\n";
    });
  }
  AddEvents(app, c);
}

void AddConfig(CLI::App& app, std::shared_ptr<Connection> c) {
  auto file = std::make_shared<std::string>();
  CLI::App* apply = app.add_subcommand(
      "apply", "Apply tenants, projects, queues and node GPU modes from a YAML file");
  apply
      ->add_option("-f,--file", *file,
                   "YAML file (several documents separated by ---; - for standard input)")
      ->required();
  apply->callback([c, file] {
    auto docs = YamlDocumentsToJson(ReadFileOrDie(*file));
    if (!docs.ok())
      Die(absl::InvalidArgumentError(absl::StrCat(*file, ": ", docs.status().message())));
    json r = Check(Client(*c).Post("/api/v1/apply", *docs));
    if (Structured(*c, r)) return;
    for (const json& name : r["applied"]) std::cout << name.get<std::string>() << " applied\n";
  });
  auto kind = std::make_shared<std::string>();
  CLI::App* get =
      app.add_subcommand("get",
                         "List tenants, projects, queues, pools, notifications, prices or "
                         "reservations");
  get->add_option("kind", *kind,
                  "tenants | projects | queues | pools | notifications | prices | reservations")
      ->required()
      ->check(CLI::IsMember(
          {"tenants", "projects", "queues", "pools", "notifications", "prices", "reservations"}));
  get->callback([c, kind] {
    json list = Check(Client(*c).Get("/api/v1/" + *kind));
    if (Structured(*c, list)) return;
    for (const json& o : list) {
      std::cout << absl::StrFormat(
          "%-20s %s\n", o.value("name", ""),
          o.contains("url")      ? "tenant " + o.value("tenant", "") + " url " + o.value("url", "")
          : o.contains("tenant") ? "tenant " + o.value("tenant", "")
          : o.contains("quota")  ? "quota " + o["quota"].dump()
          : o.contains("selector") ? "selector " + o["selector"].dump()
          : o.contains("effective_from")
              ? "from " + o.value("effective_from", "") + " " + o.value("currency", "USD")
              : o.value("description", ""));
    }
  });
}

}  // namespace

void AddClientCommands(CLI::App& app) {
  auto c = std::make_shared<Connection>();
  app.add_option("--server", c->server,
                 "Carve server URL, or several separated by commas (servers on one PostgreSQL "
                 "store: calls go to the one that leads); or CARVE_SERVER");
  app.add_option("--token", c->token, "API token (or CARVE_TOKEN)");
  app.add_option("--ca", c->ca, "PEM CA that signed an https server's certificate (or CARVE_CA)");
  app.add_option("-o,--output", c->output, "table | json | yaml");
  AddSubmit(app, c);
  AddQueries(app, c);
  AddJobsCommands(app, c);
  AddConfig(app, c);
  AddOperationsCommands(app, c);
  AddQueueCommands(app, c);
  AddAdminCommands(app, c);
  AddPocCommands(app, c);
  AddSimLiveCommands(app, c);
}

}  // namespace carve::app
