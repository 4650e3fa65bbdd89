#include "sim/fill.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/sched/placement/fragmentation.h"
#include "core/sched/placement/placer.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace carve::sim {
namespace {

// What stays the same across seeds.
struct Experiment {
  FillInput in;
  Workload observed;  // every request class with its frequency
  Workload typical;   // the classes covering 95%: the fragmentation measure of the report
  FillOptions options;
};

// Allocation and fragmentation after one pod arrived.
struct Event {
  int64_t arrived = 0;  // GPU milli requested so far, placed or not
  int64_t used = 0;     // GPU milli allocated
  double frag = 0;      // fragmented free GPU milli
};

// Curve over integer load percentages: mean allocation (and fragmentation ratio) of the events
// whose arrived load rounds to that percentage, or to a neighbour when none does.
std::vector<CurvePoint> Discretize(const std::vector<Event>& events, int64_t total_gpus,
                                   int max_pct) {
  std::map<int, std::vector<const Event*>> buckets;
  double capacity = static_cast<double>(total_gpus) * 1000.0;
  for (const Event& ev : events) {
    buckets[static_cast<int>(std::nearbyint(100.0 * static_cast<double>(ev.arrived) / capacity))]
        .push_back(&ev);
  }
  std::vector<CurvePoint> curve;
  for (int x = 0; x <= max_pct; ++x) {
    std::vector<const Event*> rows = buckets[x];
    if (rows.empty()) {
      for (int neighbour : {x - 1, x + 1}) {
        const auto& more = buckets[neighbour];
        rows.insert(rows.end(), more.begin(), more.end());
      }
    }
    CurvePoint p;
    p.load_pct = x;
    if (!rows.empty()) {
      double alloc = 0, frag = 0;
      for (const Event* ev : rows) {
        double used = static_cast<double>(ev->used);
        alloc += std::round(10000.0 * used / capacity) / 100.0;
        double idle = capacity - used;
        frag += idle > 0 ? 100.0 * ev->frag / idle : 0.0;
      }
      p.alloc_pct = std::round(100.0 * alloc / static_cast<double>(rows.size())) / 100.0;
      p.frag_pct = frag / static_cast<double>(rows.size());
    }
    p.unallocated_gpus = static_cast<double>(total_gpus) * (100.0 - p.alloc_pct) / 100.0;
    curve.push_back(p);
  }
  return curve;
}

void AppendPlacement(std::string& csv, int seed, const TracePod& pod, const Cluster& cluster,
                     const PlaceResult& r) {
  std::string node, gpus;
  if (r.placed) {
    const ReplicaPlacement& p = r.replicas[0];
    node = cluster.node(p.node).name;
    std::vector<int> devices;
    for (const DeviceGrant& g : p.grants) devices.push_back(g.device);
    gpus = absl::StrJoin(devices, "|");
  }
  absl::StrAppend(&csv, seed, ",", pod.name, ",", node, ",", gpus, ",", pod.gpu_milli, ",",
                  pod.cpu_milli, ",", pod.memory_mib, "\n");
}

absl::StatusOr<SeedResult> RunSeed(const Experiment& e, int seed) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<size_t> order = ArrivalOrder(e.in, e.options.target_load, rng);
  Cluster cluster(&e.in.catalog);
  for (const Node& n : e.in.nodes) cluster.AddNode(n);
  std::vector<int64_t> ranks(e.in.nodes.size());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int64_t>(i);
  for (size_t i = ranks.size(); i > 1; --i) std::swap(ranks[i - 1], ranks[UniformIndex(rng, i)]);

  auto policy = MakePolicy(e.options.policy, PolicyOptions{e.observed});
  if (!policy.ok()) return policy.status();
  Placer placer(&cluster, policy->get(), rng());
  placer.SetNodeRanks(ranks);

  FragmentationModel frag_model(e.typical);
  std::vector<double> node_frag(cluster.size(), 0.0);
  double frag = 0;
  for (size_t i = 0; i < cluster.size(); ++i) {
    node_frag[i] = frag_model.NodeFragmentation(cluster.node(NodeId(i)));
    frag += node_frag[i];
  }

