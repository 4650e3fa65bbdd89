#include "runtime/agent.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/api_client.h"
#include "runtime/control_plane.h"
#include "runtime/records.h"
#include "runtime/replica_monitor.h"
#include "runtime/tenant_paths.h"

namespace carve {

using json = nlohmann::json;

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Agent::Agent(Options options, std::unique_ptr<DeviceBackend> devices,
             std::unique_ptr<ProcessLauncher> launcher)
    : options_(std::move(options)), devices_(std::move(devices)), launcher_(std::move(launcher)) {
  if (options_.self_exe.empty()) {
    std::error_code ec;
    options_.self_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  }
}

Agent::~Agent() { Stop(false); }

absl::Status Agent::Start(int64_t deadline_ms) {
  std::error_code ec;
  std::filesystem::create_directories(options_.data_dir + "/logs", ec);
  std::filesystem::create_directories(options_.data_dir + "/status", ec);
  devices_->SetStateDir(options_.data_dir + "/simgpu");
  if (ec) return absl::InternalError(absl::StrCat(options_.data_dir, ": ", ec.message()));
  auto gpus = devices_->Discover();
  if (!gpus.ok()) return gpus.status();
  gpus_ = *gpus;
  StartMps();
  json body = {{"name", options_.node},
               {"cpu_milli", options_.cpu_milli},
               {"memory_mib", options_.memory_mib},
               {"labels", options_.labels},
               {"backend", devices_->name()},
               {"gpus", json::array()}};
  for (const DiscoveredGpu& g : gpus_) body["gpus"].push_back(GpuToJson(g));
  ApiClient api(options_.server, options_.token);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  absl::StatusOr<json> r = api.Post("/api/v1/agents/register", body);
  while (!r.ok() && absl::IsUnavailable(r.status()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = api.Post("/api/v1/agents/register", body);
  }
  if (!r.ok()) return r.status();
  for (const json& g : r->value("gpus", json::array())) {  // the server's modes
    if (g.value("mode", "") == "shared" && mps_) mps_->MarkShared(g.value("index", -1));
  }
  LoadState();
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void Agent::Stop(bool kill_replicas) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (kill_replicas) {
    for (auto& [key, r] : replicas_) {
      if (r.launched && !r.exit) (void)launcher_->Stop(r.handle, options_.stop_grace_ms);
    }
    if (mps_) mps_->StopAll();
  }
}

void Agent::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    (void)Tick();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_ms), [this] { return stop_; });
  }
}

std::map<std::string, std::string> Agent::GpuEnv(const json& a) const {
  std::vector<std::string> visible;
  std::map<std::string, std::string> env;
  for (const json& g : a.value("grants", json::array())) {
    int device = g.value("device", 0);
    const DiscoveredGpu* gpu = nullptr;
    for (const DiscoveredGpu& d : gpus_) {
      if (d.index == device) gpu = &d;
    }
    if (gpu == nullptr) continue;
    if (g.contains("profile")) {
      std::string uuid;
      for (const auto& m : gpu->mig_instances) {
        if (m.profile == g["profile"] && m.start == g.value("start", -1)) uuid = m.uuid;
      }
      if (!uuid.empty()) visible.push_back(uuid);
      continue;
    }
    visible.push_back(gpu->uuid);
    if (a.value("mode", "") == "shared" && mps_) {
      auto [mem, pct] = ShareCaps(g);
      for (const auto& [k, v] : mps_->ClientEnv(device, mem, pct)) env[k] = v;
    }
  }
  env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(visible, ",");
  env["NVIDIA_VISIBLE_DEVICES"] = visible.empty() ? "void" : absl::StrJoin(visible, ",");
  return env;
}

