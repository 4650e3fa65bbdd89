#include "runtime/agent_swarm.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "runtime/agent_protocol.h"
#include "runtime/api_client.h"
#include "runtime/clock.h"
#include "runtime/control_plane.h"
#include "runtime/records.h"
#include "runtime/version.h"

namespace carve {

using json = nlohmann::json;

namespace {

double Ms(int64_t us) { return static_cast<double>(us) / 1000.0; }

}  // namespace

absl::StatusOr<SwarmNodeShape> SwarmShape(const std::string& profile, int i) {
  static const SwarmNodeShape kH100{"H100-80GB", 8, 81559, 192000, 2048 * 1024};
  static const SwarmNodeShape kMixed[] = {kH100,
                                          {"A100-80GB", 8, 81920, 128000, 1024 * 1024},
                                          {"H200-141GB", 8, 143771, 192000, 2048 * 1024},
                                          {"L40S", 4, 46068, 64000, 512 * 1024}};
  if (profile == "h100") return kH100;
  if (profile == "mixed") return kMixed[i % 4];
  return absl::InvalidArgumentError(
      absl::StrCat("--profile ", profile, ": not a profile (mixed, h100)"));
}

int64_t VirtualRuntimeMs(const std::vector<std::string>& command, int64_t fallback_ms) {
  std::vector<std::string> words = command;
  if (words.size() == 3 && (words[0] == "sh" || words[0] == "bash") && words[1] == "-c") {
    words = absl::StrSplit(words[2], ' ', absl::SkipEmpty());
  }
  double seconds = 0;
  if (words.size() == 2 && words[0] == "sleep" && absl::SimpleAtod(words[1], &seconds) &&
      seconds >= 0) {
    return static_cast<int64_t>(seconds * 1000);
  }
  return fallback_ms;
}

json LatencySummary(std::vector<int64_t> us) {
  if (us.empty()) return {{"count", 0}};
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return Ms(us[std::min(us.size() - 1, size_t(q * us.size()))]); };
  return {{"count", us.size()},
          {"p50_ms", at(0.50)},
          {"p90_ms", at(0.90)},
          {"p99_ms", at(0.99)},
          {"max_ms", Ms(us.back())}};
}

struct AgentSwarm::Replica {
  int attempt = 0;
  int64_t started_us = 0;   // wall clock, as agents report it
  int64_t ends_us = 0;      // when the virtual workload is done
  int64_t deadline_us = 0;  // max_runtime (0: none)
  std::vector<int> devices;
  std::optional<ReplicaEnd> end;
};

struct AgentSwarm::Node {
  int index = 0;
  std::string name;
  std::string credential;
  bool registered = false;
  SwarmNodeShape shape;
  std::map<std::pair<int64_t, int>, Replica> replicas;  // heartbeat thread only
  int64_t last_sent_us = 0;
};

AgentSwarm::AgentSwarm(SwarmOptions options) : options_(std::move(options)) {}

AgentSwarm::~AgentSwarm() { Stop(); }

