// The CLI over the REST API: submit, ls, show, cancel, logs, nodes, events.
#include <chrono>
#include <cstdlib>
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
#include "client_common.h"
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

std::string GpuSummary(const json& spec) {
  const json& r = spec.value("resources", json::object());
  int gpus = r.value("gpus", 0);
  std::string mode = r.value("mode", "exclusive");
  if (mode == "shared") return absl::StrCat(r.value("gpu_compute", "?"), " shared");
  if (mode == "partition") return absl::StrCat(std::max(gpus, 1), "x ", r.value("profile", "?"));
  return gpus == 0 ? "cpu" : absl::StrCat(gpus, "x whole");
}

void PrintJobs(const json& jobs, bool header) {
  if (header) {
    std::cout << absl::StrFormat("%-5s %-20s %-10s %-11s %-14s %-8s %-6s %s\n", "ID", "NAME",
                                 "STATE", "KIND", "GPUS", "NODE", "AGE", "REASON");
  }
  for (const json& j : jobs) {
    std::string node = j["replicas"].empty() ? "-" : j["replicas"][0].value("node", "-");
    std::cout << absl::StrFormat(
        "%-5d %-20s %-10s %-11s %-14s %-8s %-6s %s\n", j.value("id", int64_t{0}),
        j.value("name", "").substr(0, 20), j.value("state", ""), j["spec"].value("kind", ""),
        GpuSummary(j["spec"]), node, Age(j.value("created_us", int64_t{0})), j.value("reason", ""));
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

void AddSubmit(CLI::App& app, std::shared_ptr<Connection> c) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* cmd =
      app.add_subcommand("submit", "Submit a job: -f job.yaml and/or flags, then -- COMMAND");
  cmd->add_option("-f,--file", f->file, "Job file (YAML or JSON)");
  cmd->add_option("--name", f->name, "Job name");
  cmd->add_option("--gpus", f->gpus, "GPUs (0: CPU-only)");
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
  cmd->add_option("command", f->command, "The command, after --");
  cmd->callback([c, f, cmd] {
    json spec = SpecFromFlags(*f, *cmd);
    std::map<std::string, std::string> headers;
    if (!f->idempotency_key.empty()) headers["Idempotency-Key"] = f->idempotency_key;
    json job = Check(Client(*c).Post("/api/v1/jobs", spec, headers));
    if (Structured(*c, job)) return;
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

void AddQueries(CLI::App& app, std::shared_ptr<Connection> c) {
  auto all = std::make_shared<bool>(false);
  CLI::App* ls = app.add_subcommand("ls", "List active jobs (--all: every job)");
  ls->add_flag("--all", *all, "Include ended jobs");
  ls->callback([c, all] {
    std::string path = *all ? "/api/v1/jobs?all=true" : "/api/v1/jobs";
    if (c->output != "table") {  // one document (the server streams it)
      json jobs = Check(Client(*c).Get(path));
      Structured(*c, jobs);
      return;
    }
    // A table is printed page by page as they come: `--all` may list millions of jobs.
    constexpr size_t kPage = 500;
    for (int64_t after = 0;;) {
      json jobs = Check(
          Client(*c).Get(absl::StrCat(path, *all ? "&" : "?", "limit=", kPage, "&after=", after)));
      Structured(*c, jobs);  // makes it terminal-safe
      PrintJobs(jobs, after == 0);
      if (jobs.size() < kPage) break;
      after = jobs.back().value("id", int64_t{0});
    }
  });
  auto id = std::make_shared<std::string>();
  CLI::App* show = app.add_subcommand("show", "Show one job (JOB) or event (event/SEQ)");
  show->add_option("job", *id, "Job id, or event/SEQ")->required();
  show->callback([c, id] {
    std::string path = id->rfind("event/", 0) == 0
                           ? absl::StrCat("/api/v1/events/", JobId(id->substr(6)))
                           : absl::StrCat("/api/v1/jobs/", JobId(*id));
    json job = Check(Client(*c).Get(path));
    if (c->output == "table") c->output = "yaml";
    Structured(*c, job);
  });
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a job (stops all its processes)");
  cancel->add_option("job", *id, "Job id")->required();
  cancel->callback([c, id] {
    json job = Check(
        Client(*c).Post(absl::StrCat("/api/v1/jobs/", JobId(*id), "/cancel"), json::object()));
    if (!Structured(*c, job)) std::cout << "job " << *id << ": " << job.value("reason", "") << "\n";
  });
  CLI::App* renew = app.add_subcommand("renew", "Renew an interactive job's lease");
  renew->add_option("job", *id, "Job id")->required();
  renew->callback([c, id] {
    json job =
        Check(Client(*c).Post(absl::StrCat("/api/v1/jobs/", JobId(*id), "/renew"), json::object()));
    if (!Structured(*c, job)) std::cout << "job " << *id << ": lease renewed\n";
  });
  CLI::App* nodes = app.add_subcommand("nodes", "List nodes and their GPUs");
  nodes->callback([c] {
    json list = Check(Client(*c).Get("/api/v1/nodes"));
    if (Structured(*c, list)) return;
    std::cout << absl::StrFormat("%-10s %-10s %-34s %-8s %-9s %s\n", "NODE", "STATE", "GPUS", "CPU",
                                 "MEMORY", "REPLICAS");
    for (const json& n : list) {
      std::map<std::string, int> kinds;
      for (const json& g : n["gpus"]) {
        ++kinds[absl::StrCat(g.value("model", ""), " ", g.value("mode", ""))];
      }
      std::vector<std::string> parts;
      for (const auto& [k, count] : kinds) parts.push_back(absl::StrCat(count, "x ", k));
      std::cout << absl::StrFormat("%-10s %-10s %-34s %-8s %-9s %d\n", n.value("name", ""),
                                   NodeState(n), parts.empty() ? "-" : absl::StrJoin(parts, ", "),
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
      if (n.contains("jobs_moved") && !n["jobs_moved"].empty()) {
        std::cout << "; jobs moved: " << n["jobs_moved"].dump();
      }
      std::cout << "\n";
    });
  }
  auto after = std::make_shared<int64_t>(0);
  CLI::App* events = app.add_subcommand("events", "The event log (hash-chained)");
  events->add_option("--after", *after, "Only events after this sequence number");
  events->callback([c, after] {
    json list = Check(Client(*c).Get(absl::StrCat("/api/v1/events?after=", *after)));
    if (Structured(*c, list)) return;
    for (const json& e : list) {
      std::cout << absl::StrFormat("%5d %-22s %-14s %-10s %s\n", e.value("seq", int64_t{0}),
                                   e.value("type", ""), e.value("actor", ""),
                                   e.value("subject", ""), e.value("reason", ""));
    }
  });
}

void AddConfig(CLI::App& app, std::shared_ptr<Connection> c) {
  auto file = std::make_shared<std::string>();
  CLI::App* apply = app.add_subcommand(
      "apply", "Apply tenants, projects, queues and node GPU modes from a YAML file");
  apply->add_option("-f,--file", *file, "YAML file (several documents separated by ---)")
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
  CLI::App* get = app.add_subcommand("get", "List tenants, projects or queues");
  get->add_option("kind", *kind, "tenants | projects | queues")
      ->required()
      ->check(CLI::IsMember({"tenants", "projects", "queues"}));
  get->callback([c, kind] {
    json list = Check(Client(*c).Get("/api/v1/" + *kind));
    if (Structured(*c, list)) return;
    for (const json& o : list) {
      std::cout << absl::StrFormat("%-20s %s\n", o.value("name", ""),
                                   o.contains("tenant")  ? "tenant " + o.value("tenant", "")
                                   : o.contains("quota") ? "quota " + o["quota"].dump()
                                                         : o.value("description", ""));
    }
  });
}

void AddLogs(CLI::App& app, std::shared_ptr<Connection> c) {
  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  auto replica = std::make_shared<int>(0);
  CLI::App* logs = app.add_subcommand("logs", "A job's output (-f: follow until it ends)");
  logs->add_option("job", *id, "Job id")->required();
  logs->add_flag("-f,--follow", *follow, "Keep printing until the job ends");
  logs->add_option("--replica", *replica, "Replica");
  logs->callback([c, id, follow, replica] {
    ApiClient api = Client(*c);
    int64_t job = JobId(*id);
    int64_t offset = 0;
    while (true) {
      std::map<std::string, std::string> headers;
      auto text = api.GetText(
          absl::StrCat("/api/v1/jobs/", job, "/logs?replica=", *replica, "&offset=", offset),
          &headers);
      if (!text.ok()) Die(text.status());
      std::cout << *text << std::flush;
      offset += static_cast<int64_t>(text->size());
      // The server answers a page at a time (1 MiB): fetch the next one while there is more.
      int64_t size = 0;
      for (const auto& [name, value] : headers) {
        if (absl::EqualsIgnoreCase(name, "X-Carve-Log-Size")) (void)absl::SimpleAtoi(value, &size);
      }
      if (!text->empty() && offset < size) continue;
      if (!*follow) return;
      json state = Check(api.Get(absl::StrCat("/api/v1/jobs/", job)));
      const std::optional<JobState> ended = ParseJobState(state.value("state", ""));
      if (ended && IsFinal(*ended) && text->empty()) {
        std::cerr << "[job " << job << " " << state.value("state", "") << ": "
                  << state.value("reason", "") << "]\n";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
}

}  // namespace

void AddClientCommands(CLI::App& app) {
  auto c = std::make_shared<Connection>();
  app.add_option("--server", c->server, "Carve server URL (or CARVE_SERVER)");
  app.add_option("--token", c->token, "API token (or CARVE_TOKEN)");
  app.add_option("--ca", c->ca, "PEM CA that signed an https server's certificate (or CARVE_CA)");
  app.add_option("-o,--output", c->output, "table | json | yaml");
  AddSubmit(app, c);
  AddQueries(app, c);
  AddLogs(app, c);
  AddConfig(app, c);
  AddOperationsCommands(app, c);
  AddQueueCommands(app, c);
  AddAdminCommands(app, c);
  AddPocCommands(app, c);
}

}  // namespace carve::app
