#include "runtime/poc/poc_compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/gpu_catalog.h"
#include "runtime/poc/poc_cluster.h"
#include "runtime/poc/poc_html.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/profile.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

// How a job's GPU need is asked for in one mode, or why the mode cannot run here.
struct ModeRequest {
  std::string skipped;  // non-empty: this cluster has no GPU for the mode
  std::string how;      // "L40S share 25% / 11264 MiB"
  json resources;       // the job spec's resources, without cpu and memory
};

// The smallest MIG profile of `model` with at least `gpu` of its compute slices.
std::string ProfileFor(const std::string& model, double gpu) {
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  auto id = catalog.Find(model);
  if (!id.ok()) return "";
  const GpuModel& m = catalog.model(*id);
  const int slices = std::max(1, static_cast<int>(std::ceil(gpu * m.mig_compute_slices - 1e-9)));
  std::string best;
  int fewest = 1 << 30;
  for (const MigProfile& p : m.mig_profiles) {
    if (!p.media_extensions && p.compute_slices >= slices && p.compute_slices < fewest) {
      best = p.name;
      fewest = p.compute_slices;
    }
  }
  return best;
}

// The model of the first GPU in `mode` that takes work (ready, uncordoned node; healthy,
// available GPU), "" when none does.
std::string ModelIn(const json& nodes, const std::string& mode) {
  for (const json& n : nodes) {
    if (n.value("state", "") != "ready" || !n.value("cordoned_by", "").empty()) continue;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("mode", "") == mode && g.value("health", "") == "healthy" &&
          g.value("state", "") == "available") {
        return g.value("model", "");
      }
    }
  }
  return "";
}

ModeRequest RequestFor(const std::string& mode, double gpu, const json& nodes) {
  if (mode == "exclusive") {
    const std::string model = ModelIn(nodes, "exclusive");
    if (model.empty()) return {"no exclusive GPU takes work", "", json()};
    return {"", absl::StrCat("one whole ", model), {{"gpus", 1}, {"gpu_model", model}}};
  }
  if (mode == "shared") {
    std::vector<SharedGpu> shared = SharedGpus(nodes, "", {});
    if (shared.empty()) return {"no shared GPU takes work", "", json()};
    // A share is below one whole GPU: a whole-GPU job asks for 99% of it here.
    const int pct = std::clamp(static_cast<int>(std::lround(gpu * 100)), 1, 99);
    const int64_t mib = std::max<int64_t>(
        1024,
        static_cast<int64_t>(std::min(gpu, 0.99) * static_cast<double>(shared[0].memory_mib)));
    return {"",
            absl::StrCat(shared[0].model, " share ", pct, "% / ", mib, " MiB"),
            {{"mode", "shared"},
             {"gpu_model", shared[0].model},
             {"gpu_compute", absl::StrCat(pct, "%")},
             {"gpu_memory", absl::StrCat(mib, "Mi")}}};
  }
  const std::string model = ModelIn(nodes, "partition");
  const std::string profile = model.empty() ? "" : ProfileFor(model, gpu);
  if (profile.empty()) return {"no MIG GPU takes work", "", json()};
  return {"",
          absl::StrCat(model, " MIG ", profile),
          {{"mode", "partition"}, {"gpu_model", model}, {"profile", profile}}};
}

json Spec(const Options& o, const std::string& name, const json& resources, int64_t seconds) {
  json r = resources;
  r["cpu"] = "100m";
  r["memory"] = absl::StrCat(o.job_memory_mib, "Mi");
  return {{"name", name},
          {"isolation", "best-effort"},
          {"command", ProbeCommand(o, {"--seconds", std::to_string(seconds)})},
          {"resources", r}};
}

// Waits for `id` to end and returns its figures: wait, run, rate.
absl::StatusOr<json> Outcome(Cluster& c, int64_t id) {
  auto job = c.WaitFinal(id);
  if (!job.ok()) return job.status();
  auto log = c.Probe(id);
  if (!log.ok()) return log.status();
  const int64_t created = job->value("created_us", int64_t{0});
  const int64_t started = job->value("started_us", int64_t{0});
  const int64_t ended = job->value("ended_us", int64_t{0});
  return json{{"id", id},
              {"state", job->value("state", "")},
              {"on", PlacementOf(*job)},
              {"created_us", created},
              {"wait_s", started > 0 ? json((started - created) / 1e6) : json()},
              {"run_s", started > 0 && ended > 0 ? json((ended - started) / 1e6) : json()},
              {"ended_us", ended},
              {"rate", log->per_second.value_or(int64_t{0})}};
}

