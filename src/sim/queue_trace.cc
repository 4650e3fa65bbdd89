#include "sim/queue_trace.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"
#include "sim/queue_sim.h"
#include "sim/trace.h"
#include "sim/workload.h"

namespace carve::sim {
namespace {

constexpr int64_t kSecond = 1'000'000;

QueueSpec Queue(const std::string& name, int64_t gpu_milli) {
  QueueSpec q;
  q.name = name;
  q.cohort = "cluster";
  q.nominal["gpus"] = gpu_milli;
  q.nominal["gpu-share"] = gpu_milli;
  return q;
}

// Time-weighted means of each queue's GPUs over [from, to), from the per-cycle samples.
void FillRows(const QueueSimResult& r, int64_t start, int64_t end, int buckets,
              std::vector<QueueShareRow>& rows) {
  int64_t span = std::max<int64_t>(1, (end - start + buckets - 1) / buckets);
  for (int b = 0; b < buckets; ++b) {
    QueueShareRow row;
    row.from_s = (start + b * span) / kSecond;
    row.to_s = (start + (b + 1) * span) / kSecond;
    rows.push_back(row);
  }
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const QueueSimSample& s = r.samples[i];
    int64_t next = i + 1 < r.samples.size() ? r.samples[i + 1].t_us : end;
    next = std::min(next, end);
    for (int64_t t = s.t_us; t < next;) {
      int b = static_cast<int>(std::min<int64_t>(buckets - 1, (t - start) / span));
      int64_t bucket_end = std::min(next, start + (b + 1) * span);
      if (bucket_end <= t) bucket_end = next;  // the last bucket runs to the end
      double w = static_cast<double>(bucket_end - t) / static_cast<double>(span);
      rows[b].prod_gpus += w * static_cast<double>(s.queues.at("prod").gpu_milli) / 1000.0;
      rows[b].research_gpus += w * static_cast<double>(s.queues.at("research").gpu_milli) / 1000.0;
      rows[b].prod_pending = s.queues.at("prod").pending;
      rows[b].research_pending = s.queues.at("research").pending;
      t = bucket_end;
    }
  }
}

}  // namespace

absl::StatusOr<QueueTraceResult> RunQueueTrace(const QueueTraceOptions& options) {
  auto began = std::chrono::steady_clock::now();
  static const GpuCatalog kCatalog = GpuCatalog::BuiltIn();
  auto trace_nodes = ReadNodeList(options.nodes_path);
  if (!trace_nodes.ok()) return trace_nodes.status();
  auto pods = ReadPodList(options.pods_path);
  if (!pods.ok()) return pods.status();
  auto nodes = NodesFromTrace(*trace_nodes, kCatalog);
  if (!nodes.ok()) return nodes.status();
  std::vector<Node> gpu_nodes;
  for (Node& n : *nodes) {
    if (!n.devices.empty()) gpu_nodes.push_back(std::move(n));
  }
  size_t keep = std::max<size_t>(
      1, static_cast<size_t>(options.node_fraction * static_cast<double>(gpu_nodes.size())));
  Cluster cluster(&kCatalog);
  for (size_t i = 0; i < std::min(keep, gpu_nodes.size()); ++i) cluster.AddNode(gpu_nodes[i]);
  QueueTraceResult result;
  result.nodes = static_cast<int64_t>(cluster.size());
  result.gpus = static_cast<double>(cluster.total_gpus());
  int64_t total = cluster.total_gpus() * 1000;
  int64_t prod = static_cast<int64_t>(options.prod_share * static_cast<double>(total));
  result.prod_quota_gpus = static_cast<double>(prod) / 1000.0;
  result.research_quota_gpus = static_cast<double>(total - prod) / 1000.0;
  QueueSimOptions sim_options;
  sim_options.cycle_us = 10 * kSecond;
  sim_options.stop_delay_us = 30 * kSecond;
  sim_options.policy = options.policy;
  sim_options.cycle.aging.interval_us = 3600 * kSecond;  // and a cycle at least hourly
  QueueSim sim(std::move(cluster), {Queue("prod", prod), Queue("research", total - prod)},
               sim_options);
  int64_t start = INT64_MAX, end = 0, id = 0;
  std::map<int64_t, std::pair<bool, int64_t>> submitted;  // job -> (prod, submitted_us)
  for (const TracePod& pod : *pods) {
    if (pod.num_gpu == 0 || pod.deletion_s <= pod.creation_s) continue;  // GPU work only
    auto request = RequestFromPod(pod, kCatalog);
    if (!request.ok()) return request.status();
    QueueSimJob job;
    job.id = ++id;
    bool is_prod = pod.qos == "LS";
    job.queue = is_prod ? "prod" : "research";
    job.preemptible = true;  // what a queue borrows, its owner may take back
    job.submitted_us =
        static_cast<int64_t>(static_cast<double>(pod.creation_s) / options.arrival_speedup) *
        kSecond;
    job.duration_us = (pod.deletion_s - pod.creation_s) * kSecond;
    job.request = *request;
    (is_prod ? result.prod_jobs : result.research_jobs)++;
    submitted[job.id] = {is_prod, job.submitted_us};
    start = std::min(start, job.submitted_us);
    end = std::max(end, job.submitted_us);
    sim.Add(std::move(job));
  }
  QueueSimResult r = sim.Run();
  result.cycles = r.cycles;
  result.preemptions = static_cast<int64_t>(r.preemptions.size());
  for (const QueueSimPreemption& p : r.preemptions) {
    result.reclaims += p.preemption.kind == "reclaim";
  }
  double wait[2] = {0, 0};
  int64_t started[2] = {0, 0};
  for (const auto& [job, sub] : submitted) {
    auto o = r.jobs.find(job);
    if (o == r.jobs.end() || o->second.first_start_us < 0) continue;
    int k = sub.first ? 0 : 1;
    wait[k] += static_cast<double>(o->second.first_start_us - sub.second) / kSecond;
    ++started[k];
  }
  result.never_started = result.prod_jobs + result.research_jobs - started[0] - started[1];
  result.prod_mean_wait_s = started[0] ? wait[0] / static_cast<double>(started[0]) : 0;
  result.research_mean_wait_s = started[1] ? wait[1] / static_cast<double>(started[1]) : 0;
  FillRows(r, start, end, options.buckets, result.rows);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return result;
}

