#include "sim/synth.h"

#include <chrono>
#include <cmath>
#include <queue>
#include <random>

#include "absl/strings/str_format.h"
#include "core/sched/placement/placer.h"
#include "sim/workload.h"

namespace carve::sim {
namespace {

struct NodeKind {
  const char* model;
  DeliveryMode mode;
  int64_t cpu_milli;
  int64_t memory_gib;
  int share_pct;  // of nodes
};

constexpr NodeKind kNodeKinds[] = {
    {"H200-141GB", DeliveryMode::kExclusive, 192000, 2048, 35},
    {"H100-80GB", DeliveryMode::kExclusive, 160000, 1536, 20},
    {"A100-80GB", DeliveryMode::kPartition, 128000, 1024, 10},
    {"L40S", DeliveryMode::kShared, 128000, 1024, 25},
    {"A10", DeliveryMode::kShared, 96000, 512, 10},
};

}  // namespace

std::vector<Node> SyntheticNodes(int count, int gpus_per_node, const GpuCatalog& catalog,
                                 std::mt19937_64& rng) {
  std::vector<Node> nodes;
  for (int i = 0; i < count; ++i) {
    int pick = static_cast<int>(UniformIndex(rng, 100));
    const NodeKind* kind = &kNodeKinds[0];
    for (const NodeKind& k : kNodeKinds) {
      if (pick < k.share_pct) {
        kind = &k;
        break;
      }
      pick -= k.share_pct;
    }
    Node n;
    n.name = absl::StrFormat("synth-%05d", i);
    n.pool = kind->mode == DeliveryMode::kExclusive ? "train" : "serve";
    n.capacity = {CpuMilli(kind->cpu_milli), MemMib(kind->memory_gib * 1024), MemMib(8 << 20),
                  NetMbps(200000)};
    for (int g = 0; g < gpus_per_node; ++g) {
      Device d;
      d.model = *catalog.Find(kind->model);
      d.mode = kind->mode;
      d.dynamic_layout = kind->mode == DeliveryMode::kPartition;
      n.devices.push_back(d);
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// A job drawn from a fixed menu of shapes, weighted like the trace: 13% CPU-only, 38% shares,
// 37% one whole GPU, 4% multi-GPU, 8% MIG partitions.
JobRequest SyntheticJob(const GpuCatalog& catalog, std::mt19937_64& rng) {
  static constexpr int64_t kShares[] = {100, 200, 250, 300, 470, 500, 650, 810};
  static constexpr const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"};
  JobRequest job;
  ReplicaRequest& r = job.replica;
  int64_t cores = 2 + static_cast<int64_t>(UniformIndex(rng, 7)) * 2;  // 2..14
  r.resources.memory = MemMib(cores * 8 * 1024);
  uint64_t kind = UniformIndex(rng, 100);
  if (kind < 13) {
    r.gpu = {DeliveryMode::kExclusive, 0, {}, {}, ""};
    cores *= 2;
  } else if (kind < 51) {
    int64_t share = kShares[UniformIndex(rng, std::size(kShares))];
    r.gpu = {DeliveryMode::kShared, 1, GpuMilli(share), MemMib(share * 16), ""};
  } else if (kind < 88) {
    r.gpu = {DeliveryMode::kExclusive, 1, kWholeGpu, {}, ""};
  } else if (kind < 92) {
    int count = 2 << UniformIndex(rng, 3);  // 2, 4, 8
    r.gpu = {DeliveryMode::kExclusive, count, kWholeGpu, {}, ""};
    cores *= count;
  } else {
    r.gpu = {DeliveryMode::kPartition, 1, {}, {}, kProfiles[UniformIndex(rng, 4)]};
    r.allowed_models = {*catalog.Find("A100-80GB")};
  }
  r.resources.cpu = CpuMilli(cores * 1000);
  return job;
}

Workload WorkloadOf(const std::vector<JobRequest>& jobs) {
  Workload workload;
  absl::flat_hash_map<ReplicaRequest, size_t> class_of;
  for (const JobRequest& j : jobs) {
    auto [it, inserted] = class_of.try_emplace(j.replica, workload.size());
    if (inserted) workload.push_back({j.replica, 0});
    workload[it->second].weight += 1.0 / static_cast<double>(jobs.size());
  }
  return workload;
}

namespace {

double GpuOf(const JobRequest& j) {
  const GpuRequest& g = j.replica.gpu;
  if (g.mode == DeliveryMode::kShared) return static_cast<double>(g.compute.units()) / 1000;
  if (g.mode == DeliveryMode::kPartition) return 0.4;
  return g.count;
}

struct Running {
  double end;
  int64_t job;
  bool operator>(const Running& o) const { return end > o.end || (end == o.end && job > o.job); }
};

}  // namespace

absl::StatusOr<SynthResult> RunSynth(const SynthOptions& o) {
  if (o.nodes < 1 || o.gpus_per_node < 1 || o.jobs < 1) {
    return absl::InvalidArgumentError("--nodes, --gpus-per-node and --jobs must be at least 1");
  }
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  // Separate streams, so that one policy's placements never change another's jobs or runtimes.
  std::mt19937_64 rng(o.seed), warm_rng(o.seed + 1), runtime_rng(o.seed + 2);
  Cluster cluster(&catalog);
  for (Node& n : SyntheticNodes(o.nodes, o.gpus_per_node, catalog, rng)) {
    cluster.AddNode(std::move(n));
  }
  std::vector<JobRequest> jobs;
  double gpu_per_job = 0;
  for (int i = 0; i < o.jobs; ++i) {
    jobs.push_back(SyntheticJob(catalog, rng));
    gpu_per_job += GpuOf(jobs.back()) / o.jobs;
  }
  // Little's law: arrivals every 1 time unit, mean runtime sized for the target GPU load.
  double mean_runtime = o.target_load * static_cast<double>(cluster.total_gpus()) / gpu_per_job;
  std::exponential_distribution<double> runtime(1.0 / mean_runtime);

  // The workload the policy plans for: the job stream's requests, by frequency.
  auto policy = MakePolicy(o.policy, PolicyOptions{WorkloadOf(jobs)});
  if (!policy.ok()) return policy.status();
  Placer placer(&cluster, policy->get(), o.seed,
                o.scan ? Placer::Strategy::kScan : Placer::Strategy::kIndexed);

  SynthResult result;
  result.policy = o.policy;
  result.nodes = o.nodes;
  result.gpus_total = cluster.total_gpus();
  std::vector<std::vector<ReplicaPlacement>> held(jobs.size());
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  // Warm-up, untimed: a population drawn from the same menu, placed until the cluster holds the
  // target load, with residual runtimes (memoryless) so departures begin at once.
  std::vector<std::vector<ReplicaPlacement>> warm;
  int64_t target_milli =
      static_cast<int64_t>(o.target_load * 1000.0 * static_cast<double>(cluster.total_gpus()));
  int64_t allocated = 0;
  for (int misses = 0; allocated < target_milli && misses < 1000;) {
    if (warm.size() % 256 == 0) allocated = cluster.AllocatedGpuMilli();
    PlaceResult r = placer.Place(SyntheticJob(catalog, warm_rng));
    if (!r.placed) {
      ++misses;
      continue;
    }
    warm.push_back(std::move(r.replicas));
    running.push({runtime(runtime_rng), -static_cast<int64_t>(warm.size())});
  }
  auto release = [&](int64_t job) {
    auto& replicas = job < 0 ? warm[-job - 1] : held[job];
    placer.Release(replicas);
    replicas.clear();
  };
  using Clock = std::chrono::steady_clock;
  Clock::duration placing{}, releasing{};
  double alloc_sum = 0;
  for (int64_t i = 0; i < o.jobs; ++i) {
    double now = static_cast<double>(i);
    auto t0 = Clock::now();
    while (!running.empty() && running.top().end <= now) {
      release(running.top().job);
      running.pop();
    }
    auto t1 = Clock::now();
    PlaceResult r = placer.Place(jobs[i]);
    auto t2 = Clock::now();
    releasing += t1 - t0;
    placing += t2 - t1;
    ++result.jobs;
    if (r.placed) {
      ++result.placed;
      held[i] = std::move(r.replicas);
      running.push({now + runtime(runtime_rng), i});
    } else {
      ++result.failed;
    }
    if (i % 64 == 0) {
      alloc_sum += 64.0 * static_cast<double>(cluster.AllocatedGpuMilli()) /
                   (10.0 * static_cast<double>(cluster.total_gpus()));
    }
  }
  result.mean_alloc_pct = alloc_sum / static_cast<double>(o.jobs);
  result.place_seconds = std::chrono::duration<double>(placing).count();
  result.release_seconds = std::chrono::duration<double>(releasing).count();
  result.placements_per_sec =
      result.place_seconds > 0 ? static_cast<double>(result.jobs) / result.place_seconds : 0;
  return result;
}

nlohmann::json SynthResult::ToJson() const {
  return {{"policy", policy},
          {"nodes", nodes},
          {"gpus_total", gpus_total},
          {"jobs", jobs},
          {"placed", placed},
          {"failed", failed},
          {"mean_alloc_pct", std::round(mean_alloc_pct * 100) / 100},
          {"place_seconds", place_seconds},
          {"release_seconds", release_seconds},
          {"placements_per_sec", std::round(placements_per_sec)}};
}

void SynthResult::Print(std::ostream& out) const {
  out << absl::StrFormat(
      "policy %s: %d nodes, %d GPUs, %d jobs (%d placed, %d did not fit), mean GPU allocation "
      "%.1f%%\nplacement: %.0f jobs/s (%.3f s placing, %.3f s releasing)\n",
      policy, nodes, gpus_total, jobs, placed, failed, mean_alloc_pct, placements_per_sec,
      place_seconds, release_seconds);
}

}  // namespace carve::sim