absl::Status AgentSwarm::Register() {
  nodes_.clear();
  for (int i = 0; i < options_.nodes; ++i) {
    auto shape = SwarmShape(options_.profile, i);
    if (!shape.ok()) return shape.status();
    auto node = std::make_unique<Node>();
    node->index = i;
    node->name = absl::StrFormat("%s-%05d", options_.prefix, i + 1);
    node->shape = *shape;
    nodes_.push_back(std::move(node));
  }
  std::atomic<int> next{0};
  std::mutex failed_mu;
  absl::Status failed;
  auto work = [&] {
    ApiClient api(options_.server, options_.token, options_.ca_file);
    for (int i = next++; i < options_.nodes; i = next++) {
      Node& n = *nodes_[i];
      auto known = options_.credentials.find(n.name);
      const bool rejoin = known != options_.credentials.end();
      n.credential = rejoin ? known->second : "carve_" + RandomHex(32);
      json gpus = json::array();
      for (int g = 0; g < n.shape.gpus; ++g) {
        DiscoveredGpu gpu;
        gpu.index = g;
        gpu.uuid = absl::StrCat("GPU-swarm-", n.name, "-", g);
        gpu.model = n.shape.model;
        gpu.memory_mib = n.shape.gpu_memory_mib;
        gpu.mode = "exclusive";
        gpu.vbios = "virtual";
        gpus.push_back(GpuToJson(gpu));
      }
      json body = {{"name", n.name},
                   {"cpu_milli", n.shape.cpu_milli},
                   {"memory_mib", n.shape.memory_mib},
                   {"labels", {{"carve.dev/swarm", "true"}}},
                   {"backend", "virtual"},
                   {"versions", {{"carve", CarveVersion()}, {"driver", "virtual"}}},
                   {"gpus", gpus}};
      absl::StatusOr<json> r = absl::UnauthenticatedError("no credential yet");
      if (rejoin) {
        r = ApiClient(options_.server, n.credential, options_.ca_file)
                .Post("/api/v1/agents/register", body);
      }
      if (absl::IsUnauthenticated(r.status())) {  // none, or one this server does not take
        if (rejoin) n.credential = "carve_" + RandomHex(32);
        body["node_credential_sha256"] = Sha256Hex(n.credential);
        r = api.Post("/api/v1/agents/register", body);
      }
      n.registered = r.ok();
      if (!r.ok()) {
        std::lock_guard<std::mutex> lock(failed_mu);
        if (failed.ok())
          failed =
              absl::Status(r.status().code(), n.name + ": " + std::string(r.status().message()));
        next = options_.nodes;
        return;
      }
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(1, options_.threads); ++t) workers.emplace_back(work);
  for (std::thread& t : workers) t.join();
  return failed;
}

std::map<std::string, std::string> AgentSwarm::Credentials() const {
  std::map<std::string, std::string> out;
  for (const auto& n : nodes_) {
    if (n->registered) out[n->name] = n->credential;
  }
  return out;
}

void AgentSwarm::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
    due_.clear();
    due_of_.assign(nodes_.size(), -1);
    const int64_t now = SteadyUs();
    const int64_t period = options_.heartbeat_ms * 1000;
    for (size_t i = 0; i < nodes_.size(); ++i) {  // spread over one period, as agents started
      const int64_t at =
          now + period * static_cast<int64_t>(i) / std::max<size_t>(1, nodes_.size());
      due_.insert({at, static_cast<int>(i)});
      due_of_[i] = at;
    }
  }
  window_start_us_ = SteadyUs();
  for (int t = 0; t < std::max(1, options_.threads); ++t) {
    threads_.emplace_back([this] { HeartbeatLoop(); });
  }
  if (options_.wait) {
    for (auto& node : nodes_) threads_.emplace_back([this, n = node.get()] { WaitLoop(*n); });
  }
}

void AgentSwarm::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void AgentSwarm::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const auto [at, index] = *due_.begin();
    if (SteadyUs() < at) {
      cv_.wait_for(lock, std::chrono::microseconds(at - SteadyUs()));
      continue;
    }
    due_.erase(due_.begin());
    due_of_[index] = -1;
    lock.unlock();
    Heartbeat(*nodes_[index]);
    lock.lock();
    // As an agent does: the next beat a period after this one's answer.
    const int64_t next = SteadyUs() + options_.heartbeat_ms * 1000;
    due_.insert({next, index});
    due_of_[index] = next;
  }
}

void AgentSwarm::Wake(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (due_of_[index] < 0) return;  // beating now
  due_.erase({due_of_[index], index});
  due_of_[index] = SteadyUs();
  due_.insert({due_of_[index], index});
  cv_.notify_one();
}