nlohmann::json QueueTraceResult::ToJson() const {
  nlohmann::json rows_json = nlohmann::json::array();
  for (const QueueShareRow& r : rows) {
    rows_json.push_back({{"from_s", r.from_s},
                         {"to_s", r.to_s},
                         {"prod_gpus", r.prod_gpus},
                         {"research_gpus", r.research_gpus},
                         {"prod_pending", r.prod_pending},
                         {"research_pending", r.research_pending}});
  }
  return {{"nodes", nodes},
          {"gpus", gpus},
          {"quota_gpus", {{"prod", prod_quota_gpus}, {"research", research_quota_gpus}}},
          {"jobs", {{"prod", prod_jobs}, {"research", research_jobs}}},
          {"mean_wait_s", {{"prod", prod_mean_wait_s}, {"research", research_mean_wait_s}}},
          {"preemptions", preemptions},
          {"reclaims", reclaims},
          {"never_started", never_started},
          {"cycles", cycles},
          {"seconds", seconds},
          {"rows", rows_json}};
}

void QueueTraceResult::PrintTable(std::ostream& out) const {
  out << absl::StrFormat(
      "%d nodes, %.0f GPUs; quota prod %.1f GPUs, research %.1f GPUs (one cohort)\n"
      "%d prod jobs (mean wait %.0f s), %d research jobs (mean wait %.0f s); %d preemptions "
      "(%d reclaims), %d never started; %d cycles in %.1f s\n\n",
      nodes, gpus, prod_quota_gpus, research_quota_gpus, prod_jobs, prod_mean_wait_s, research_jobs,
      research_mean_wait_s, preemptions, reclaims, never_started, cycles, seconds);
  out << absl::StrFormat("%-10s %-10s %10s %8s %8s %12s %8s %8s\n", "FROM_H", "TO_H", "PROD_GPUS",
                         "OF_QUOTA", "PENDING", "RESEARCH_GPUS", "OF_QUOTA", "PENDING");
  for (const QueueShareRow& r : rows) {
    out << absl::StrFormat("%-10.1f %-10.1f %10.1f %7.0f%% %8d %12.1f %7.0f%% %8d\n",
                           static_cast<double>(r.from_s) / 3600, static_cast<double>(r.to_s) / 3600,
                           r.prod_gpus, 100 * r.prod_gpus / prod_quota_gpus, r.prod_pending,
                           r.research_gpus, 100 * r.research_gpus / research_quota_gpus,
                           r.research_pending);
  }
}

}  // namespace carve::sim