void Agent::Launch(const json& a) {
  Replica r;
  r.job = a.value("job", int64_t{0});
  r.index = a.value("replica", 0);
  if (replicas_.count({r.job, r.index})) return;
  // Logs, checkpoints and working directories live under owner-only per-tenant directories.
  const std::string data = std::filesystem::absolute(options_.data_dir).string();
  const std::string tenant = a.value("tenant", "default");
  r.log_path =
      absl::StrCat(TenantDir(data + "/logs", tenant), "/job-", r.job, "-", r.index, ".log");
  // The server names a checkpoint directory every node can reach; else keep it local.
  std::string checkpoints = a.value("checkpoint_dir", "");
  if (checkpoints.empty()) {
    checkpoints = absl::StrCat(TenantDir(data + "/checkpoints", tenant), "/job-", r.job);
  }
  std::error_code ec;
  (void)CreatePrivateDir(checkpoints);
  auto workdir = ResolveWorkdir(
      absl::StrCat(TenantDir(data + "/work", tenant), "/", a.value("project", "default")),
      a.value("workdir", ""));
  r.status_path = absl::StrCat(options_.data_dir, "/status/job-", r.job, "-", r.index);
  std::filesystem::remove(r.status_path, ec);
  LaunchSpec spec;
  spec.argv = {options_.self_exe, "internal-run", "--status", r.status_path, "--"};
  for (const std::string& arg : a.value("command", std::vector<std::string>{})) {
    spec.argv.push_back(arg);
  }
  spec.env = a.value("env", std::map<std::string, std::string>{});
  spec.env["CARVE_JOB_ID"] = std::to_string(r.job);
  spec.env["CARVE_REPLICA"] = std::to_string(r.index);
  spec.env["CARVE_NODE"] = options_.node;
  spec.env["CARVE_ATTEMPT"] = std::to_string(a.value("attempt", 0));
  spec.env["CARVE_CHECKPOINT_DIR"] = checkpoints;
  if (devices_->name() == "simulated") {
    spec.env["CARVE_SIM_GPU_DIR"] = data + "/simgpu";
    for (const json& g : a.value("grants", json::array())) {
      for (const DiscoveredGpu& d : gpus_) {
        if (d.index == g.value("device", -1)) {
          std::filesystem::create_directories(options_.data_dir + "/simgpu/" + d.uuid, ec);
        }
      }
    }
  }
  r.grants = a.value("grants", json::array());
  r.gpu_isolation = GpuIsolation(a);
  // Dynamic partitions are created for the replica before it starts (and destroyed by Reclaim).
  std::string create_error;
  for (const json& g : r.grants) {
    if (!g.value("created", false) || !create_error.empty()) continue;
    auto uuid = devices_->CreateMigInstance(g.value("device", -1), g.value("profile", ""),
                                            g.value("start", -1));
    if (!uuid.ok()) create_error = std::string(uuid.status().message());
  }
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;
  for (const auto& [k, v] : GpuEnv(a)) spec.env[k] = v;
  spec.workdir = workdir.ok() ? *workdir : "";
  spec.log_path = r.log_path;
  // Unique on this machine: several agents (and several Carve installations) may share it.
  spec.group_name = absl::StrCat(options_.node, "-", Sha256Hex(options_.data_dir).substr(0, 8),
                                 "-job-", r.job, "-r", r.index);
  spec.limits = {a.value("cpu_milli", int64_t{0}), a.value("memory_mib", int64_t{0})};
  r.started_us = NowUs();
  int64_t max_runtime = a.value("max_runtime_us", int64_t{0});
  r.deadline_us = max_runtime > 0 ? r.started_us + max_runtime : 0;
  auto handle = !workdir.ok() ? absl::StatusOr<ProcessHandle>(workdir.status())
                : !create_error.empty()
                    ? absl::StatusOr<ProcessHandle>(absl::FailedPreconditionError(create_error))
                    : launcher_->Launch(spec);
  if (handle.ok()) {
    r.handle = *handle;
    r.launched = true;
  } else {
    // The command never ran: say why in its log, and report it as exit code 127.
    std::ofstream(r.log_path, std::ios::app) << "carve: " << handle.status().message() << "\n";
    r.exit = ExitStatus{true, 127, 0};
    r.ended_us = r.started_us;
  }
  auto& stored = replicas_[{r.job, r.index}] = std::move(r);
  if (stored.exit) StartReclaim(stored);
}

void Agent::PollAndEnforce() {
  int64_t now = NowUs();
  for (auto& [key, r] : replicas_) {
    if (r.exit || !r.launched) continue;
    if (r.deadline_us > 0 && now > r.deadline_us && !r.timed_out) {
      r.timed_out = true;
      StopAsync(r.handle);
    }
    auto status = launcher_->Poll(r.handle);
    if (status.ok() && status->has_value()) {
      // The group leader's record is the command's own end, also for a re-adopted replica.
      r.exit = ReadReplicaStatus(r.status_path).value_or(**status);
      r.ended_us = NowUs();
      StartReclaim(r);
    }
  }
}

