#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/sched/placement/fragmentation.h"
#include "sim/queue_sim.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace carve::sim {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr char kQueue[] = "trace";

// The nearest-rank percentile of `values` (0 when empty).
double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

// A queue whose quota is the whole cluster: it never binds.
QueueSpec WholeCluster(const std::vector<TraceNode>& nodes, int64_t gpu_milli) {
  QueueSpec q;
  q.name = kQueue;
  q.nominal["gpus"] = gpu_milli;
  q.nominal["gpu-share"] = gpu_milli;
  for (const TraceNode& n : nodes) {
    q.nominal["cpu"] += n.cpu_milli;
    q.nominal["memory"] += n.memory_mib;
  }
  return q;
}

// Fragmentation (fragmented / free GPU milli, percent) measured at about `points` evenly spaced
// times over the arrivals, from the cycles' cluster states.
class FragProbe {
 public:
  FragProbe(Workload typical, int64_t gpu_milli, int64_t start, int64_t end, int points)
      : model_(std::move(typical)),
        gpu_milli_(gpu_milli),
        next_(start),
        step_(std::max<int64_t>(1, (end - start) / std::max(points, 1))) {}
  void Observe(int64_t now, const Cluster& cluster) {
    if (now < next_) return;
    next_ = now + step_;
    double frag = 0;
    for (size_t i = 0; i < cluster.size(); ++i) {
      frag += model_.NodeFragmentation(cluster.node(NodeId(i)));
    }
    const double free = static_cast<double>(gpu_milli_ - Allocated(cluster));
    points_.emplace_back(now, free > 0 ? 100.0 * frag / free : 0.0);
  }
  const std::vector<std::pair<int64_t, double>>& points() const { return points_; }

 private:
  static int64_t Allocated(const Cluster& cluster) {
    int64_t milli = 0;
    for (size_t i = 0; i < cluster.size(); ++i) {
      for (const Device& d : cluster.node(NodeId(i)).devices) {
        milli += kWholeGpu.units() - d.free_compute.units();
      }
    }
    return milli;
  }
  FragmentationModel model_;
  int64_t gpu_milli_;
  int64_t next_;
  int64_t step_;
  std::vector<std::pair<int64_t, double>> points_;
};

// Rows over [start, end): time-weighted allocation and queue length from the per-cycle samples
// (each holds until the next), the fragmentation measurements that fall in each.
std::vector<ReplayRow> Rows(const QueueSimResult& r, const FragProbe& frag, int64_t start,
                            int64_t end, int buckets, int64_t gpu_milli) {
  const int64_t span = std::max<int64_t>(1, (end - start + buckets - 1) / buckets);
  std::vector<ReplayRow> rows(buckets);
  std::vector<int64_t> length(buckets);
  for (int b = 0; b < buckets; ++b) {
    const int64_t from = start + b * span;
    const int64_t to = b == buckets - 1 ? end : std::min(end, from + span);
    rows[b].from_s = from / kSecond;
    rows[b].to_s = to / kSecond;
    length[b] = std::max<int64_t>(1, to - from);
  }
  auto bucket = [&](int64_t t) {
    return static_cast<int>(std::clamp<int64_t>((t - start) / span, 0, buckets - 1));
  };
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const QueueSimSample& s = r.samples[i];
    const QueueUse& use = s.queues.at(kQueue);
    const int64_t until = std::min(i + 1 < r.samples.size() ? r.samples[i + 1].t_us : end, end);
    for (int64_t t = s.t_us; t < until;) {
      const int b = bucket(t);
      const int64_t to = b == buckets - 1 ? until : std::min(until, start + (b + 1) * span);
      const double w = static_cast<double>(to - t) / static_cast<double>(length[b]);
      rows[b].alloc_pct += w * 100.0 * static_cast<double>(use.gpu_milli) / gpu_milli;
      rows[b].queue_len += w * use.pending;
      t = to;
    }
    if (s.t_us <= end) rows[bucket(s.t_us)].running_end = use.running;
  }
  std::vector<int> measured(buckets, 0);
  for (const auto& [t, pct] : frag.points()) {
    rows[bucket(t)].frag_pct += pct;
    ++measured[bucket(t)];
  }
  for (int b = 0; b < buckets; ++b) {
    if (measured[b] > 0) rows[b].frag_pct /= measured[b];
  }
  return rows;
}

