#include "sim_command.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "sim/bound.h"
#include "sim/compare.h"
#include "sim/fill.h"
#include "sim/queue_trace.h"
#include "sim/replay.h"
#include "sim/synth.h"

namespace carve::app {
namespace {

void Fail(const absl::Status& status) {
  std::cerr << "carve: " << status.message() << "\n";
  std::exit(1);
}

void WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) Fail(absl::InternalError(path + ": cannot write"));
}

std::string DefaultTraceFile(const std::string& name) {
  const char* dir = std::getenv("CARVE_TRACE_DIR");
  return std::string(dir ? dir : "../shared/traces/alibaba-gpu-2023/csv") + "/" + name;
}

void AddFill(CLI::App& sim) {
  auto opts = std::make_shared<sim::FillOptions>();
  auto json = std::make_shared<std::string>();
  opts->nodes_path = DefaultTraceFile("openb_node_list_gpu_node.csv");
  opts->pods_path = DefaultTraceFile("openb_pod_list_default.csv");
  CLI::App* fill = sim.add_subcommand(
      "fill", "Fill a trace cluster with a trace workload to 130% load (the FGD paper's method)");
  fill->add_option("--nodes", opts->nodes_path, "Node list CSV")->capture_default_str();
  fill->add_option("--pods", opts->pods_path, "Pod list CSV")->capture_default_str();
  fill->add_option("--policy", opts->policy, "Placement policy")->capture_default_str();
  fill->add_option("--seeds", opts->seeds, "Number of seeds, from --first-seed")
      ->capture_default_str();
  fill->add_option("--first-seed", opts->first_seed, "First seed")->capture_default_str();
  fill->add_option("--load", opts->target_load, "Arrived load to stop at (1.3 = 130%)")
      ->capture_default_str();
  fill->add_option("--threads", opts->threads, "Seeds run in parallel (0: one per core)");
  fill->add_option("--json", *json, "Write the result as JSON to this file");
  fill->add_option("--placements", opts->placements_path,
                   "Write every decision to this CSV (seed,pod,node,gpus,...)");
  fill->callback([opts, json] {
    auto result = sim::RunFill(*opts);
    if (!result.ok()) Fail(result.status());
    result->PrintTable(std::cout);
    std::cout << absl::StrFormat(
        "GPU allocation at 100%% load: %.2f%%, at %d%% load: %.2f%%\n", result->alloc_pct_at_100,
        static_cast<int>(opts->target_load * 100 + 0.5), result->alloc_pct_at_130);
    WriteJson(*json, result->ToJson());
  });
}

void AddSynth(CLI::App& sim) {
  auto opts = std::make_shared<sim::SynthOptions>();
  auto json = std::make_shared<std::string>();
  CLI::App* synth = sim.add_subcommand(
      "synth", "Place a synthetic trace-shaped job stream on a large mixed cluster; report speed");
  synth->add_option("--nodes", opts->nodes, "Nodes")->capture_default_str();
  synth->add_option("--gpus-per-node", opts->gpus_per_node, "GPUs per node")->capture_default_str();
  synth->add_option("--jobs", opts->jobs, "Jobs")->capture_default_str();
  synth->add_option("--policy", opts->policy, "Placement policy")->capture_default_str();
  synth->add_option("--seed", opts->seed, "Seed")->capture_default_str();
  synth->add_option("--load", opts->target_load, "GPU load the job stream settles at")
      ->capture_default_str();
  synth->add_flag("--scan", opts->scan, "Score every node for every job (no index)");
  synth->add_option("--json", *json, "Write the result as JSON to this file");
  synth->callback([opts, json] {
    auto result = sim::RunSynth(*opts);
    if (!result.ok()) Fail(result.status());
    result->Print(std::cout);
    WriteJson(*json, result->ToJson());
  });
}

// The trace folder's pod lists, sorted, for `compare` without --pods.
std::vector<std::string> PodListsIn(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("openb_pod_list_", 0) == 0 && entry.path().extension() == ".csv") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

void AddCompare(CLI::App& sim) {
  auto opts = std::make_shared<sim::CompareOptions>();
  auto markdown = std::make_shared<std::string>();
  auto trace_dir = std::make_shared<std::string>(
      std::filesystem::path(DefaultTraceFile("x")).parent_path().string());
  opts->fill.nodes_path = DefaultTraceFile("openb_node_list_gpu_node.csv");
  opts->policies = {"random", "dot-product", "clustering", "packing", "best-fit", "fgd", "carve"};
  CLI::App* compare = sim.add_subcommand(
      "compare", "Run `fill` for several pod lists and policies and print a markdown table");
  compare->add_option("--nodes", opts->fill.nodes_path, "Node list CSV")->capture_default_str();
  compare->add_option("--pods", opts->pod_files,
                      "Pod list CSVs (default: every pod list in "
                      "--trace-dir)");
  compare->add_option("--trace-dir", *trace_dir, "Folder of the trace's CSV files")
      ->capture_default_str();
  compare->add_option("--policies", opts->policies, "Policies")
      ->delimiter(',')
      ->capture_default_str();
  compare->add_option("--seeds", opts->fill.seeds, "Seeds per fill")->capture_default_str();
  compare->add_option("--load", opts->fill.target_load, "Arrived load to stop at")
      ->capture_default_str();
  compare->add_option("--json-dir", opts->json_dir, "Write each fill's JSON here");
  compare->add_option("--markdown", *markdown, "Write the table to this file too");
  compare->callback([opts, markdown, trace_dir] {
    if (opts->pod_files.empty()) opts->pod_files = PodListsIn(*trace_dir);
    auto result = sim::RunCompare(*opts, &std::cerr);
    if (!result.ok()) Fail(result.status());
    std::cout << "GPU allocation %, median of " << opts->fill.seeds
              << " seeds, at 100% / at the final arrived load:\n\n";
    result->PrintMarkdown(std::cout);
    if (!markdown->empty()) {
      std::ofstream out(*markdown);
      result->PrintMarkdown(out);
      if (!out) Fail(absl::InternalError(*markdown + ": cannot write"));
    }
  });
}