void Agent::ShipLogs() {
  ApiClient api(options_.server, options_.token);
  for (auto& [key, r] : replicas_) {
    std::ifstream in(r.log_path, std::ios::binary);
    if (!in) continue;
    in.seekg(r.shipped);
    std::string chunk(1 << 20, '\0');
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<size_t>(in.gcount()));
    if (chunk.empty()) continue;
    auto sent = api.PostText(absl::StrCat("/api/v1/agents/logs?job=", r.job, "&replica=", r.index,
                                          "&offset=", r.shipped),
                             chunk);
    if (sent.ok()) r.shipped += static_cast<int64_t>(chunk.size());
  }
}

void Agent::StartReclaim(Replica& r) {
  r.reclaiming = std::async(std::launch::async, [this, copy = r] { return Reclaim(copy); }).share();
}

void Agent::StopAsync(const ProcessHandle& handle, int64_t grace_ms) {
  if (grace_ms < 0) grace_ms = options_.stop_grace_ms;
  stopping_.push_back(std::async(
      std::launch::async, [this, handle, grace_ms] { (void)launcher_->Stop(handle, grace_ms); }));
}

json Agent::Reclaim(Replica r) {
  json checks = json::array();
  bool verified = true;
  json quarantine = json::array();
  auto check = [&](const std::string& name, bool ok, const std::string& observed, int device = -1) {
    checks.push_back({{"name", name}, {"ok", ok}, {"observed", observed}, {"time_us", NowUs()}});
    if (device >= 0) checks.back()["device"] = device;
    verified &= ok;
    if (!ok && device >= 0) quarantine.push_back(device);
  };
  bool oom_killed = false;
  if (r.launched) {
    oom_killed = launcher_->OomKills(r.handle) > 0;
    bool stragglers = launcher_->Alive(r.handle);
    if (stragglers) (void)launcher_->Stop(r.handle, options_.stop_grace_ms);
    bool left = launcher_->Alive(r.handle);
    check("processes-gone", !left,
          left         ? "processes of the group survived SIGKILL"
          : stragglers ? "stragglers stopped (SIGTERM, then SIGKILL after the grace period)"
                       : "process group and cgroup empty");
  }
  std::set<int> checked;
  for (const json& g : r.grants) {
    int device = g.value("device", -1);
    // Device processes first, once per device (on a MIG GPU NVML lists its MIG devices' too): a
    // driver refuses to destroy an instance that a process still uses.
    if (device >= 0 && checked.insert(device).second)
      CheckDeviceProcesses(r, device, check, checks);
    if (g.contains("profile") && g.value("created", false)) CheckDestroyed(g, check);
  }
  // After the device checks: a straggler keeps its cgroup, which Owns reads.
  if (r.launched) (void)launcher_->Cleanup(r.handle);
  return {{"status", verified ? "verified" : "failed"},
          {"checks", checks},
          {"quarantine", quarantine},
          {"oom_killed", oom_killed},
          {"time_us", NowUs()}};
}

template <typename Check>
void Agent::CheckDeviceProcesses(const Replica& r, int device, Check& check, json& checks) {
  auto processes = devices_->Processes(device);
  if (!processes.ok()) {
    checks.push_back({{"name", "device-processes"},
                      {"ok", true},
                      {"skipped", true},
                      {"device", device},
                      {"observed", std::string(processes.status().message())},
                      {"time_us", NowUs()}});
    return;
  }
  // A device process is the replica's when the backend names it so (simulated), or, when it has
  // only a pid (NVML), when that pid is in the replica's cgroup or process group.
  std::string owner = absl::StrCat("job-", r.job, "-r", r.index);
  std::vector<std::string> live;
  int64_t held = 0;
  for (const DeviceProcess& p : *processes) {
    bool ours = !p.owner.empty() ? p.owner == owner
                                 : r.launched && p.pid > 0 && launcher_->Owns(r.handle, p.pid);
    if (!ours) continue;
    if (p.memory_mib > 0) held += p.memory_mib;
    if (p.pid > 0) live.push_back(std::to_string(p.pid));
  }
  check("device-processes", live.empty(),
        live.empty() ? "no process of the job on the device"
                     : "still on the device: pid " + absl::StrJoin(live, ", "),
        device);
  check("device-memory", held <= options_.memory_tolerance_mib,
        absl::StrCat(held, " MiB still held by the job (tolerance ", options_.memory_tolerance_mib,
                     " MiB)"),
        device);
}