// GPU milli held over [start, end), time-weighted, as a percentage of `gpu_milli`.
double MeanAllocation(const QueueSimResult& r, int64_t start, int64_t end, int64_t gpu_milli) {
  double held = 0;
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const int64_t from = std::max(start, r.samples[i].t_us);
    const int64_t until = std::min(i + 1 < r.samples.size() ? r.samples[i + 1].t_us : end, end);
    if (until <= from) continue;
    held += static_cast<double>(r.samples[i].queues.at(kQueue).gpu_milli) *
            static_cast<double>(until - from);
  }
  return 100.0 * held / (static_cast<double>(gpu_milli) * static_cast<double>(end - start));
}

}  // namespace

absl::StatusOr<ReplayResult> RunReplay(const ReplayOptions& o) {
  if (!(o.speedup > 0)) return absl::InvalidArgumentError("--speedup: must be above 0");
  if (o.buckets < 1 || o.buckets > 1000) {
    return absl::InvalidArgumentError("--buckets: must be 1-1000");
  }
  if (o.cycle_s < 1) return absl::InvalidArgumentError("--cycle-s: must be at least 1");
  if (!(o.node_fraction > 0 && o.node_fraction <= 1)) {
    return absl::InvalidArgumentError("--node-fraction: must be in (0, 1]");
  }
  if (auto policy = MakePolicy(o.policy, {}); !policy.ok()) return policy.status();
  const auto began = std::chrono::steady_clock::now();
  static const GpuCatalog kCatalog = GpuCatalog::BuiltIn();
  auto trace_nodes = ReadNodeList(o.nodes_path);
  if (!trace_nodes.ok()) return trace_nodes.status();
  const size_t keep = std::max<size_t>(
      1, static_cast<size_t>(o.node_fraction * static_cast<double>(trace_nodes->size())));
  if (keep < trace_nodes->size()) trace_nodes->resize(keep);
  auto pods = ReadPodList(o.pods_path);
  if (!pods.ok()) return pods.status();
  auto nodes = NodesFromTrace(*trace_nodes, kCatalog);
  if (!nodes.ok()) return nodes.status();
  auto observed = ObservedWorkload(*pods, kCatalog);
  if (!observed.ok()) return observed.status();
  Cluster cluster(&kCatalog);
  for (const Node& n : *nodes) cluster.AddNode(n);
  ReplayResult result;
  result.policy = o.policy;
  result.speedup = o.speedup;
  result.nodes = static_cast<int64_t>(cluster.size());
  result.gpus = cluster.total_gpus();
  const int64_t gpu_milli = result.gpus * 1000;

  std::vector<QueueSimJob> jobs;
  std::map<int64_t, double> asked;  // job -> GPUs asked (shares as fractions)
  int64_t first = INT64_MAX, last = 0;
  for (const TracePod& pod : *pods) {
    if (pod.deletion_s <= pod.creation_s) continue;  // never ran: no lifetime to replay
    auto request = RequestFromPod(pod, kCatalog);
    if (!request.ok()) return request.status();
    QueueSimJob job;
    job.id = static_cast<int64_t>(jobs.size()) + 1;
    job.queue = kQueue;
    job.preemptible = false;
    job.submitted_us = static_cast<int64_t>(static_cast<double>(pod.creation_s) / o.speedup *
                                            static_cast<double>(kSecond));
    job.duration_us = (pod.deletion_s - pod.creation_s) * kSecond;
    job.request = *request;
    asked[job.id] = static_cast<double>(pod.num_gpu * pod.gpu_milli) / 1000.0;
    result.gpu_jobs += pod.num_gpu > 0;
    first = std::min(first, job.submitted_us);
    last = std::max(last, job.submitted_us);
    jobs.push_back(std::move(job));
  }
  result.jobs = static_cast<int64_t>(jobs.size());
  if (jobs.empty()) return absl::InvalidArgumentError(o.pods_path + ": no pod with a lifetime");

  FragProbe frag(TypicalClasses(*observed, 0.95), gpu_milli, first, last, o.fragmentation_points);
  QueueSimOptions so;
  so.cycle_us = o.cycle_s * kSecond;
  so.policy = o.policy;
  so.policy_options = PolicyOptions{*observed};
  so.observe = [&frag](int64_t now, const Cluster& c) { frag.Observe(now, c); };
  QueueSim sim(std::move(cluster), {WholeCluster(*trace_nodes, gpu_milli)}, so);
  std::map<int64_t, int64_t> submitted;
  for (QueueSimJob& job : jobs) {
    submitted[job.id] = job.submitted_us;
    sim.Add(std::move(job));
  }
  const QueueSimResult r = sim.Run();
  result.cycles = r.cycles;
  std::vector<double> waits;
  for (const auto& [id, at] : submitted) {
    auto o_it = r.jobs.find(id);
    if (o_it == r.jobs.end() || o_it->second.first_start_us < 0) {
      ++result.never_placed;
      continue;
    }
    const double wait = static_cast<double>(o_it->second.first_start_us - at) / kSecond;
    waits.push_back(wait);
    result.gpu_hours_waited += wait * asked[id] / 3600.0;
  }
  result.placed = static_cast<int64_t>(waits.size());
  result.wait_p50_s = Percentile(waits, 0.50);
  result.wait_p95_s = Percentile(waits, 0.95);
  result.wait_p99_s = Percentile(waits, 0.99);
  result.wait_max_s = Percentile(waits, 1.0);
  const int64_t end = std::max(r.end_us, first + 1);
  result.span_s = (end - first) / kSecond;
  // Over the arrivals: after the last one the cluster only drains, for as long as the longest
  // lifetime in the trace (months), which would thin every mean out to nothing.
  const int64_t window = last > first ? last : end;
  result.window_s = (window - first) / kSecond;
  result.rows = Rows(r, frag, first, window, o.buckets, gpu_milli);
  result.alloc_pct = MeanAllocation(r, first, window, gpu_milli);
  for (const QueueSimSample& s : r.samples) {
    result.peak_queue = std::max<double>(result.peak_queue, s.queues.at(kQueue).pending);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return result;
}

nlohmann::json ReplayResult::ToJson() const {
  nlohmann::json rows_json = nlohmann::json::array();
  for (const ReplayRow& r : rows) {
    rows_json.push_back({{"from_s", r.from_s},
                         {"to_s", r.to_s},
                         {"alloc_pct", r.alloc_pct},
                         {"frag_pct", r.frag_pct},
                         {"queue_len", r.queue_len},
                         {"running_end", r.running_end}});
  }
  return {{"policy", policy},
          {"speedup", speedup},
          {"nodes", nodes},
          {"gpus", gpus},
          {"jobs", jobs},
          {"gpu_jobs", gpu_jobs},
          {"placed", placed},
          {"never_placed", never_placed},
          {"wait_s",
           {{"p50", wait_p50_s}, {"p95", wait_p95_s}, {"p99", wait_p99_s}, {"max", wait_max_s}}},
          {"gpu_hours_waited", gpu_hours_waited},
          {"alloc_pct", alloc_pct},
          {"peak_queue", peak_queue},
          {"cycles", cycles},
          {"span_s", span_s},
          {"window_s", window_s},
          {"seconds", seconds},
          {"rows", rows_json}};
}

void ReplayResult::PrintTable(std::ostream& out) const {
  out << absl::StrFormat(
      "policy %s, arrivals x%g: %d nodes, %d GPUs; %d jobs (%d with GPUs), %d placed, %d never "
      "placed\nwait p50 %.0f s, p95 %.0f s, p99 %.0f s, max %.0f s; %.1f GPU-hours waited; GPU "
      "allocation %.1f%% (time-weighted over the %.1f h of arrivals), peak queue %.0f; %d cycles "
      "over %.1f h simulated in %.1f s\n\n",
      policy, speedup, nodes, gpus, jobs, gpu_jobs, placed, never_placed, wait_p50_s, wait_p95_s,
      wait_p99_s, wait_max_s, gpu_hours_waited, alloc_pct, static_cast<double>(window_s) / 3600,
      peak_queue, cycles, static_cast<double>(span_s) / 3600, seconds);
  out << absl::StrFormat("%-10s %-10s %9s %9s %10s %8s\n", "FROM_H", "TO_H", "GPU_ALLOC", "FRAG",
                         "QUEUE_LEN", "RUNNING");
  for (const ReplayRow& r : rows) {
    out << absl::StrFormat("%-10.1f %-10.1f %8.1f%% %8.1f%% %10.1f %8d\n",
                           static_cast<double>(r.from_s) / 3600, static_cast<double>(r.to_s) / 3600,
                           r.alloc_pct, r.frag_pct, r.queue_len, r.running_end);
  }
}

}  // namespace carve::sim
