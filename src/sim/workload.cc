#include "sim/workload.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve::sim {

absl::StatusOr<std::vector<Node>> NodesFromTrace(const std::vector<TraceNode>& nodes,
                                                 const GpuCatalog& catalog) {
  std::vector<Node> out;
  out.reserve(nodes.size());
  for (const TraceNode& t : nodes) {
    Node n;
    n.name = t.name;
    n.capacity.cpu = CpuMilli(t.cpu_milli);
    n.capacity.memory = MemMib(t.memory_mib);
    for (const auto& [name, amount] : t.extra) n.capacity.extra.push_back({name, amount});
    if (t.gpus > 0) {
      auto model = catalog.Find(t.model);
      if (!model.ok())
        return absl::InvalidArgumentError(absl::StrCat(t.name, ": ", model.status().message()));
      n.labels["gpu-model"] = t.model;
      for (int i = 0; i < t.gpus; ++i) {
        Device d;
        d.model = *model;
        d.mode = DeliveryMode::kShared;
        n.devices.push_back(d);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

absl::StatusOr<JobRequest> RequestFromPod(const TracePod& pod, const GpuCatalog& catalog) {
  JobRequest job;
  ReplicaRequest& r = job.replica;
  r.resources.cpu = CpuMilli(pod.cpu_milli);
  r.resources.memory = MemMib(pod.memory_mib);
  for (const auto& [name, amount] : pod.extra) r.resources.extra.push_back({name, amount});
  r.app = pod.app;
  r.max_per_node = pod.max_per_node;
  if (pod.num_gpu == 0) {
    r.gpu = {DeliveryMode::kExclusive, 0, {}, {}, ""};
  } else if (pod.gpu_milli < 1000) {
    r.gpu = {DeliveryMode::kShared, 1, GpuMilli(pod.gpu_milli), {}, ""};
  } else {
    r.gpu = {DeliveryMode::kExclusive, pod.num_gpu, kWholeGpu, {}, ""};
  }
  for (const std::string& spec : pod.gpu_spec) {
    auto model = catalog.Find(spec);
    if (!model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(pod.name, ": gpu_spec: ", model.status().message()));
    }
    if (std::find(r.allowed_models.begin(), r.allowed_models.end(), *model) ==
        r.allowed_models.end()) {
      r.allowed_models.push_back(*model);
    }
  }
  return job;
}

absl::StatusOr<Workload> ObservedWorkload(const std::vector<TracePod>& pods,
                                          const GpuCatalog& catalog) {
  using Key = std::tuple<int64_t, int64_t, int, std::string>;  // cpu, milli, num, spec
  std::map<Key, int64_t> counts;
  std::map<Key, const TracePod*> example;
  for (const TracePod& p : pods) {
    Key key{p.cpu_milli, p.gpu_milli, p.num_gpu, absl::StrJoin(p.gpu_spec, "|")};
    ++counts[key];
    example.emplace(key, &p);
  }
  std::vector<std::pair<int64_t, Key>> ranked;
  for (const auto& [key, count] : counts) ranked.push_back({count, key});
  // Most frequent first; ties by larger CPU, milli, count, spec (the paper simulator's order).
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a > b; });
  Workload workload;
  for (const auto& [count, key] : ranked) {
    auto request = RequestFromPod(*example[key], catalog);
    if (!request.ok()) return request.status();
    // A class is a GPU shape: which pod of it was the example (its app, extra resources) is not.
    request->replica.resources.extra.clear();
    request->replica.app.clear();
    request->replica.max_per_node = 0;
    workload.push_back(
        {request->replica, static_cast<double>(count) / static_cast<double>(pods.size())});
  }
  return workload;
}

uint64_t UniformIndex(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % n;
  uint64_t v;
  do {
    v = rng();
  } while (v >= limit);
  return v % n;
}

}  // namespace carve::sim