  SeedResult result;
  result.seed = seed;
  std::vector<Event> events;
  events.reserve(order.size());
  Event now;
  std::chrono::steady_clock::duration placing{};
  for (size_t i : order) {
    const TracePod& pod = e.in.pods[i];
    now.arrived += AskedMilli(pod);
    auto t0 = std::chrono::steady_clock::now();
    PlaceResult r = placer.Place(e.in.requests[i]);
    placing += std::chrono::steady_clock::now() - t0;
    ++result.pods;
    if (r.placed) {
      ++result.placed;
      now.used += AskedMilli(pod);
      NodeId id = r.replicas[0].node;
      double updated = frag_model.NodeFragmentation(cluster.node(id));
      frag += updated - node_frag[id.value()];
      node_frag[id.value()] = updated;
    }
    now.frag = frag;
    events.push_back(now);
    if (!e.options.placements_path.empty()) {
      AppendPlacement(result.placements_csv, seed, pod, cluster, r);
    }
  }
  result.place_seconds = std::chrono::duration<double>(placing).count();
  result.curve = Discretize(events, e.in.total_gpus,
                            static_cast<int>(std::lround(e.options.target_load * 100)));
  return result;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

absl::Status LoadFillInput(const std::string& nodes_path, const std::string& pods_path,
                           FillInput& in) {
  auto trace_nodes = ReadNodeList(nodes_path);
  if (!trace_nodes.ok()) return trace_nodes.status();
  auto nodes = NodesFromTrace(*trace_nodes, in.catalog);
  if (!nodes.ok()) return nodes.status();
  in.nodes = std::move(*nodes);
  for (const Node& n : in.nodes) in.total_gpus += static_cast<int64_t>(n.devices.size());
  if (in.total_gpus == 0) return absl::InvalidArgumentError(nodes_path + ": no GPUs");
  auto pods = ReadPodList(pods_path);
  if (!pods.ok()) return pods.status();
  if (pods->empty()) return absl::InvalidArgumentError(pods_path + ": no pods");
  in.pods = std::move(*pods);
  std::stable_sort(in.pods.begin(), in.pods.end(),
                   [](const TracePod& a, const TracePod& b) { return a.name < b.name; });
  for (const TracePod& p : in.pods) {
    auto request = RequestFromPod(p, in.catalog);
    if (!request.ok()) return request.status();
    in.requests.push_back(*std::move(request));
  }
  return absl::OkStatus();
}

std::vector<size_t> ArrivalOrder(const FillInput& in, double target_load, std::mt19937_64& rng) {
  std::vector<size_t> order(in.pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[UniformIndex(rng, i)]);
  double target = target_load * static_cast<double>(in.total_gpus) * 1000.0;
  int64_t total = 0;
  for (const TracePod& p : in.pods) total += AskedMilli(p);
  // Like the paper's simulator, the stop test uses the per-GPU milli of the drawn pod.
  while (true) {
    size_t i = UniformIndex(rng, in.pods.size());
    if (static_cast<double>(total + in.pods[i].gpu_milli) > target) break;
    total += AskedMilli(in.pods[i]);
    order.push_back(i);
  }
  return order;
}

absl::StatusOr<FillResult> RunFill(const FillOptions& options) {
  if (options.seeds < 1) return absl::InvalidArgumentError("--seeds must be at least 1");
  if (options.target_load <= 0) return absl::InvalidArgumentError("--load must be above 0");
  Experiment e;
  e.options = options;
  if (absl::Status s = LoadFillInput(options.nodes_path, options.pods_path, e.in); !s.ok()) {
    return s;
  }
  auto observed = ObservedWorkload(e.in.pods, e.in.catalog);
  if (!observed.ok()) return observed.status();
  e.observed = std::move(*observed);
  e.typical = TypicalClasses(e.observed, 0.95);
  if (auto probe = MakePolicy(options.policy, PolicyOptions{e.observed}); !probe.ok()) {
    return probe.status();
  }

  std::vector<absl::StatusOr<SeedResult>> runs(options.seeds, absl::UnknownError("not run"));
  std::atomic<int> next{0};
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp(threads, 1, options.seeds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < options.seeds; i = next++)
        runs[i] = RunSeed(e, options.first_seed + i);
    });
  }
  for (std::thread& t : pool) t.join();

  FillResult result;
  result.policy = options.policy;
  result.gpus_total = e.in.total_gpus;
  double seconds = 0;
  for (auto& run : runs) {
    if (!run.ok()) return run.status();
    result.placements += run->pods;
    seconds += run->place_seconds;
    result.seeds.push_back(*std::move(run));
  }
  result.placements_per_sec = seconds > 0 ? static_cast<double>(result.placements) / seconds : 0;
  size_t points = result.seeds[0].curve.size();
  for (size_t x = 0; x < points; ++x) {
    std::vector<double> alloc, frag;
    for (const SeedResult& s : result.seeds) {
      alloc.push_back(s.curve[x].alloc_pct);
      frag.push_back(s.curve[x].frag_pct);
    }
    CurvePoint p{static_cast<int>(x), Median(alloc), Median(frag), 0};
    p.unallocated_gpus = static_cast<double>(e.in.total_gpus) * (100.0 - p.alloc_pct) / 100.0;
    if (p.load_pct == 100) result.alloc_pct_at_100 = p.alloc_pct;
    if (x + 1 == points) result.alloc_pct_at_130 = p.alloc_pct;
    if (p.load_pct % 5 == 0 || x + 1 == points) result.curve.push_back(p);
  }
  if (!options.placements_path.empty()) {
    std::ofstream out(options.placements_path);
    out << "seed,pod,node,gpus,gpu_milli,cpu_milli,memory_mib\n";
    for (const SeedResult& s : result.seeds) out << s.placements_csv;
    if (!out) return absl::InternalError(options.placements_path + ": write failed");
  }
  return result;
}