// `scratch` collects the jobs it submits, for the clean-up.
absl::StatusOr<json> RunMode(Cluster& c, const std::string& mode,
                             const std::vector<WorkloadJob>& work, const json& nodes,
                             Record& scratch) {
  json out = {{"mode", mode}, {"jobs", json::array()}, {"requests", json::object()}};
  std::map<std::string, int64_t> solo;
  for (const WorkloadJob& w : work) {  // one solo run per kind: its rate alone in this mode
    ModeRequest req = RequestFor(mode, w.gpu, nodes);
    if (!req.skipped.empty()) return json{{"mode", mode}, {"skipped", req.skipped}};
    out["requests"][w.name] = req.how;
    auto id = c.Submit(
        Spec(c.options(), absl::StrCat("cmp-solo-", w.name), req.resources, w.seconds), scratch);
    if (!id.ok()) return id.status();
    auto o = Outcome(c, *id);
    if (!o.ok()) return o.status();
    solo[w.name] = (*o)["rate"].get<int64_t>();
    if (solo[w.name] <= 0 || (*o)["state"] != "succeeded") {
      return absl::FailedPreconditionError(
          absl::StrCat("the solo run of ", w.name, " (job ", *id, ") ended ",
                       (*o)["state"].get<std::string>(), " with no compute rate"));
    }
  }
  std::vector<std::pair<std::string, int64_t>> ids;
  for (const WorkloadJob& w : work) {
    ModeRequest req = RequestFor(mode, w.gpu, nodes);
    for (int i = 0; i < w.count; ++i) {
      auto id = c.Submit(
          Spec(c.options(), absl::StrCat("cmp-", w.name, "-", i), req.resources, w.seconds),
          scratch);
      if (!id.ok()) return id.status();
      ids.push_back({w.name, *id});
    }
  }
  // Times on the server's clock: the first submission, the last end.
  int64_t start = 0;
  int64_t last = 0;
  int failed = 0;
  std::vector<double> waits, slowdowns;
  for (const auto& [name, id] : ids) {
    auto o = Outcome(c, id);
    if (!o.ok()) return o.status();
    const int64_t rate = (*o)["rate"].get<int64_t>();
    (*o)["kind"] = name;
    (*o)["slowdown"] = rate > 0 ? json(static_cast<double>(solo[name]) / rate) : json();
    last = std::max(last, (*o)["ended_us"].get<int64_t>());
    const int64_t created = (*o)["created_us"].get<int64_t>();
    start = start == 0 ? created : std::min(start, created);
    failed += (*o)["state"] != "succeeded" || rate <= 0;  // a probe that printed no rate failed
    if ((*o)["wait_s"].is_number()) waits.push_back((*o)["wait_s"]);
    if ((*o)["slowdown"].is_number()) slowdowns.push_back((*o)["slowdown"]);
    out["jobs"].push_back(*o);
  }
  auto rows = c.Get(absl::StrCat("/api/v1/usage/records?since_us=", start));
  if (!rows.ok()) return rows.status();
  double gpu_seconds = 0;
  for (const json& row : *rows) {
    for (const auto& [name, id] : ids) {
      if (row.value("job", int64_t{0}) == id) gpu_seconds += row.value("gpu_seconds", 0.0);
    }
  }
  const double makespan = last > start ? (last - start) / 1e6 : 0.0;
  double mean = 0;
  for (double s : slowdowns) mean += s / static_cast<double>(slowdowns.size());
  out["makespan_s"] = makespan;
  out["throughput_per_min"] = makespan > 0 ? ids.size() * 60.0 / makespan : 0.0;
  out["wait_p50_s"] = NearestRank(waits, 0.5);
  out["wait_p95_s"] = NearestRank(waits, 0.95);
  out["gpu_seconds"] = gpu_seconds;
  out["mean_slowdown"] = slowdowns.empty() ? json() : json(mean);
  out["max_slowdown"] = NearestRank(slowdowns, 1.0);
  out["failed"] = failed;
  return out;
}

}  // namespace

// A number given as one or as text (YAML gives 0.25 as text); `fallback` when absent.
absl::StatusOr<double> Number(const json& j, const char* key, double fallback,
                              const std::string& at) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  double d = 0;
  if (v.is_number()) return v.get<double>();
  if (v.is_string() && absl::SimpleAtod(v.get<std::string>(), &d)) return d;
  return absl::InvalidArgumentError(absl::StrCat(at, ".", key, ": a number"));
}

absl::StatusOr<std::vector<WorkloadJob>> ParseWorkload(const json& doc) {
  if (!doc.is_object() || !doc.contains("jobs") || !doc["jobs"].is_array() || doc["jobs"].empty()) {
    return absl::InvalidArgumentError("a workload is {\"jobs\": [{name, count, seconds, gpu}]}");
  }
  std::vector<WorkloadJob> out;
  for (size_t i = 0; i < doc["jobs"].size(); ++i) {
    const json& j = doc["jobs"][i];
    const std::string at = absl::StrCat("jobs[", i, "]");
    if (!j.is_object() || !j.value("name", json()).is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".name: a string is required"));
    }
    auto count = Number(j, "count", 1, at);
    auto seconds = Number(j, "seconds", 3, at);
    auto gpu = Number(j, "gpu", 1, at);
    for (const auto* n : {&count, &seconds, &gpu}) {
      if (!n->ok()) return n->status();
    }
    if (*count < 1 || *count > 64 || *count != std::floor(*count)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".count: a whole number, 1 to 64"));
    }
    if (*seconds < 1 || *seconds > 3600 || *seconds != std::floor(*seconds)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".seconds: whole seconds, 1 to 3600"));
    }
    if (!(*gpu > 0 && *gpu <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".gpu: a share of one GPU, (0, 1]"));
    }
    for (const WorkloadJob& seen : out) {
      if (seen.name == j["name"]) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".name: \"", seen.name, "\" is given twice"));
      }
    }
    out.push_back({j["name"], static_cast<int>(*count), static_cast<int64_t>(*seconds), *gpu});
  }
  return out;
}

