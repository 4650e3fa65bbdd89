// `carve show JOB`: one job's record as a page a person reads (`-o yaml|json`: the record itself).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client_common.h"

namespace carve::app {

namespace {

using json = nlohmann::json;

int64_t Us(const json& j, const char* key) {
  const json v = j.value(key, json());
  return v.is_number_integer() ? v.get<int64_t>() : 0;
}

// "1h2m", "3m5s", "450ms".
std::string Took(int64_t us) {
  if (us < 0) return "-";
  if (us < 1'000'000) return absl::StrCat(us / 1000, "ms");
  return absl::FormatDuration(absl::Seconds(us / 1'000'000));
}

std::string Resources(const json& spec) {
  const json r = spec.value("resources", json::object());
  const std::string mode = r.value("mode", "exclusive");
  std::string gpus;
  if (mode == "shared") {
    gpus = absl::StrCat("a ", Text(r, "gpu_compute"), " share of one GPU",
                        r.contains("gpu_memory") ? " capped at " + Text(r, "gpu_memory") : "");
  } else if (mode == "partition") {
    gpus = absl::StrCat(std::max(r.value("gpus", 1), 1), " MIG ", Text(r, "profile"));
  } else {
    gpus = r.value("gpus", 0) == 0 ? "no GPU" : absl::StrCat(r.value("gpus", 0), " whole GPU(s)");
  }
  std::vector<std::string> models;
  for (const json& m : r.value("gpu_model", json::array())) models.push_back(m.get<std::string>());
  if (!models.empty()) gpus += " (" + absl::StrJoin(models, " or ") + ")";
  return absl::StrCat(gpus, ", ", r.value("cpu", "1"), " CPU, ", r.value("memory", "1Gi"),
                      " memory");
}

std::string Grants(const json& replica) {
  std::vector<std::string> whole, parts;
  for (const json& g : replica.value("grants", json::array())) {
    if (g.contains("profile")) {
      parts.push_back(absl::StrCat("GPU ", Us(g, "device"), " MIG ", Text(g, "profile"),
                                   " at slice ", Us(g, "start")));
    } else if (Us(g, "compute_milli") < 1000) {
      parts.push_back(absl::StrCat("GPU ", Us(g, "device"), " share ", Us(g, "compute_milli"),
                                   "m, ", Us(g, "memory_mib"), " MiB"));
    } else {
      whole.push_back(absl::StrCat(Us(g, "device")));
    }
  }
  if (!whole.empty()) {
    parts.insert(parts.begin(),
                 absl::StrCat(whole.size() == 1 ? "GPU " : "GPUs ", absl::StrJoin(whole, ",")));
  }
  return parts.empty() ? "no GPU" : absl::StrJoin(parts, "; ");
}

void Row(const char* label, const std::string& value) {
  if (!value.empty()) std::cout << "  " << absl::StrFormat("%-11s", label) << value << "\n";
}

void Replicas(const json& job) {
  const json reps = job.value("replicas", json::array());
  if (reps.empty()) return;
  std::cout << "\nReplicas\n";
  for (const json& r : reps) {
    std::string end = r.contains("exit_code") && !r["exit_code"].is_null()
                          ? absl::StrCat("exit ", Text(r, "exit_code"))
                      : r.contains("signal") && !r["signal"].is_null()
                          ? absl::StrCat("signal ", Text(r, "signal"))
                          : "";
    std::cout << "  " << Us(r, "slot") << ": " << Text(r, "state") << " on " << Text(r, "node")
              << ", " << Grants(r) << (Us(r, "pid") > 0 ? absl::StrCat(", pid ", Us(r, "pid")) : "")
              << (end.empty() ? "" : ", " + end) << "\n";
    Row("  enforced", Text(r, "enforcement"));
    const json v = r.value("versions", json::object());
    if (!v.empty()) {
      Row("  versions", absl::StrCat("carve ", Text(v, "carve"), ", driver ", Text(v, "driver"),
                                     ", CUDA ", Text(v, "cuda_driver"), ", ", Text(v, "kernel")));
    }
    const json reclaim = r.value("reclaim", json());
    if (reclaim.is_object() && reclaim.value("used", json()).is_object()) {
      const json used = reclaim["used"];
      std::vector<std::string> parts;
      if (used.contains("cpu_seconds")) {
        parts.push_back(absl::StrFormat("%.2f s CPU", used["cpu_seconds"].get<double>()));
      }
      if (used.contains("peak_memory_mib")) {
        parts.push_back(absl::StrCat("peak memory ", Text(used, "peak_memory_mib"), " MiB"));
      }
      Row("  used", absl::StrCat(parts.empty() ? "" : absl::StrJoin(parts, ", ") + " (",
                                 Text(used, "source"), parts.empty() ? "" : ")"));
      const json device = used.value("device", json());
      if (device.is_object()) {
        std::vector<std::string> on;
        if (device.contains("peak_memory_mib")) {
          on.push_back(absl::StrCat("peak ", Text(device, "peak_memory_mib"), " MiB"));
        }
        if (device.contains("busy_seconds")) {
          on.push_back(absl::StrFormat("busy %.1f s", device["busy_seconds"].get<double>()));
        }
        Row("  on GPU", absl::StrCat(on.empty() ? "" : absl::StrJoin(on, ", ") + " (",
                                     Text(device, "source"), on.empty() ? "" : ")"));
      }
    }
    if (reclaim.is_object()) {
      std::vector<std::string> failed;
      for (const json& c : reclaim.value("checks", json::array())) {
        if (!c.value("ok", false)) failed.push_back(Text(c, "name") + ": " + Text(c, "observed"));
      }
      Row("  reclaim",
          absl::StrCat(Text(reclaim, "status"), " at ", LocalTime(Us(reclaim, "time_us"), true),
                       " (", reclaim.value("checks", json::array()).size(), " checks",
                       failed.empty() ? ", all passed" : "; failed: " + absl::StrJoin(failed, "; "),
                       ")"));
    }
  }
}

void Attempts(const json& job) {
  const json attempts = job.value("attempts", json::array());
  if (attempts.empty()) return;
  std::cout << "\nEarlier attempts\n";
  for (const json& a : attempts) {
    std::cout << "  " << Us(a, "attempt") << ": on " << Text(a, "node") << ", "
              << LocalTime(Us(a, "scheduled_us"), true) << " to "
              << LocalTime(Us(a, "ended_us"), true) << ": " << Text(a, "cause") << "\n";
  }
}

void Preemption(const json& job) {
  if (Us(job, "preempted_by") == 0 && job.value("victims", json::array()).empty()) return;
  std::cout << "\nPreemption\n";
  if (Us(job, "preempted_by") != 0) {
    Row("by job", absl::StrCat(Us(job, "preempted_by"), ": ", Text(job, "preemption")));
  }
  for (const json& v : job.value("victims", json::array())) {
    Row("stopped", absl::StrCat("job ", Us(v, "job"), ": ", Text(v, "reason")));
  }
}

}  // namespace

void PrintJobPage(const json& job) {
  const json spec = job.value("spec", json::object());
  std::cout << "job " << Us(job, "id") << " \"" << Text(job, "name") << "\" " << Text(job, "state")
            << ": " << Text(job, "reason") << "\n";
  Row("submitted",
      absl::StrCat(LocalTime(Us(job, "created_us"), true), " by ", Text(job, "submitted_by")));
  Row("owner", absl::StrCat("tenant ", Text(spec, "tenant"), ", project ", Text(spec, "project"),
                            ", queue ", Text(spec, "queue")));
  Row("kind", absl::StrCat(Text(spec, "kind"), ", priority ", Text(spec, "priority"), " (",
                           Text(spec, "priority_class"), "), ",
                           spec.value("preemptible", true) ? "preemptible" : "not preemptible"));
  Row("asks",
      absl::StrCat(spec.value("replicas", 1), " replica(s), each ", Resources(spec),
                   spec.contains("max_runtime") ? "; at most " + Text(spec, "max_runtime") : ""));
  std::vector<std::string> command;
  for (const json& w : spec.value("command", json::array())) {
    command.push_back(w.is_string() ? w.get<std::string>() : w.dump());
  }
  Row("command", absl::StrJoin(command, " "));

  std::cout << "\nTimeline\n";
  const int64_t created = Us(job, "created_us"), scheduled = Us(job, "scheduled_us");
  const int64_t started = Us(job, "started_us"), ended = Us(job, "ended_us");
  if (scheduled > 0) {
    Row("scheduled",
        absl::StrCat(LocalTime(scheduled, true), " (waited ", Took(scheduled - created), ")"));
    Row("waited for", Text(job, "waited_for"));
  } else if (Text(job, "state") == "queued") {
    Row("waiting", absl::StrCat(Took(NowUs() - created), " so far: ",
                                Text(job, "explanation").empty() ? Text(job, "reason")
                                                                 : Text(job, "explanation")));
  }
  Row("started", started > 0 ? LocalTime(started, true) : "");
  if (ended > 0) {
    Row("ended",
        absl::StrCat(LocalTime(ended, true),
                     started > 0 ? absl::StrCat(" (ran ", Took(ended - started), ")") : ""));
  }
  if (Us(job, "attempt") > 0) Row("attempt", absl::StrCat(Us(job, "attempt"), " (0 is the first)"));
  Replicas(job);
  Attempts(job);
  Preemption(job);
  std::cout << "\nThe whole record: carve show " << Us(job, "id")
            << " -o yaml; its events: carve events --job " << Us(job, "id") << "\n";
}

}  // namespace carve::app