void AddQueues(CLI::App& sim) {
  auto opts = std::make_shared<sim::QueueTraceOptions>();
  auto json = std::make_shared<std::string>();
  opts->nodes_path = DefaultTraceFile("openb_node_list_gpu_node.csv");
  opts->pods_path = DefaultTraceFile("openb_pod_list_default.csv");
  CLI::App* queues = sim.add_subcommand(
      "queues", "Two tenants' queues with quotas in one cohort over the trace: share over time");
  queues->add_option("--nodes", opts->nodes_path, "Trace node list (CSV)");
  queues->add_option("--pods", opts->pods_path, "Trace pod list with creation/deletion times");
  queues->add_option("--node-fraction", opts->node_fraction, "Share of the GPU nodes used");
  queues->add_option("--prod-share", opts->prod_share, "prod's nominal share of the GPUs");
  queues->add_option("--arrival-speedup", opts->arrival_speedup,
                     "Arrivals this many times faster than in the trace (durations unchanged)");
  queues->add_option("--buckets", opts->buckets, "Report rows over the trace's time span");
  queues->add_option("--policy", opts->policy, "Placement policy");
  queues->add_option("--json", *json, "Also write the result as JSON to this file");
  queues->callback([opts, json] {
    if (opts->node_fraction <= 0 || opts->node_fraction > 1 || opts->prod_share <= 0 ||
        opts->prod_share >= 1 || opts->buckets < 1 || opts->arrival_speedup <= 0) {
      Fail(absl::InvalidArgumentError(
          "--node-fraction must be in (0, 1], --prod-share in (0, 1), --buckets at least 1, "
          "--arrival-speedup above 0"));
    }
    auto result = sim::RunQueueTrace(*opts);
    if (!result.ok()) Fail(result.status());
    result->PrintTable(std::cout);
    WriteJson(*json, result->ToJson());
  });
}

void AddReplay(CLI::App& sim) {
  auto opts = std::make_shared<sim::ReplayOptions>();
  auto json = std::make_shared<std::string>();
  opts->nodes_path = DefaultTraceFile("openb_node_list_gpu_node.csv");
  opts->pods_path = DefaultTraceFile("openb_pod_list_default.csv");
  CLI::App* replay = sim.add_subcommand(
      "replay",
      "The trace's pods arrive, queue while they do not fit, run their lifetime and leave: "
      "allocation, fragmentation and queue length over time, waits per job");
  replay->add_option("--nodes", opts->nodes_path, "Trace node list (CSV)");
  replay->add_option("--pods", opts->pods_path, "Trace pod list with creation/deletion times");
  replay->add_option("--policy", opts->policy, "Placement policy");
  replay->add_option("--node-fraction", opts->node_fraction,
                     "The first this share of the node list's nodes");
  replay->add_option("--speedup", opts->speedup,
                     "Arrivals this many times faster than in the trace (lifetimes unchanged)");
  replay->add_option("--buckets", opts->buckets, "Report rows over the replay's time span");
  replay->add_option("--cycle-s", opts->cycle_s, "Least seconds between two scheduling cycles");
  replay->add_option("--json", *json, "Also write the result as JSON to this file");
  replay->callback([opts, json] {
    auto result = sim::RunReplay(*opts);
    if (!result.ok()) Fail(result.status());
    result->PrintTable(std::cout);
    WriteJson(*json, result->ToJson());
  });
}

void AddBound(CLI::App& sim) {
  auto opts = std::make_shared<sim::BoundOptions>();
  auto json = std::make_shared<std::string>();
  opts->nodes_path = DefaultTraceFile("openb_node_list_gpu_node.csv");
  opts->pods_path = DefaultTraceFile("openb_pod_list_default.csv");
  CLI::App* bound = sim.add_subcommand(
      "bound",
      "For `fill`'s arrivals (same seeds), what a clairvoyant packer places and an upper bound "
      "no placement passes (a linear relaxation solved with GLPK)");
  bound->add_option("--nodes", opts->nodes_path, "Node list CSV")->capture_default_str();
  bound->add_option("--pods", opts->pods_path, "Pod list CSV")->capture_default_str();
  bound->add_option("--seeds", opts->seeds, "Number of seeds, from --first-seed")
      ->capture_default_str();
  bound->add_option("--first-seed", opts->first_seed, "First seed")->capture_default_str();
  bound->add_option("--loads", opts->loads, "Loads to cut the arrivals at, in percent")
      ->capture_default_str();
  bound->add_option("--json", *json, "Also write the result as JSON to this file");
  bound->callback([opts, json] {
    auto result = sim::RunBound(*opts);
    if (!result.ok()) Fail(result.status());
    result->PrintTable(std::cout);
    WriteJson(*json, result->ToJson());
  });
}

}  // namespace

void AddSimCommands(CLI::App& app) {
  CLI::App* sim = app.add_subcommand("sim", "Trace-driven simulation with the real scheduler core");
  sim->require_subcommand(1);
  AddFill(*sim);
  AddSynth(*sim);
  AddCompare(*sim);
  AddQueues(*sim);
  AddReplay(*sim);
  AddBound(*sim);
}

}  // namespace carve::app
