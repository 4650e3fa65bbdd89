#include "runtime/profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace carve {

using json = nlohmann::json;

namespace {

struct Group {
  std::set<int64_t> jobs;
  std::set<int64_t> failed;     // jobs whose last attempt ended failed
  std::set<int64_t> preempted;  // jobs with an attempt ended by preemption
  int64_t attempts = 0;
  std::vector<double> waits;  // first attempts: queued to started, seconds
  std::vector<double> runs;   // every attempt: started to ended, seconds
  std::map<std::string, int64_t> sizes, modes, models;
  double gpu_hours = 0;
};

double Seconds(const json& row, const char* from, const char* to) {
  return static_cast<double>(row.value(to, int64_t{0}) - row.value(from, int64_t{0})) / 1e6;
}

void Add(Group& g, const json& row) {
  const int64_t job = row.value("job", int64_t{0});
  g.jobs.insert(job);
  ++g.attempts;
  if (row.value("attempt", 0) == 0 && row.value("started_us", int64_t{0}) > 0) {
    g.waits.push_back(Seconds(row, "queued_us", "started_us"));
  }
  if (row.value("ended_us", int64_t{0}) > 0)
    g.runs.push_back(Seconds(row, "started_us", "ended_us"));
  const std::string end = row.value("end", "");
  if (end == "failed") g.failed.insert(job);
  if (end == "preempted" ||
      (end == "retried" && row.value("end_reason", "").find("preempt") != std::string::npos)) {
    g.preempted.insert(job);
  }
  const json devices = row.value("devices", json::array());
  double gpus = 0;
  for (const json& d : devices) {
    gpus += d.value("gpus", 0.0);
    ++g.models[d.value("model", "")];
  }
  const int replicas = std::max(1, row.value("replicas", 1));
  ++g.sizes[absl::StrFormat("%g", gpus / replicas)];
  ++g.modes[row.value("mode", "")];
  g.gpu_hours += gpus * Seconds(row, "held_from_us", "held_to_us") / 3600.0;
}

json Rate(size_t part, size_t whole) {
  return whole == 0 ? json() : json(static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

json NearestRank(std::vector<double> v, double p) {
  if (v.empty()) return json();
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

json WorkloadProfile(const json& rows) {
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const json& row : rows) {
    if (!row.is_object()) continue;
    Add(groups[{row.value("kind", ""), row.value("queue", "")}], row);
  }
  json out = {{"rows", rows.size()}, {"groups", json::array()}};
  for (const auto& [key, g] : groups) {
    out["groups"].push_back(
        {{"kind", key.first},
         {"queue", key.second},
         {"jobs", g.jobs.size()},
         {"attempts", g.attempts},
         {"wait_s", {{"p50", NearestRank(g.waits, 0.5)}, {"p95", NearestRank(g.waits, 0.95)}}},
         {"run_s", {{"p50", NearestRank(g.runs, 0.5)}, {"p95", NearestRank(g.runs, 0.95)}}},
         {"gpus_per_replica", g.sizes},
         {"modes", g.modes},
         {"models", g.models},
         {"failed", g.failed.size()},
         {"failure_rate", Rate(g.failed.size(), g.jobs.size())},
         {"preempted", g.preempted.size()},
         {"preemption_rate", Rate(g.preempted.size(), g.jobs.size())},
         {"gpu_hours", g.gpu_hours}});
  }
  out["definitions"] = {
      {"wait_s", "first attempts: from submission to start"},
      {"run_s", "every attempt: from start to end"},
      {"gpus_per_replica", "attempts by the GPUs each replica held (0.25: a quarter share)"},
      {"failure_rate", "jobs whose last attempt ended failed, of the group's jobs"},
      {"preemption_rate", "jobs with an attempt ended by preemption, of the group's jobs"},
      {"gpu_hours", "GPUs held times hours held, summed over attempts"}};
  out["not_measured"] = json::array(
      {"peak device memory per job: agents report memory per GPU, not per process",
       "SM utilization per job: agents report utilization per GPU, not per process",
       "whether a whole-GPU job could have used a share or a MIG slice: needs the two above"});
  return out;
}

}  // namespace carve