template <typename Check>
void Agent::CheckDestroyed(const json& grant, Check& check) {
  // A dynamic instance made for the replica is destroyed with it; the driver must agree.
  int device = grant.value("device", -1);
  int start = grant.value("start", -1);
  std::string what = absl::StrCat(grant.value("profile", ""), " at slice ", start);
  absl::Status destroyed = devices_->DestroyMigInstance(device, start);
  auto gpus = devices_->Discover();
  bool gone = gpus.ok();
  if (gpus.ok()) {
    for (const DiscoveredGpu& g : *gpus) {
      for (const DiscoveredMigInstance& m : g.mig_instances)
        gone &= !(g.index == device && m.start == start);
    }
  }
  check("partition-destroyed", gone,
        gone         ? what + " destroyed; the device lists no instance there"
        : !gpus.ok() ? what + ": cannot list instances: " + std::string(gpus.status().message())
                     : what + " still exists (" + std::string(destroyed.message()) + ")",
        device);
}

json Agent::Report() const {
  json reps = json::array();
  for (const auto& [key, r] : replicas_) {
    json j = {{"job", r.job},
              {"replica", r.index},
              {"state", r.exit ? "exited" : "running"},
              {"pid", r.handle.pid},
              {"started_us", r.started_us},
              {"enforcement", r.handle.enforcement.detail.empty() ? r.handle.enforcement.mechanism
                                                                  : r.handle.enforcement.detail}};
    if (!r.gpu_isolation.is_null()) j["gpu_isolation"] = r.gpu_isolation;
    if (r.exit) {
      if (!r.reclaim.is_null()) {
        j["reclaim"] = r.reclaim;
        j["oom_killed"] = r.reclaim.value("oom_killed", false);
      }
      j["ended_us"] = r.ended_us;
      j["timed_out"] = r.timed_out;
      j["exit_code"] = r.exit->exited ? json(r.exit->code) : json(nullptr);
      j["signal"] = r.exit->exited ? json(nullptr) : json(r.exit->signal);
    }
    reps.push_back(j);
  }
  json body = {{"node", options_.node}, {"replicas", reps}};
  body["gpus"] = json::array();
  for (const DiscoveredGpu& g : gpus_) {
    json instances = json::array();
    for (const DiscoveredMigInstance& m : g.mig_instances) {
      instances.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}});
      if (auto h = g.instance_health.find(m.start); h != g.instance_health.end()) {
        size_t space = h->second.find(' ');
        instances.back()["health"] = h->second.substr(0, space);
        instances.back()["health_reason"] =
            space == std::string::npos ? "" : h->second.substr(space + 1);
      }
    }
    body["gpus"].push_back({{"index", g.index},
                            {"health", g.health},
                            {"health_reason", g.health_reason},
                            {"utilization_pct", g.utilization_pct},
                            {"mig_instances", instances}});
    if (!g.share_enforcement.empty())
      body["gpus"].back()["share_enforcement"] = g.share_enforcement;
  }
  body["layouts"] = json::array();
  for (const auto& [gpu, result] : layout_results_) body["layouts"].push_back(result);
  return body;
}