void AgentSwarm::Count(const absl::Status& failure) {
  std::string message(failure.message());
  if (message.size() > 120) message = message.substr(0, 120);
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++failures_[absl::StrCat(absl::StatusCodeToString(failure.code()), ": ", message)];
}

void AgentSwarm::Heartbeat(Node& node) {
  const int64_t now = WallUs();
  HeartbeatRequest beat;
  beat.node = node.name;
  std::set<int> busy;
  for (auto& [key, r] : node.replicas) {
    if (!r.end && (now >= r.ends_us || (r.deadline_us > 0 && now >= r.deadline_us))) {
      ReplicaEnd& end = r.end.emplace();
      end.timed_out = r.deadline_us > 0 && r.deadline_us <= r.ends_us;
      end.ended_us = end.timed_out ? r.deadline_us : r.ends_us;
      if (end.timed_out) {
        end.signal = 9;
      } else {
        end.exit_code = 0;
      }
    }
    ReplicaReport& report = beat.replicas.emplace_back();
    report.job = key.first;
    report.replica = key.second;
    report.attempt = r.attempt;
    report.state = r.end ? ReplicaState::kExited : ReplicaState::kRunning;
    report.started_us = r.started_us;
    report.enforcement = "none: a virtual replica (carve sim agents), no process runs";
    if (r.end) {
      report.end = r.end;
      report.reclaim = json{{"status", "unchecked"},
                            {"reason",
                             "a virtual replica (carve sim agents): nothing ran, so "
                             "nothing was checked"},
                            {"checks", json::array()},
                            {"quarantine", json::array()},
                            {"time_us", now}};
    } else {
      busy.insert(r.devices.begin(), r.devices.end());
    }
  }
  beat.gpus.emplace();
  for (int g = 0; g < node.shape.gpus; ++g) {
    GpuReport& gpu = beat.gpus->emplace_back();
    gpu.index = g;
    gpu.utilization_pct = busy.count(g) ? 100 : 0;
  }
  const int64_t sent = SteadyUs();
  if (node.last_sent_us > 0 && sent - node.last_sent_us > 2 * options_.heartbeat_ms * 1000) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++late_;
  }
  node.last_sent_us = sent;
  // A new connection per beat, as the agent makes one.
  ApiClient api(options_.server, node.credential, options_.ca_file);
  absl::StatusOr<json> answered = api.Post("/api/v1/agents/heartbeat", beat.ToJson());
  const int64_t took = SteadyUs() - sent;
  absl::StatusOr<HeartbeatAnswer> answer =
      answered.ok() ? HeartbeatAnswer::FromJson(*answered) : answered.status();
  if (!answer.ok()) return Count(answer.status());
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    latencies_us_.push_back(took);
  }
  for (auto it = node.replicas.begin(); it != node.replicas.end();) {  // the server has the ends
    if (it->second.end) ++ended_;
    if (it->second.end) --running_;
    it = it->second.end ? node.replicas.erase(it) : std::next(it);
  }
  const int64_t at = WallUs();
  for (const StopOrder& stop : answer->stop) {
    auto it = node.replicas.find({stop.job, stop.replica});
    if (it == node.replicas.end() || it->second.end) continue;
    it->second.end.emplace().ended_us = at;
    it->second.end->signal = 15;
  }
  for (const AgentAssignment& a : answer->assignments) {
    if (node.replicas.count({a.job, a.replica})) continue;
    Replica& r = node.replicas[{a.job, a.replica}];
    r.attempt = a.attempt;
    r.started_us = at;
    r.ends_us = at + VirtualRuntimeMs(a.command, options_.job_ms) * 1000;
    if (a.max_runtime_us > 0) r.deadline_us = at + a.max_runtime_us;
    for (const GrantRecord& g : a.grants) r.devices.push_back(g.device);
    ++started_;
    ++running_;
  }
}