nlohmann::json FillResult::ToJson() const {
  nlohmann::json j;
  j["policy"] = policy;
  j["gpus_total"] = gpus_total;
  std::vector<int> seed_ids;
  for (const SeedResult& s : seeds) seed_ids.push_back(s.seed);
  j["seeds"] = seed_ids;
  j["curve"] = nlohmann::json::array();
  for (const CurvePoint& p : curve) {
    j["curve"].push_back({{"load", p.load_pct / 100.0},
                          {"alloc_pct", p.alloc_pct},
                          {"frag_pct", std::round(p.frag_pct * 100) / 100},
                          {"unallocated_gpus", std::round(p.unallocated_gpus * 10) / 10}});
  }
  j["alloc_pct_at_100"] = alloc_pct_at_100;
  j["alloc_pct_at_130"] = alloc_pct_at_130;
  nlohmann::json per_seed = nlohmann::json::array();
  for (const SeedResult& s : seeds) {
    double at100 = s.curve.size() > 100 ? s.curve[100].alloc_pct : 0;
    per_seed.push_back({{"seed", s.seed},
                        {"pods", s.pods},
                        {"placed", s.placed},
                        {"alloc_pct_at_100", at100},
                        {"alloc_pct_at_end", s.curve.back().alloc_pct}});
  }
  j["per_seed"] = per_seed;
  j["placements"] = placements;
  j["placements_per_sec"] = std::round(placements_per_sec);
  return j;
}

void FillResult::PrintTable(std::ostream& out) const {
  out << absl::StrFormat("policy %s, %d GPUs, %d seeds (median), %d placements at %.0f/s\n", policy,
                         gpus_total, seeds.size(), placements, placements_per_sec);
  out << absl::StrFormat("%6s %10s %9s %12s\n", "load", "alloc %", "frag %", "unalloc GPUs");
  for (const CurvePoint& p : curve) {
    out << absl::StrFormat("%5d%% %10.2f %9.2f %12.1f\n", p.load_pct, p.alloc_pct, p.frag_pct,
                           p.unallocated_gpus);
  }
}

}  // namespace carve::sim