absl::Status Agent::Tick() {
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;  // health may change
  if (mps_) mps_->Supervise(gpus_);  // a dead MPS daemon is a device fault
  PollAndEnforce();
  for (auto& [key, r] : replicas_) {
    if (r.reclaim.is_null() && r.reclaiming.valid() &&
        r.reclaiming.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      r.reclaim = r.reclaiming.get();
    }
  }
  std::erase_if(stopping_, [](std::future<void>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  ShipLogs();
  ApiClient api(options_.server, options_.token);
  auto answer = api.Post("/api/v1/agents/heartbeat", Report());
  if (!answer.ok()) return answer.status();
  // The server has the exits it was just told about: forget those replicas once their output is
  // shipped too.
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    std::error_code ec;
    auto size = std::filesystem::file_size(it->second.log_path, ec);
    bool shipped = ec || static_cast<int64_t>(size) <= it->second.shipped;
    bool done = it->second.exit && !it->second.reclaim.is_null() && shipped;
    it = done ? replicas_.erase(it) : std::next(it);
  }
  for (const json& stop : answer->value("stop", json::array())) {
    auto it = replicas_.find({stop.value("job", int64_t{0}), stop.value("replica", 0)});
    if (it != replicas_.end() && it->second.launched && !it->second.exit && !it->second.stop_sent) {
      it->second.stop_sent = true;
      StopAsync(it->second.handle, stop.value("grace_ms", options_.stop_grace_ms));
    }
  }
  for (const json& a : answer->value("assignments", json::array())) Launch(a);
  const json layouts = answer->value("layouts", json::array());
  for (const json& l : layouts) ApplyLayout(l);
  if (layouts.empty()) layout_results_.clear();
  SaveState();
  return absl::OkStatus();
}

void Agent::ApplyLayout(const json& request) {
  int gpu = request.value("gpu", -1);
  std::string id = request.value("request", "");
  if (auto done = layout_results_.find(gpu);
      done != layout_results_.end() && done->second.value("request", "") == id) {
    return;
  }
  std::vector<DiscoveredMigInstance> layout;
  for (const json& slot : request.value("layout", json::array())) {
    std::string text = slot.get<std::string>();
    size_t at = text.find('@');
    if (at == std::string::npos) continue;  // the server sends resolved profile@start
    layout.push_back({"", text.substr(0, at), std::atoi(text.c_str() + at + 1)});
  }
  absl::Status s = devices_->ApplyMigLayout(gpu, layout);
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;
  layout_results_[gpu] = {{"gpu", gpu},
                          {"request", id},
                          {"ok", s.ok()},
                          {"error", std::string(s.message())},
                          {"time_us", NowUs()}};
}

void Agent::SaveState() const {
  json reps = json::array();
  for (const auto& [key, r] : replicas_) {
    if (!r.launched || r.exit) continue;
    reps.push_back({{"job", r.job},
                    {"replica", r.index},
                    {"pid", r.handle.pid},
                    {"group_path", r.handle.group_path},
                    {"mechanism", r.handle.enforcement.mechanism},
                    {"detail", r.handle.enforcement.detail},
                    {"log_path", r.log_path},
                    {"status_path", r.status_path},
                    {"grants", r.grants},
                    {"gpu_isolation", r.gpu_isolation},
                    {"shipped", r.shipped},
                    {"started_us", r.started_us},
                    {"deadline_us", r.deadline_us}});
  }
  std::string path = options_.data_dir + "/agent-state.json";
  {
    std::ofstream out(path + ".tmp");
    out << reps.dump();
  }
  std::error_code ec;
  std::filesystem::rename(path + ".tmp", path, ec);
}

void Agent::LoadState() {
  std::ifstream in(options_.data_dir + "/agent-state.json");
  if (!in) return;
  json reps = json::parse(in, nullptr, false);
  if (!reps.is_array()) return;
  for (const json& j : reps) {
    Replica r;
    r.job = j.value("job", int64_t{0});
    r.index = j.value("replica", 0);
    r.handle.pid = j.value("pid", 0);
    r.handle.group_path = j.value("group_path", "");
    r.handle.enforcement = {j.value("mechanism", ""), j.value("detail", "")};
    r.log_path = j.value("log_path", "");
    r.status_path = j.value("status_path", "");
    r.grants = j.value("grants", json::array());
    r.gpu_isolation = j.value("gpu_isolation", json());
    r.shipped = j.value("shipped", int64_t{0});
    r.started_us = j.value("started_us", int64_t{0});
    r.deadline_us = j.value("deadline_us", int64_t{0});
    r.launched = true;
    if (r.handle.pid > 0 && launcher_->Alive(r.handle)) replicas_[{r.job, r.index}] = r;
  }
}

}  // namespace carve