// As Agent::WaitLoop: a kept-alive connection asking for the node's work version; a quick
// answer that says nothing new (a refusal, or a server without waits) waits a period.
void AgentSwarm::WaitLoop(Node& node) {
  ApiClient api(options_.server, node.credential, options_.ca_file);
  const std::string path =
      "/api/v1/agents/wait?timeout_ms=1000&node=" + httplib::detail::encode_query_param(node.name);
  int64_t version = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const int64_t asked = SteadyUs();
    absl::StatusOr<json> answer = api.Get(absl::StrCat(path, "&after=", version));
    ++(answer.ok() ? waits_ : waits_refused_);
    lock.lock();
    const bool quick = SteadyUs() - asked < 100'000;
    const int64_t now = answer.ok() ? answer->value("version", int64_t{0}) : version;
    if (!answer.ok() || (quick && now == version)) {
      cv_.wait_for(lock,
                   std::chrono::milliseconds(
                       WaitBackoffMs(answer.status(), node.name, options_.heartbeat_ms)),
                   [this] { return stop_; });
      continue;
    }
    if (now > version) {
      lock.unlock();
      Wake(node.index);
      lock.lock();
    }
    version = now;
  }
}

json AgentSwarm::Window() {
  std::vector<int64_t> latencies;
  std::map<std::string, int64_t> failures;
  int64_t late = 0;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    latencies.swap(latencies_us_);
    failures.swap(failures_);
    std::swap(late, late_);
  }
  const int64_t now = SteadyUs();
  const double seconds = static_cast<double>(now - window_start_us_) / 1e6;
  window_start_us_ = now;
  int64_t failed = 0;
  for (const auto& [why, n] : failures) failed += n;
  json out = {{"seconds", seconds},
              {"nodes", nodes_.size()},
              {"heartbeat_ms", options_.heartbeat_ms},
              {"heartbeats", latencies.size()},
              {"heartbeats_per_second", seconds > 0 ? latencies.size() / seconds : 0},
              {"heartbeat_latency", LatencySummary(std::move(latencies))},
              {"heartbeats_failed", failed},
              {"failures", failures},
              {"late_beats", late},
              {"waits_answered", waits_.exchange(0)},
              {"waits_refused", waits_refused_.exchange(0)},
              {"replicas_started", started_.exchange(0)},
              {"replicas_ended", ended_.exchange(0)},
              {"replicas_running", running_.load()}};
  return out;
}

absl::StatusOr<json> SubmitLoad(const SubmitLoadOptions& options) {
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::mutex mu;
  std::vector<int64_t> latencies;
  std::string first_error;
  json spec = {{"command", options.command}, {"resources", {{"gpus", options.gpus}}}};
  const int64_t start = SteadyUs();
  auto work = [&] {
    ApiClient api(options.server, options.token, options.ca_file);
    std::vector<int64_t> mine;
    for (int i = next++; i < options.jobs; i = next++) {
      const int64_t t0 = SteadyUs();
      auto r = api.Post("/api/v1/jobs", spec,
                        {{"Idempotency-Key", absl::StrCat(options.key_prefix, "-", i)}});
      if (r.ok()) {
        mine.push_back(SteadyUs() - t0);
        continue;
      }
      ++failed;
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.empty()) first_error = std::string(r.status().message());
    }
    std::lock_guard<std::mutex> lock(mu);
    latencies.insert(latencies.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < std::max(1, options.clients); ++c) clients.emplace_back(work);
  for (std::thread& t : clients) t.join();
  const double seconds = static_cast<double>(SteadyUs() - start) / 1e6;
  if (latencies.empty() && failed > 0) return absl::UnavailableError(first_error);
  json out = {
      {"jobs", options.jobs},    {"clients", options.clients},
      {"seconds", seconds},      {"per_second", seconds > 0 ? latencies.size() / seconds : 0},
      {"failed", failed.load()}, {"latency", LatencySummary(std::move(latencies))}};
  if (!first_error.empty()) out["first_error"] = first_error;
  return out;
}

}  // namespace carve
