#include "runtime/poc/poc_probe_jobs.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace carve::poc {

using json = nlohmann::json;

json ProbeCommand(const Options& options, const std::vector<std::string>& args) {
  json command = json::array({options.probe, "probe"});
  for (const std::string& a : args) command.push_back(a);
  return command;
}

json ProbeSpec(const Options& options, const std::string& model, const std::string& name,
               const Share& share, const std::vector<std::string>& args) {
  return {{"name", name},
          {"kind", "batch"},
          {"isolation", "best-effort"},
          {"command", ProbeCommand(options, args)},
          {"resources",
           {{"mode", "shared"},
            {"gpu_model", model},
            {"gpu_compute", absl::StrCat(share.compute_pct, "%")},
            {"gpu_memory", absl::StrCat(share.gpu_memory_mib, "Mi")},
            {"cpu", absl::StrCat(share.cpu_milli, "m")},
            {"memory", absl::StrCat(share.memory_mib, "Mi")}}}};
}

json WholeGpuSpec(const Options& options, const std::string& name, const std::string& model,
                  int gpus, const std::vector<std::string>& args) {
  json resources = {
      {"gpus", gpus}, {"cpu", "100m"}, {"memory", absl::StrCat(options.job_memory_mib, "Mi")}};
  if (!model.empty()) resources["gpu_model"] = model;
  return {{"name", name}, {"command", ProbeCommand(options, args)}, {"resources", resources}};
}

std::vector<WholeGpuNode> WholeGpuNodes(const json& nodes) {
  std::vector<WholeGpuNode> out;
  for (const json& n : nodes) {
    if (n.value("state", "") != "ready" || !n.value("cordoned_by", "").empty()) continue;
    std::map<std::string, int> models;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("mode", "") == "exclusive" && g.value("health", "") == "healthy") {
        ++models[g.value("model", "")];
      }
    }
    for (const auto& [model, count] : models) {
      out.push_back({n.value("name", ""), model, count, n.value("replicas", 0) == 0});
    }
  }
  return out;
}

std::string PlacementOf(const json& job, size_t replica) {
  const json replicas = job.value("replicas", json::array());
  if (replica >= replicas.size()) return "";
  const json& r = replicas[replica];
  const json grants = r.value("grants", json::array());
  if (grants.empty()) return "";
  return absl::StrCat(r.value("node", ""), "/gpu ", grants[0].value("device", -1));
}

absl::StatusOr<std::vector<SharedGpu>> FindSharedGpus(Cluster& cluster, Record& record) {
  auto nodes = cluster.Nodes();
  if (!nodes.ok()) return nodes.status();
  auto busy = cluster.BusyGpus();
  if (!busy.ok()) return busy.status();
  std::vector<SharedGpu> gpus = SharedGpus(*nodes, cluster.options().gpu_model, *busy);
  record.observed["shared_gpus"] = static_cast<int64_t>(gpus.size());
  if (gpus.empty()) {
    record.verdict = Verdict::kInconclusive;
    record.verdict_reason =
        cluster.options().gpu_model.empty()
            ? "no shared GPU in the cluster takes work (ready, healthy, available)"
            : absl::StrCat("no shared ", cluster.options().gpu_model,
                           " takes work (ready, healthy, available)");
  }
  return gpus;
}

absl::StatusOr<int64_t> SoloRate(Cluster& cluster, Record& record, const std::string& model,
                                 const Share& share) {
  json spec = ProbeSpec(cluster.options(), model, "poc-solo", share,
                        {"--seconds", std::to_string(cluster.options().seconds)});
  auto id = cluster.Submit(spec, record);
  if (!id.ok()) return id.status();
  auto done = cluster.WaitFinal(*id);
  if (!done.ok()) return done.status();
  Cluster::NoteNodes(*done, record);
  auto log = cluster.Probe(*id);
  if (!log.ok()) return log.status();
  if (done->value("state", "") != "succeeded" || !log->per_second || *log->per_second <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("the solo run (job ", *id, ") ended ",
                                                      done->value("state", ""), ": ",
                                                      done->value("reason", "")));
  }
  record.observed["solo_rate"] = *log->per_second;
  record.observed["compute"] = log->compute;  // what the rates count (poc_report.cc)
  return *log->per_second;
}

json Chart(const std::string& title, const std::vector<std::string>& labels,
           const std::string& series, const std::vector<double>& values) {
  return {{"title", title},
          {"labels", labels},
          {"series", json::array({{{"label", series}, {"values", values}}})}};
}

std::string Text(const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); }

int64_t GiBOf(int64_t mib, int64_t divisor) {
  return std::max<int64_t>(1, mib / divisor / 1024) * 1024;
}

}  // namespace carve::poc
