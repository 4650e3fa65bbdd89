#include "runtime/poc/poc_cluster.h"

#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/states.h"

namespace carve::poc {

using json = nlohmann::json;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsFinal(const json& job) {
  auto state = job.find("state");
  if (state == job.end() || !state->is_string()) return false;
  std::optional<JobState> parsed = ParseJobState(state->get<std::string>());
  return parsed && carve::IsFinal(*parsed);
}

absl::StatusOr<int64_t> Cluster::Submit(const json& spec, Record& record) {
  record.input.push_back(spec);
  auto job = api_.Post("/api/v1/jobs", spec);
  if (!job.ok()) {
    return absl::Status(job.status().code(),
                        absl::StrCat("submitting ", spec.dump(), ": ", job.status().message()));
  }
  int64_t id = job->value("id", int64_t{0});
  record.jobs.push_back(id);
  progress_ << "  job " << id << " submitted: " << spec.value("name", "") << "\n" << std::flush;
  return id;
}

absl::StatusOr<json> Cluster::Job(int64_t id) {
  return api_.Get(absl::StrCat("/api/v1/jobs/", id));
}

absl::StatusOr<json> Cluster::WaitUntil(int64_t id, const std::function<bool(const json&)>& done,
                                        const std::string& what) {
  const int64_t deadline = NowUs() + options_.timeout_s * 1'000'000;
  json job;
  while (true) {
    auto got = Job(id);
    if (!got.ok()) return got.status();
    job = *std::move(got);
    if (done(job)) return job;
    if (Interrupted()) return absl::CancelledError("interrupted");
    if (NowUs() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", id, " did not become ", what, " within ", options_.timeout_s,
                       " s; it is ", job.value("state", "?"), ": ", job.value("reason", "")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::StatusOr<json> Cluster::WaitFinal(int64_t id) { return WaitUntil(id, IsFinal, "final"); }

absl::StatusOr<json> Cluster::WaitRunning(int64_t id) {
  return WaitUntil(
      id, [](const json& j) { return j.value("state", "") == "running" || IsFinal(j); }, "running");
}

absl::StatusOr<ProbeLog> Cluster::Probe(int64_t id) {
  std::string all;
  while (true) {
    std::map<std::string, std::string> headers;
    auto text =
        api_.GetText(absl::StrCat("/api/v1/jobs/", id, "/logs?offset=", all.size()), &headers);
    if (!text.ok()) return text.status();
    all += *text;
    size_t size = 0;
    if (text->empty() || !absl::SimpleAtoi(headers["X-Carve-Log-Size"], &size) ||
        all.size() >= size) {
      break;
    }
  }
  return ParseProbeLog(all);
}

ProbeLog ParseProbeLog(const std::string& log) {
  ProbeLog out;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("probe") || !j["probe"].is_string()) continue;
    const std::string kind = j["probe"];
    if (kind == "sees") {
      out.sees = j;
    } else if (kind == "memory") {
      if (j.value("ok", false)) {
        out.held_mib = std::max(out.held_mib, j.value("mib", int64_t{0}));
      } else if (!out.refused) {
        out.refused = true;
        out.refused_mib = j.value("mib", int64_t{0});
      }
    } else if (kind == "memory-reached") {
      out.reached_mib = j.value("mib", int64_t{0});
    } else if (kind == "done") {
      out.per_second = j.value("per_second", int64_t{0});
      out.compute = j.value("kind", "");
    } else if (kind == "crash") {
      out.crashed = true;
    } else if (kind == "resumed") {
      out.resumed.push_back(j);
    } else if (kind == "progress") {
      out.seconds.push_back(j.value("second", int64_t{0}));
    }
  }
  return out;
}

absl::Status Cluster::Cancel(int64_t id) {
  return api_.Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object()).status();
}

absl::Status Cluster::Scale(int64_t id, int replicas) {
  return api_.Post(absl::StrCat("/api/v1/jobs/", id, "/scale"), {{"replicas", replicas}}).status();
}

absl::Status Cluster::NodeAction(const std::string& node, const std::string& action) {
  progress_ << "  " << action << " " << node << "\n" << std::flush;
  return api_.Post(absl::StrCat("/api/v1/nodes/", node, "/", action), json::object()).status();
}

absl::StatusOr<ChainHead> Cluster::Head() {
  auto v = api_.Get("/api/v1/audit/verify");
  if (!v.ok()) return v.status();
  if (!v->value("ok", false)) {
    return absl::DataLossError(absl::StrCat("the event chain does not verify: ", v->dump()));
  }
  return ChainHead{v->value("head_seq", int64_t{0}), v->value("head_hash", "")};
}

absl::StatusOr<json> Cluster::Nodes() { return api_.Get("/api/v1/nodes"); }

void Cluster::CleanUp(const Record& record) {
  for (int64_t id : record.jobs) {
    auto job = Job(id);
    if (!job.ok() || IsFinal(*job)) continue;
    absl::Status st = Cancel(id);
    // Its devices are back before the next test; an interrupt does not cut this wait short.
    const int64_t deadline = NowUs() + options_.timeout_s * 1'000'000;
    while (st.ok() && NowUs() < deadline) {
      job = Job(id);
      if (!job.ok() || IsFinal(*job)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!st.ok() || !job.ok() || !IsFinal(*job)) {
      progress_ << "  job " << id << " was not cleaned up: "
                << (st.ok() ? "it did not end in time" : std::string(st.message())) << "\n"
                << std::flush;
    }
  }
}

absl::StatusOr<std::set<std::string>> Cluster::BusyGpus() {
  auto jobs = api_.Get("/api/v1/jobs");
  if (!jobs.ok()) return jobs.status();
  std::set<std::string> out;
  for (const json& job : *jobs) {
    const json replicas = job.value("replicas", json::array());
    for (const json& r : replicas) {
      const std::string state = r.value("state", "");
      if (state != "pending" && state != "running") continue;
      for (const json& g : r.value("grants", json::array())) {
        out.insert(absl::StrCat(r.value("node", ""), "/gpu ", g.value("device", -1)));
      }
    }
  }
  return out;
}

absl::Status ForEachEvent(ApiClient& api, int64_t after_seq,
                          const std::function<bool(const json&)>& each) {
  int64_t after = after_seq;
  while (true) {
    auto page = api.Get(absl::StrCat("/api/v1/events?after=", after, "&limit=1000"));
    if (!page.ok()) return page.status();
    if (!page->is_array() || page->empty()) return absl::OkStatus();
    for (const json& e : *page) {
      after = std::max(after, e.value("seq", int64_t{0}));
      if (!each(e)) return absl::OkStatus();
    }
  }
}

absl::StatusOr<std::string> Cluster::WaitReason(int64_t id, int64_t after_seq) {
  const std::string subject = absl::StrCat("job/", id);
  std::string why;
  absl::Status st = ForEachEvent(api_, after_seq, [&](const json& e) {
    if (e.value("subject", "") == subject && e.value("type", "") == "job.waiting") {
      why = e.value("reason", "");
      return false;
    }
    return true;
  });
  if (!st.ok()) return st;
  return why;
}

absl::StatusOr<json> Cluster::AwaitEvent(int64_t after_seq, const std::string& type,
                                         const std::string& subject) {
  const int64_t deadline = NowUs() + options_.timeout_s * 1'000'000;
  int64_t after = after_seq;
  while (true) {
    json found;
    absl::Status st = ForEachEvent(api_, after, [&](const json& e) {
      after = std::max(after, e.value("seq", int64_t{0}));
      if (e.value("type", "") != type || e.value("subject", "") != subject) return true;
      found = e;
      return false;
    });
    if (!st.ok()) return st;
    if (!found.is_null()) return found;
    if (Interrupted()) return absl::CancelledError("interrupted");
    if (NowUs() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("no ", type, " event about ", subject,
                                                      " within ", options_.timeout_s, " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Cluster::NoteNodes(const json& job, Record& record) {
  for (const json& r : job.value("replicas", json::array())) {
    std::string node = r.value("node", "");
    if (!node.empty()) record.nodes[node] = r.value("versions", json::object());
  }
}

std::vector<SharedGpu> SharedGpus(const json& nodes, const std::string& model,
                                  const std::set<std::string>& busy) {
  std::vector<SharedGpu> out;
  std::string want = model;
  for (const json& n : nodes) {
    if (n.value("state", "") != "ready" || !n.value("cordoned_by", "").empty()) continue;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("mode", "") != "shared" || g.value("health", "") != "healthy" ||
          g.value("state", "") != "available") {
        continue;
      }
      if (want.empty()) want = g.value("model", "");
      if (g.value("model", "") != want) continue;
      const std::string name = n.value("name", "");
      const int index = g.value("index", 0);
      out.push_back({name, index, want, g.value("memory_mib", 0),
                     !busy.count(absl::StrCat(name, "/gpu ", index))});
    }
  }
  return out;
}

}  // namespace carve::poc