absl::StatusOr<json> Compare(ApiClient& api, const Options& options,
                             const std::vector<WorkloadJob>& jobs,
                             const std::vector<std::string>& modes, std::ostream& progress) {
  Cluster c(api, options, progress);
  json out = {{"modes", json::array()}};
  for (const WorkloadJob& w : jobs) {
    if (w.seconds + 60 > options.timeout_s) {
      return absl::InvalidArgumentError(
          absl::StrCat(w.name, ": ", w.seconds, " s of compute leaves no room in --timeout ",
                       options.timeout_s, " s (give at least ", w.seconds + 60, ")"));
    }
  }
  for (const std::string& mode : modes) {
    if (mode != "exclusive" && mode != "shared" && mode != "partition") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown mode \"", mode, "\": exclusive, shared or partition"));
    }
  }
  for (const std::string& mode : modes) {
    progress << mode << "\n" << std::flush;
    auto nodes = c.Nodes();
    if (!nodes.ok()) return nodes.status();
    Record scratch;
    auto result = RunMode(c, mode, jobs, *nodes, scratch);
    c.CleanUp(scratch);
    // A mode that could not finish says why; the others still count.
    out["modes"].push_back(
        result.ok() ? *result : json{{"mode", mode}, {"error", result.status().message()}});
    if (c.Interrupted()) break;
  }
  out["definitions"] = {
      {"makespan_s", "from the first submission of the mode's jobs to the last end"},
      {"throughput_per_min", "jobs per minute over the makespan"},
      {"wait_p50_s", "submission to start, nearest rank"},
      {"gpu_seconds", "GPUs held times seconds held, from the jobs' usage rows"},
      {"slowdown",
       "a job's compute rate alone (one solo run of its kind in that mode) over "
       "its rate in the mix; 1 is no slowdown"}};
  out["not_measured"] =
      "the probe computes on the CPU: slowdown is host-side contention under each "
      "mode's CPU limits, not GPU SM contention";
  return out;
}

std::string RenderCompare(const json& result) {
  std::string body =
      "<table id=\"compare\"><thead><tr><th>mode</th><th>requests</th><th>makespan s</th>"
      "<th>jobs/min</th><th>wait p50 / p95 s</th><th>GPU-seconds</th><th>slowdown mean / max</th>"
      "<th>failed</th></tr></thead><tbody>\n";
  std::vector<std::string> labels;
  std::vector<double> makespans, slowdowns;
  for (const json& m : result.value("modes", json::array())) {
    const std::string mode = m.value("mode", "");
    if (m.contains("skipped") || m.contains("error")) {
      const char* why = m.contains("error") ? "error" : "skipped";
      absl::StrAppend(&body, "<tr><td>", Escape(mode), "</td><td colspan=\"7\">",
                      m.contains("error") ? "could not finish: " : "skipped: ",
                      Escape(m.value(why, "")), "</td></tr>\n");
      continue;
    }
    absl::StrAppend(&body, "<tr><td>", Escape(mode), "</td><td>", Escape(Dump(m["requests"])),
                    "</td><td>", Fixed2(m["makespan_s"]), "</td><td>",
                    Fixed2(m["throughput_per_min"]), "</td><td>", Fixed2(m["wait_p50_s"]), " / ",
                    Fixed2(m["wait_p95_s"]), "</td><td>", Fixed2(m["gpu_seconds"]), "</td><td>",
                    Fixed2(m["mean_slowdown"]), " / ", Fixed2(m["max_slowdown"]), "</td><td>",
                    m.value("failed", 0), "</td></tr>\n");
    labels.push_back(mode);
    makespans.push_back(m.value("makespan_s", 0.0));
    slowdowns.push_back(m["mean_slowdown"].is_number() ? m["mean_slowdown"].get<double>() : 0.0);
  }
  body += "</tbody></table>\n";
  body += ChartFigure(Chart("Makespan per mode", labels, "seconds", makespans), 0);
  body += ChartFigure(Chart("Mean slowdown against solo runs", labels, "slowdown", slowdowns), 1);
  absl::StrAppend(&body, "<p>", Escape(result.value("not_measured", "")),
                  "</p>\n<details><summary>every job</summary><pre>", Escape(Dump(result, 2)),
                  "</pre></details>\n");
  return Page("Carve: one workload under each delivery mode", body);
}

}  // namespace carve::poc
