#include "runtime/agent.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "httplib.h"
#include "runtime/api_client.h"
#include "runtime/clock.h"
#include "runtime/control_plane.h"
#include "runtime/log.h"
#include "runtime/records.h"
#include "runtime/replica_monitor.h"
#include "runtime/states.h"
#include "runtime/tenant_paths.h"
#include "runtime/version.h"

namespace carve {

using json = nlohmann::json;

namespace {

// What a replica used, as its reclaim record carries it (sacct's TotalCPU and MaxRSS): only what
// the cgroup reported; the rest is named as not measured, never guessed.
json UsedJson(const ResourceUse& use, int64_t peak_device_mib, double busy_seconds) {
  json out = json::object();
  if (use.cpu_usec >= 0) out["cpu_seconds"] = static_cast<double>(use.cpu_usec) / 1e6;
  if (use.peak_memory_bytes >= 0) out["peak_memory_mib"] = use.peak_memory_bytes / (1 << 20);
  out["source"] = use.source.empty() ? "not measured: no cgroup reported CPU time or peak memory"
                                     : "cgroup " + use.source;
  json device = json::object();
  if (peak_device_mib >= 0) device["peak_memory_mib"] = peak_device_mib;
  if (busy_seconds >= 0) device["busy_seconds"] = busy_seconds;
  device["source"] = absl::StrCat(
      peak_device_mib >= 0 ? "peak memory: its processes on its devices, sampled each second"
                           : "peak memory not measured: the devices did not list processes",
      busy_seconds >= 0 ? "; busy: whole GPUs' utilization, sampled each second"
                        : "; busy time not measured: only a whole GPU's utilization is its own");
  out["device"] = device;
  return out;
}

// The parent of live process `pid` from /proc/PID/stat (0 when unknown).
int64_t ParentPid(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(paren + 1));
  std::string state;
  int64_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// What the job record shows: limits, identity, devices.
std::string EnforcementText(const Enforcement& e) {
  std::string text = e.detail.empty() ? e.mechanism : e.detail;
  if (!e.identity.empty()) absl::StrAppend(&text, "; ", e.identity);
  if (!e.devices.empty()) absl::StrAppend(&text, "; devices: ", e.devices);
  return text;
}

}  // namespace

std::vector<std::string> NvidiaDeviceNodes(const std::vector<GrantRecord>& grants,
                                           const std::vector<DiscoveredGpu>& gpus) {
  std::vector<std::string> nodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                    "/dev/nvidia-modeset"};
  bool mig = false;
  for (const GrantRecord& g : grants) {
    const int device = g.device;
    int minor = device;
    for (const DiscoveredGpu& gpu : gpus) {
      if (gpu.index == device && gpu.minor >= 0) minor = gpu.minor;
    }
    nodes.push_back(absl::StrCat("/dev/nvidia", minor));
    mig |= !g.profile.empty();
  }
  std::error_code ec;
  if (mig) {
    for (const auto& entry : std::filesystem::directory_iterator("/dev/nvidia-caps", ec)) {
      nodes.push_back(entry.path().string());
    }
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

Agent::Agent(Options options, std::unique_ptr<DeviceBackend> devices,
             std::unique_ptr<ProcessLauncher> launcher)
    : options_(std::move(options)), devices_(std::move(devices)), launcher_(std::move(launcher)) {
  if (options_.self_exe.empty()) {
    std::error_code ec;
    options_.self_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  }
}

Agent::~Agent() {
  Stop(false);
  exits_.reset();
  stopping_.clear();  // reclaims and stops in progress end before the members they use
}

void Agent::Wake() {
  std::lock_guard<std::mutex> lock(mu_);
  work_ = true;
  cv_.notify_all();
}

absl::Status Agent::PrepareDirs() {
  if (!options_.single_user && ::geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the agent runs as uid ", ::geteuid(),
        ", not root, so it cannot run each tenant's jobs as that tenant's user; start it as root, "
        "or with --single-user to run every job as uid ",
        ::geteuid(), " (jobs are then not isolated from each other)"));
  }
  for (const char* sub : {"", "/logs", "/status"}) {
    if (absl::Status s = CreatePrivateDir(options_.data_dir + sub); !s.ok()) return s;
  }
  std::filesystem::path data = std::filesystem::absolute(options_.data_dir).lexically_normal();
  if (options_.jobs_dir.empty()) {
    options_.jobs_dir = (data.parent_path() / "carve-jobs").string();
  }
  options_.jobs_dir = std::filesystem::absolute(options_.jobs_dir).lexically_normal().string();
  std::string jobs = options_.jobs_dir;
  if (jobs == data.string() || absl::StartsWith(jobs, data.string() + "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--jobs-dir ", jobs, " is inside the agent's private data directory ", data.string()));
  }
  // Traversable by every job's user; what is below each tenant's directory is the tenant's.
  for (const char* sub :
       {"", "/work", "/work/tenants", "/checkpoints", "/checkpoints/tenants", "/simgpu"}) {
    if (!CreateSharedDir(jobs + sub).ok() || ::chmod((jobs + sub).c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat(jobs, sub, ": cannot create it (mode 0755)"));
    }
  }
  devices_->SetStateDir(jobs + "/simgpu");
  std::ifstream in(options_.data_dir + "/tenant-uids.json");
  json uids = json::parse(in, nullptr, false);
  if (uids.is_object()) {
    for (const auto& [tenant, uid] : uids.items()) {
      if (uid.is_number_integer()) tenant_uids_[tenant] = uid.get<int64_t>();
    }
  }
  return absl::OkStatus();
}

absl::Status Agent::Start(int64_t deadline_ms) {
  if (absl::Status s = PrepareDirs(); !s.ok()) return s;
  auto gpus = devices_->Discover();
  if (!gpus.ok()) return gpus.status();
  gpus_ = *gpus;
  baselines_ = std::make_unique<DeviceBaselines>(options_.data_dir + "/device-baselines.json");
  baselines_->Load();
  baselines_->TakeMissing(*devices_, gpus_);
  versions_ = devices_->Versions();
  StartMps();
  json body = RegistrationBody();
  for (const std::string& broken : options_.broken) {
    LogWarn("node ", options_.node, ": broken on purpose (--break ", broken,
            "): for the acceptance kit's tests only; its records cannot be trusted");
  }
  if (absl::Status s = Join(body, deadline_ms); !s.ok()) return s;
  exits_ = std::make_unique<ExitWatch>([this](int64_t) { Wake(); });
  LoadState();
  SweepGroups();
  PublishLive();
  heard_ms_ = SteadyMs();
  thread_ = std::thread([this] { Loop(); });
  wait_thread_ = std::thread([this] { WaitLoop(); });
  if (options_.fence_after_ms > 0) fence_thread_ = std::thread([this] { FenceLoop(); });
  return absl::OkStatus();
}

json Agent::RegistrationBody() const {
  json body = {{"name", options_.node},
               {"cpu_milli", options_.cpu_milli},
               {"memory_mib", options_.memory_mib},
               {"labels", options_.labels},
               {"extra", options_.extra},
               {"backend", devices_->name()},
               {"versions",
                {{"carve", CarveVersion()},
                 {"kernel", KernelVersion()},
                 {"driver", versions_.driver},
                 {"cuda_driver", versions_.cuda_driver},
                 {"nvml", versions_.nvml}}},
               {"gpus", json::array()}};
  for (const DiscoveredGpu& g : gpus_) body["gpus"].push_back(GpuToJson(g));
  if (options_.broken.count("versions")) body.erase("versions");
  if (options_.fence_after_ms > 0) {
    body["self_fence"] = {{"after_ms", options_.fence_after_ms},
                          {"grace_ms", options_.stop_grace_ms}};
  }
  return body;
}

// A simulated node whose driver version changed (an upgrade, scripts/poc-dev-faults) registers
// again, as a real agent restarted under a new driver does; the server records the change
// (node.versions-changed). A real driver does not change under a running agent.
absl::Status Agent::RegisterAgainIfUpgraded() {
  if (devices_->name() != "simulated") return absl::OkStatus();
  DriverVersions now = devices_->Versions();
  if (now.driver == versions_.driver) return absl::OkStatus();
  const std::string was = versions_.driver;
  versions_ = now;
  auto r = RegisterWith(options_.token, RegistrationBody(), 5000);
  if (!r.ok()) {
    versions_.driver = was;  // tried again at the next heartbeat
    return r.status();
  }
  LogInfo("node ", options_.node, ": registered again under driver ", now.driver, " (was ", was,
          ")");
  return absl::OkStatus();
}

absl::StatusOr<json> Agent::RegisterWith(const std::string& token, const json& body,
                                         int64_t deadline_ms) {
  ApiClient api(options_.server, token, options_.ca_file);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  absl::StatusOr<json> r = api.Post("/api/v1/agents/register", body);
  while (!r.ok() && absl::IsUnavailable(r.status()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = api.Post("/api/v1/agents/register", body);
  }
  return r;
}

namespace {

// Writes the node credential to `path` (0600) through a renamed, synced temporary file.
absl::Status SaveCredential(const std::string& path, const std::string& secret) {
  int fd = ::open((path + ".tmp").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                 ::write(fd, secret.data(), secret.size()) == static_cast<ssize_t>(secret.size()) &&
                 ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  std::error_code ec;
  if (written) std::filesystem::rename(path + ".tmp", path, ec);
  if (!written || ec) return absl::InternalError(path + ": cannot save the node credential");
  return absl::OkStatus();
}

}  // namespace

absl::Status Agent::Join(const json& body, int64_t deadline_ms) {
  const std::string path = options_.data_dir + "/node.token";
  std::string saved;
  std::ifstream(path) >> saved;
  absl::StatusOr<json> r = absl::UnauthenticatedError("no node credential yet");
  if (!saved.empty()) r = RegisterWith(saved, body, deadline_ms);
  // No credential yet, or the server no longer takes it (revoked, or another server): make one,
  // save it, then join with the join token naming its hash. Saved first: an agent that dies
  // after the server bound it and before it read the answer still holds it when it restarts.
  if (!r.ok() && absl::IsUnauthenticated(r.status())) {
    saved = "carve_" + RandomHex(32);
    if (saved.size() != 70) return absl::InternalError("no randomness for a node credential");
    if (absl::Status s = SaveCredential(path, saved); !s.ok()) return s;
    json join = body;
    join["node_credential_sha256"] = Sha256Hex(saved);
    r = RegisterWith(options_.token, join, deadline_ms);
    if (!r.ok()) return r.status();
    if (std::string made = r->value("node_token", ""); !made.empty()) {
      // A server that makes the credential itself (before node_credential_sha256).
      saved = made;
      if (absl::Status s = SaveCredential(path, saved); !s.ok()) return s;
    } else if (!r->contains("node_credential")) {  // an admin token registered it: keep that
      std::error_code ec;
      std::filesystem::remove(path, ec);
      return absl::OkStatus();
    }
  }
  if (!r.ok()) return r.status();
  options_.token = saved;  // every later call speaks as this node only
  for (const json& g : r->value("gpus", json::array())) {  // the server's modes
    if (g.value("mode", "") == "shared" && mps_) mps_->MarkShared(g.value("index", -1));
  }
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
  if (wait_thread_.joinable()) wait_thread_.join();
  if (fence_thread_.joinable()) fence_thread_.join();
  if (kill_replicas) {
    for (auto& [key, r] : replicas_) {
      if (r.launched && !r.exit) StopLogged(r.handle, options_.stop_grace_ms);
    }
    if (mps_) mps_->StopAll();
  }
}

// A simulated node's network cable: while JOBS/simgpu/cut-off exists the agent neither heartbeats
// nor ships logs nor waits for work, and its jobs keep running, as on a node cut off from the
// server (scripts/poc-dev-faults node-down). Real GPUs have no such file.
bool Agent::CutOff() const {
  return devices_->name() == "simulated" &&
         std::filesystem::exists(options_.jobs_dir + "/simgpu/cut-off");
}

void Agent::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::string last_error;  // a server that stays away is logged once, and its return too
  while (!stop_) {
    lock.unlock();
    absl::Status tick = Tick();
    std::string error = tick.ok() ? "" : std::string(tick.message());
    if (error != last_error && tick.ok()) {
      LogInfo("node ", options_.node, ": heartbeats succeed again");
    } else if (error != last_error) {
      LogWarn("node ", options_.node, ": heartbeat failed: ", error);
    }
    last_error = error;
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_ms),
                 [this] { return stop_ || work_; });
    work_ = false;
  }
}

void Agent::FenceLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    Fence();
    lock.lock();
  }
}

void Agent::Fence() {
  const int64_t silent = SteadyMs() - heard_ms_.load();
  if (silent < options_.fence_after_ms) return;
  std::vector<ProcessHandle> stop;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    for (const auto& [key, l] : live_) {
      // A replica that ended by itself (its reclaim still running) was not stopped by the fence.
      if (fenced_.count(key) || !launcher_->Alive(l.handle)) continue;
      fenced_.emplace(key, WallUs());
      stop.push_back(l.handle);
    }
  }
  if (stop.empty()) return;
  LogWarn("node ", options_.node, ": no answer from the server for ", silent,
          " ms (--fence-after-ms ", options_.fence_after_ms, "): stopping its ", stop.size(),
          " replica(s) before the server runs them elsewhere");
  std::vector<std::future<void>> stopping;
  for (const ProcessHandle& h : stop) {
    stopping.push_back(
        std::async(std::launch::async, [this, h] { StopLogged(h, options_.stop_grace_ms); }));
  }
  for (auto& f : stopping) f.wait();
}

// Placements and stops reach the node as they are decided, not at its next heartbeat: the wait
// answers when the node's work version grows. Each wait lasts at most a second, so a stopping
// agent is not held; a server that refuses (too many waiters, an old server) leaves the agent
// to its heartbeat period.
void Agent::WaitLoop() {
  ApiClient api(options_.server, options_.token, options_.ca_file);
  const std::string path = "/api/v1/agents/wait?timeout_ms=1000&node=" +
                           httplib::detail::encode_query_param(options_.node);
  int64_t version = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    auto asked = std::chrono::steady_clock::now();
    auto answer = CutOff() ? absl::UnavailableError("cut off")
                           : api.Get(absl::StrCat(path, "&after=", version));
    lock.lock();
    bool quick = std::chrono::steady_clock::now() - asked < std::chrono::milliseconds(100);
    if (!answer.ok() || (quick && answer->value("version", int64_t{0}) == version)) {
      cv_.wait_for(lock,
                   std::chrono::milliseconds(
                       WaitBackoffMs(answer.status(), options_.node, options_.heartbeat_ms)),
                   [this] { return stop_; });
      continue;
    }
    int64_t now = answer->value("version", int64_t{0});
    if (now > version) {
      work_ = true;
      cv_.notify_all();
    }
    version = now;  // lower after a server restart: start over
  }
}

std::map<std::string, std::string> Agent::GpuEnv(const AgentAssignment& a) const {
  std::vector<std::string> visible;
  std::map<std::string, std::string> env;
  for (const GrantRecord& g : a.grants) {
    const int device = g.device;
    const DiscoveredGpu* gpu = nullptr;
    for (const DiscoveredGpu& d : gpus_) {
      if (d.index == device) gpu = &d;
    }
    if (gpu == nullptr) continue;
    if (!g.profile.empty()) {
      std::string uuid;
      for (const auto& m : gpu->mig_instances) {
        if (m.profile == g.profile && m.start == g.start) uuid = m.uuid;
      }
      if (!uuid.empty()) visible.push_back(uuid);
      continue;
    }
    visible.push_back(gpu->uuid);
    if (a.mode == DeliveryMode::kShared && mps_) {
      auto [mem, pct] = ShareCaps(g);
      for (const auto& [k, v] : mps_->ClientEnv(device, mem, pct)) env[k] = v;
    }
  }
  env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(visible, ",");
  env["NVIDIA_VISIBLE_DEVICES"] = visible.empty() ? "void" : absl::StrJoin(visible, ",");
  return env;
}

namespace {

// Whether this machine has an account (passwd entry) with this uid.
bool AccountExists(int64_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  return ::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof(buf), &found) == 0 &&
         found != nullptr;
}

}  // namespace

absl::StatusOr<std::pair<int64_t, int64_t>> Agent::TenantIds(const AgentAssignment& a) {
  if (options_.single_user) return std::make_pair(int64_t{-1}, int64_t{-1});
  int64_t uid = a.uid.value_or(0);
  if (uid > 0) return std::make_pair(uid, a.gid.value_or(uid));
  const std::string& tenant = a.tenant;
  if (auto it = tenant_uids_.find(tenant); it != tenant_uids_.end()) {
    return std::make_pair(it->second, it->second);
  }
  // Deterministic first choice, so agents on other nodes tend to agree; probing past uids taken
  // by another tenant or by an account this machine already has (`nobody`, a person's uid): a
  // tenant's jobs must never run as, and read the files of, someone who is not the tenant.
  const int64_t size = options_.uid_max - options_.uid_min + 1;
  std::set<int64_t> taken;
  for (const auto& [t, u] : tenant_uids_) taken.insert(u);
  const int64_t start =
      size <= 0 ? 0
                : static_cast<int64_t>(std::stoull(Sha256Hex(tenant).substr(0, 12), nullptr, 16) %
                                       static_cast<uint64_t>(size));
  const int64_t tries = std::min<int64_t>(size, static_cast<int64_t>(taken.size()) + 100000);
  uid = -1;
  for (int64_t i = 0; i < tries && uid < 0; ++i) {
    const int64_t candidate = options_.uid_min + (start + i) % size;
    if (!taken.count(candidate) && !AccountExists(candidate)) uid = candidate;
  }
  if (uid < 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no free uid in --uid-range ", options_.uid_min, "-", options_.uid_max, " for tenant \"",
        tenant,
        "\" (every uid tried is another tenant's or an existing account's); set uid on the tenant "
        "document"));
  }
  tenant_uids_[tenant] = uid;
  json saved = tenant_uids_;
  std::string path = options_.data_dir + "/tenant-uids.json";
  {
    std::ofstream out(path + ".tmp");
    out << saved.dump();
  }
  std::error_code ec;
  std::filesystem::rename(path + ".tmp", path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": ", ec.message()));
  return std::make_pair(uid, uid);
}

std::map<std::string, std::string> Agent::JobEnv(const AgentAssignment& a, const std::string& home,
                                                 int64_t uid) const {
  std::map<std::string, std::string> env = DeferLoaderEnv(a.env);
  std::string user = absl::StrCat("carve-", a.tenant);
  if (uid < 0) uid = ::getuid();
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof(buf), &found) == 0 &&
      found != nullptr) {
    user = found->pw_name;
  }
  env.emplace("HOME", home);
  env["USER"] = user;
  env["LOGNAME"] = user;
  env["CARVE_JOB_ID"] = std::to_string(a.job);
  env["CARVE_REPLICA"] = std::to_string(a.replica);
  env["CARVE_NODE"] = options_.node;
  env["CARVE_ATTEMPT"] = std::to_string(a.attempt);
  return env;
}

void Agent::Launch(const AgentAssignment& a) {
  Replica r;
  r.job = a.job;
  r.index = a.replica;
  r.attempt = a.attempt;
  // An earlier attempt of the same replica still kept (its end not yet taken by the server):
  // the new one starts once it is forgotten; the server sends the assignment again meanwhile.
  if (replicas_.count({r.job, r.index})) return;
  // Logs and status files stay in the agent's private directory (the job gets descriptors);
  // work and checkpoint directories are the tenant user's, in the jobs directory.
  const std::string data = std::filesystem::absolute(options_.data_dir).string();
  const std::string& jobs = options_.jobs_dir;
  const std::string& tenant = a.tenant;
  r.log_path =
      absl::StrCat(TenantDir(data + "/logs", tenant), "/job-", r.job, "-", r.index, ".log");
  auto ids = TenantIds(a);
  DirOwner owner;
  if (ids.ok()) owner = {ids->first, ids->second};
  // The server names a checkpoint root every node can reach; else keep it local.
  std::string checkpoint_root = a.checkpoint_root;
  if (checkpoint_root.empty()) checkpoint_root = jobs + "/checkpoints";
  auto checkpoints =
      MakeDirBeneath(checkpoint_root + "/tenants", absl::StrCat(tenant, "/job-", r.job), owner);
  auto home = MakeDirBeneath(jobs + "/work/tenants", tenant, owner);
  auto workdir = MakeDirBeneath(jobs + "/work/tenants",
                                absl::StrCat(tenant, "/", a.project, "/", a.workdir), owner);
  absl::Status dirs = !ids.ok()           ? ids.status()
                      : !checkpoints.ok() ? checkpoints.status()
                      : !home.ok()        ? home.status()
                                          : workdir.status();
  std::error_code ec;
  r.status_path = absl::StrCat(options_.data_dir, "/status/job-", r.job, "-", r.index);
  std::filesystem::remove(r.status_path, ec);
  LaunchSpec spec;
  spec.argv = {options_.self_exe, "internal-run", "--status-fd", "3", "--"};
  spec.argv.insert(spec.argv.end(), a.command.begin(), a.command.end());
  spec.status_path = r.status_path;
  spec.uid = owner.uid;
  spec.gid = owner.gid;
  spec.env = JobEnv(a, home.ok() ? *home : jobs, owner.uid);
  spec.env["CARVE_CHECKPOINT_DIR"] = checkpoints.ok() ? *checkpoints : "";
  r.grants = a.grants;
  if (devices_->name() != "simulated") {
    spec.restrict_devices = true;
    spec.allowed_devices = NvidiaDeviceNodes(r.grants, gpus_);
  } else {
    // Jobs of every tenant write their simulated device use here (sticky, like /tmp).
    spec.env["CARVE_SIM_GPU_DIR"] = jobs + "/simgpu";
    for (const GrantRecord& g : a.grants) {
      for (const DiscoveredGpu& d : gpus_) {
        if (d.index != g.device) continue;
        std::string dir = jobs + "/simgpu/" + d.uuid;
        if (::mkdir(dir.c_str(), 01777) == 0 || errno == EEXIST) ::chmod(dir.c_str(), 01777);
      }
    }
  }
  r.gpu_isolation = GpuIsolation(a);
  // Dynamic partitions are created for the replica before it starts (and destroyed by Reclaim).
  std::string create_error;
  for (const GrantRecord& g : a.grants) {
    if (!g.created || !create_error.empty()) continue;
    auto uuid = devices_->CreateMigInstance(g.device, g.profile, g.start);
    if (!uuid.ok()) create_error = std::string(uuid.status().message());
  }
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;
  for (const auto& [k, v] : GpuEnv(a)) spec.env[k] = v;
  spec.workdir = workdir.ok() ? *workdir : "";
  if (create_error.empty() && !dirs.ok()) create_error = std::string(dirs.message());
  spec.log_path = r.log_path;
  // Unique on this machine: several agents (and several Carve installations) may share it.
  spec.group_name = absl::StrCat(GroupPrefix(), r.job, "-r", r.index);
  spec.limits = {a.cpu_milli, a.memory_mib, options_.job_pids_max, a.cpu_request_milli};
  r.started_us = WallUs();
  const int64_t max_runtime = a.max_runtime_us;
  r.deadline_us = max_runtime > 0 ? r.started_us + max_runtime : 0;
  auto handle = !create_error.empty()
                    ? absl::StatusOr<ProcessHandle>(absl::FailedPreconditionError(create_error))
                    : launcher_->Launch(spec);
  if (handle.ok()) {
    r.handle = *handle;
    r.launched = true;
    exits_->Watch(r.handle.pid);  // false: PollAndEnforce finds the end at a heartbeat
    if (devices_->name() == "simulated") {
      r.handle.enforcement.devices =
          "simulated GPUs: no device nodes to restrict; every job on the node shares the "
          "simulated GPU directory";
    }
    if (options_.single_user) {
      r.handle.enforcement.identity = absl::StrCat("single-user: jobs run as uid ", ::getuid(),
                                                   ", not isolated from each other");
    }
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
  int64_t now = WallUs();
  for (auto& [key, r] : replicas_) {
    if (r.exit || !r.launched) continue;
    if (r.deadline_us > 0 && now > r.deadline_us && !r.timed_out) {
      r.timed_out = true;
      StopAsync(r.handle);
    }
    auto status = launcher_->Poll(r.handle);
    if (status.ok() && status->has_value()) {
      exits_->Forget(r.handle.pid);
      // The group leader's record is the command's own end, also for a re-adopted replica.
      r.exit = ReadReplicaStatus(r.status_path).value_or(**status);
      r.ended_us = WallUs();
      StartReclaim(r);
    }
  }
}

void Agent::ShipLogs() {
  ApiClient api(options_.server, options_.token, options_.ca_file);
  for (auto& [key, r] : replicas_) {
    ShipLog(api, r);
    FreeLog(r);
  }
}

void Agent::ShipLog(ApiClient& api, Replica& r) {
  const int64_t room = options_.max_log_bytes - r.shipped;
  if (room <= 0) return;
  std::ifstream in(r.log_path, std::ios::binary);
  if (!in) return;
  in.seekg(r.shipped);
  std::string chunk(static_cast<size_t>(std::min<int64_t>(int64_t{1} << 20, room)), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  if (chunk.empty()) return;
  auto sent = api.PostText(
      absl::StrCat("/api/v1/agents/logs?job=", r.job, "&replica=", r.index, "&offset=", r.shipped),
      chunk);
  // Not found: the server keeps no log for it (the job or this placement is gone), so the bytes
  // are not resent forever.
  if (sent.ok() || absl::IsNotFound(sent.status())) r.shipped += static_cast<int64_t>(chunk.size());
}

void Agent::FreeLog(Replica& r) {
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(r.log_path, ec));
  if (ec) return;
  const int64_t limit = options_.max_log_bytes;
  r.log_truncated |= size > limit;
  const int64_t end = r.shipped >= limit ? size : r.shipped;  // never shipped past the limit
  if (end <= r.freed) return;
  int fd = ::open(r.log_path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  int rc =
      fd < 0 ? -1
             : ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, r.freed, end - r.freed);
  int err = errno;
  if (fd >= 0) ::close(fd);
  if (rc == 0) {
    r.freed = end;
    r.log_disk = absl::StrCat(
        "bounded: each heartbeat frees the bytes shipped to the server or past --max-log-bytes (",
        limit, ") by hole punching; output written since the last heartbeat is not yet freed");
  } else {
    r.log_disk = absl::StrCat("not bounded: cannot punch holes in the node's copy (",
                              std::strerror(err), "): it keeps all of the job's output");
  }
}

void Agent::StartReclaim(Replica& r) {
  // The record goes to the server at once: a heartbeat follows it, not the next period.
  auto record = std::make_shared<std::promise<json>>();
  stopping_.push_back(std::async(std::launch::async, [this, record, copy = r] {
    record->set_value(Reclaim(copy));
    Wake();
  }));
  r.reclaiming = record->get_future().share();
}

void Agent::StopLogged(const ProcessHandle& handle, int64_t grace_ms) {
  // Best effort: what survives shows in the reclaim checks (processes-gone).
  if (absl::Status st = launcher_->Stop(handle, grace_ms); !st.ok()) {
    LogWarn("stopping process group ", handle.pid, " failed: ", st.message());
  }
}

void Agent::StopAsync(const ProcessHandle& handle, int64_t grace_ms) {
  if (grace_ms < 0) grace_ms = options_.stop_grace_ms;
  stopping_.push_back(
      std::async(std::launch::async, [this, handle, grace_ms] { StopLogged(handle, grace_ms); }));
}

json Agent::UncheckedReclaim(const Replica& r) {
  if (r.launched) {
    StopLogged(r.handle, options_.stop_grace_ms);
    if (absl::Status st = launcher_->Cleanup(r.handle); !st.ok()) {
      LogWarn("cleanup of process group ", r.handle.pid, " failed: ", st.message());
    }
  }
  return {{"status", "verified"},
          {"checks", json::array()},
          {"quarantine", json::array()},
          {"oom_killed", false},
          {"used", UsedJson(ResourceUse{}, r.peak_device_mib, r.busy_seconds)},
          {"time_us", WallUs()}};
}

json Agent::Reclaim(Replica r) {
  if (options_.broken.count("reclaim-checks")) return UncheckedReclaim(r);
  json checks = json::array();
  bool verified = true;
  json quarantine = json::array();
  auto check = [&](const std::string& name, bool ok, const std::string& observed, int device = -1) {
    checks.push_back({{"name", name}, {"ok", ok}, {"observed", observed}, {"time_us", WallUs()}});
    if (device >= 0) checks.back()["device"] = device;
    verified &= ok;
    if (!ok && device >= 0) quarantine.push_back(device);
  };
  bool oom_killed = false;
  json used = UsedJson(ResourceUse{}, r.peak_device_mib, r.busy_seconds);
  if (r.launched) {
    oom_killed = launcher_->OomKills(r.handle) > 0;
    bool stragglers = launcher_->Alive(r.handle);
    if (stragglers) StopLogged(r.handle, options_.stop_grace_ms);
    bool left = launcher_->Alive(r.handle);
    check("processes-gone", !left,
          left         ? "processes of the group survived SIGKILL"
          : stragglers ? "stragglers stopped (SIGTERM, then SIGKILL after the grace period)"
                       : "process group and cgroup empty");
    // Final: its processes are gone.
    used = UsedJson(launcher_->Usage(r.handle), r.peak_device_mib, r.busy_seconds);
  }
  std::set<int> devices;
  for (const GrantRecord& g : r.grants) {
    if (g.device >= 0) devices.insert(g.device);
  }
  // Device processes first: a driver refuses to destroy an instance that a process still uses.
  for (int device : devices) CheckDeviceProcesses(r, device, check, checks);
  for (const GrantRecord& g : r.grants) {
    if (!g.profile.empty() && g.created) CheckDestroyed(g, check);
  }
  // Memory last, once instances made for the replica (and their reservations) are gone.
  for (int device : devices) CheckDeviceMemory(r, device, check, checks);
  // After the device checks: a straggler keeps its cgroup, which Owns reads.
  if (absl::Status st = r.launched ? launcher_->Cleanup(r.handle) : absl::OkStatus(); !st.ok()) {
    LogWarn("cleanup of process group ", r.handle.pid, " failed: ", st.message());
  }
  return {{"status", verified ? "verified" : "failed"},
          {"checks", checks},
          {"quarantine", quarantine},
          {"oom_killed", oom_killed},
          {"used", used},
          {"time_us", WallUs()}};
}

template <typename Check>
void Agent::CheckDeviceProcesses(const Replica& r, int device, Check& check, json& checks) {
  DeviceView view = SettledView(device, {r.job, r.index}, false);
  if (!view.processes.ok()) {
    checks.push_back({{"name", "device-processes"},
                      {"ok", true},
                      {"skipped", true},
                      {"device", device},
                      {"observed", std::string(view.processes.message())},
                      {"time_us", WallUs()}});
    return;
  }
  // Every process the device lists is residue unless a live replica placed on the device (or a
  // service of the agent) explains it: the job's own, an escapee, a zombie, a stranger's.
  check("device-processes", view.residue.empty(),
        view.residue.empty() ? absl::StrCat("no process on the device but live replicas' (",
                                            view.process_count, " listed)")
                             : "residue on the device: " + DescribeResidue(view.residue),
        device);
  if (!view.residue.empty()) checks.back()["residue"] = ResidueJson(view, 0)["processes"];
}

template <typename Check>
void Agent::CheckDeviceMemory(const Replica& r, int device, Check& check, json& checks) {
  DeviceView view = SettledView(device, {r.job, r.index}, true);
  if (!view.memory.ok()) {
    checks.push_back({{"name", "device-memory"},
                      {"ok", true},
                      {"skipped", true},
                      {"device", device},
                      {"observed", "not compared: " + std::string(view.memory.message())},
                      {"time_us", WallUs()}});
    return;
  }
  bool ok = view.MemoryClean(options_.memory_tolerance_mib);
  check(
      "device-memory", ok,
      absl::StrCat(std::max<int64_t>(view.Unexplained(), 0),
                   " MiB in use above the device's baseline that no live replica holds (used ",
                   view.used_mib, " MiB, baseline ", view.baseline_mib, " MiB, live replicas ",
                   view.explained_mib, " MiB; tolerance ", options_.memory_tolerance_mib, " MiB)"),
      device);
  checks.back()["used_mib"] = view.used_mib;
  checks.back()["baseline_mib"] = view.baseline_mib;
  if (ok && view.process_count == 0) {
    std::string uuid;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      uuid = uuids_[device];
    }
    baselines_->Lower(uuid, view.used_mib);
  }
}

Explains Agent::ExplainsFor(int device, std::pair<int64_t, int> except) const {
  std::vector<ProcessHandle> handles;
  std::set<int64_t> services;
  std::set<int64_t> daemons;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    for (const auto& [key, live] : live_) {
      if (key != except && live.devices.count(device)) handles.push_back(live.handle);
    }
    services = service_pids_;
    daemons = mps_daemons_;
  }
  // The agent's own MPS daemons and the MPS servers they started (NVML lists a server as a
  // compute process holding memory) are the node's, not residue.
  return [this, handles, services, daemons](int64_t pid) {
    if (services.count(pid) || daemons.count(pid) || daemons.count(ParentPid(pid))) return true;
    for (const ProcessHandle& h : handles) {
      if (launcher_->Owns(h, pid)) return true;
    }
    return false;
  };
}

DeviceView Agent::SettledView(int device, std::pair<int64_t, int> except, bool memory) {
  // Long enough for the loop to publish a replica launched meanwhile.
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(
                      std::max(options_.residue_settle_ms, 2 * options_.heartbeat_ms + 200));
  while (true) {
    std::optional<int64_t> baseline;
    {
      std::lock_guard<std::mutex> lock(live_mu_);
      baseline = baselines_->Get(uuids_[device]);
    }
    DeviceView view = ViewDevice(*devices_, device, baseline, ExplainsFor(device, except));
    bool clean = memory ? view.MemoryClean(options_.memory_tolerance_mib) : view.residue.empty();
    if (clean || std::chrono::steady_clock::now() >= deadline) return view;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Agent::PublishLive() {
  std::map<std::pair<int64_t, int>, LiveReplica> live;
  for (const auto& [key, r] : replicas_) {
    if (!r.launched || !r.reclaim.is_null()) continue;
    LiveReplica& l = live[key];
    l.handle = r.handle;
    for (const GrantRecord& g : r.grants) l.devices.insert(g.device);
  }
  std::lock_guard<std::mutex> lock(live_mu_);
  live_ = std::move(live);
  for (const DiscoveredGpu& g : gpus_) uuids_[g.index] = g.uuid;
}

void Agent::DeclareDeviceService(int64_t pid, bool serving) {
  std::lock_guard<std::mutex> lock(live_mu_);
  if (serving) {
    service_pids_.insert(pid);
  } else {
    service_pids_.erase(pid);
  }
}

std::optional<GpuResidue> Agent::ResidueReport(const DiscoveredGpu& gpu) const {
  if (baselines_ == nullptr) return std::nullopt;
  DeviceView view =
      ViewDevice(*devices_, gpu.index, baselines_->Get(gpu.uuid), ExplainsFor(gpu.index, {-1, -1}));
  return ResidueSeen(view, options_.memory_tolerance_mib);
}

template <typename Check>
void Agent::CheckDestroyed(const GrantRecord& grant, Check& check) {
  // A dynamic instance made for the replica is destroyed with it; the driver must agree.
  const int device = grant.device;
  const int start = grant.start;
  std::string what = absl::StrCat(grant.profile, " at slice ", start);
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

ReplicaReport Agent::ReportOf(const Replica& r) const {
  ReplicaReport report;
  report.job = r.job;
  report.replica = r.index;
  report.attempt = r.attempt;
  report.state = r.exit ? ReplicaState::kExited : ReplicaState::kRunning;
  report.pid = r.handle.pid;
  report.started_us = r.started_us;
  report.enforcement = EnforcementText(r.handle.enforcement);
  report.gpu_isolation = r.gpu_isolation;
  if (r.log_truncated) report.log_truncated_at = options_.max_log_bytes;
  report.log_disk = r.log_disk;
  {
    std::lock_guard<std::mutex> lock(live_mu_);
    if (auto f = fenced_.find({r.job, r.index}); f != fenced_.end()) report.fenced_us = f->second;
  }
  if (!r.exit) return report;
  if (!r.reclaim.is_null()) {
    report.reclaim = r.reclaim;
    report.oom_killed = r.reclaim.value("oom_killed", false);
  }
  ReplicaEnd& end = report.end.emplace();
  end.ended_us = r.ended_us;
  end.timed_out = r.timed_out;
  if (r.exit->exited) {
    end.exit_code = r.exit->code;
  } else {
    end.signal = r.exit->signal;
  }
  return report;
}

namespace {

// A device's health word as a backend says it; a word outside the protocol's set counts as
// unhealthy (the scheduler treats it so) and stays in the reason.
std::pair<DeviceHealth, std::string> HealthOf(const std::string& word, const std::string& reason) {
  if (std::optional<DeviceHealth> health = ParseHealth(word)) return {*health, reason};
  return {DeviceHealth::kUnhealthy, reason.empty() ? word : absl::StrCat(word, " ", reason)};
}

}  // namespace

GpuReport Agent::ReportOf(const DiscoveredGpu& g) const {
  GpuReport report;
  report.index = g.index;
  std::tie(report.health, report.health_reason) = HealthOf(g.health, g.health_reason);
  report.utilization_pct = g.utilization_pct;
  if (!g.share_enforcement.empty()) report.share_enforcement = g.share_enforcement;
  for (const DiscoveredMigInstance& m : g.mig_instances) {
    MigInstanceReport& instance = report.mig_instances.emplace_back();
    instance.instance = m;
    // The backend says an instance's own fault as "WORD reason".
    if (auto h = g.instance_health.find(m.start); h != g.instance_health.end()) {
      size_t space = h->second.find(' ');
      std::tie(instance.health, instance.health_reason) =
          HealthOf(h->second.substr(0, space),
                   space == std::string::npos ? "" : h->second.substr(space + 1));
    }
  }
  report.residue = ResidueReport(g);
  return report;
}

HeartbeatRequest Agent::Report() const {
  HeartbeatRequest body;
  body.node = options_.node;
  for (const auto& [key, r] : replicas_) body.replicas.push_back(ReportOf(r));
  body.gpus.emplace();
  for (const DiscoveredGpu& g : gpus_) body.gpus->push_back(ReportOf(g));
  for (const auto& [gpu, result] : layout_results_) body.layouts.push_back(result);
  return body;
}

void Agent::SampleDevices() {
  // At most once a second per replica: attributing a device process to a replica reads /proc.
  constexpr int64_t kEveryUs = 1'000'000;
  const int64_t now = WallUs();
  std::map<int, absl::StatusOr<std::vector<DeviceProcess>>> listed;  // one listing per device
  for (auto& [key, r] : replicas_) {
    if (!r.launched || r.exit || r.grants.empty()) continue;
    if (r.sampled_us > 0 && now - r.sampled_us < kEveryUs) continue;
    std::set<int> devices;  // two MIG instances of one GPU: its processes count once
    bool whole = true;      // busy time is the device's: only a replica alone on it owns it
    for (const GrantRecord& g : r.grants) {
      devices.insert(g.device);
      whole &= g.profile.empty() && g.compute_milli >= 1000;
    }
    int64_t held = 0;
    bool read = true;
    double busy = 0;
    for (int device : devices) {
      auto it = listed.find(device);
      if (it == listed.end()) it = listed.emplace(device, devices_->Processes(device)).first;
      read &= it->second.ok();
      auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                              [&](const DiscoveredGpu& d) { return d.index == device; });
      // No more than the device has, and utilization within 0..100: on simulated GPUs the
      // figures come from files a job can write (red team: a job recorded 74,350 busy seconds
      // in 8 s, and raised another tenant's).
      const int64_t cap =
          gpu != gpus_.end() && gpu->memory_mib > 0 ? gpu->memory_mib : int64_t{1} << 40;
      int64_t on_device = 0;
      for (const DeviceProcess& p : it->second.ok() ? *it->second : std::vector<DeviceProcess>{}) {
        if (p.memory_mib > 0 && launcher_->Owns(r.handle, p.pid)) {
          on_device = std::min(cap, on_device + std::min(cap, p.memory_mib));
        }
      }
      held += on_device;
      if (gpu == gpus_.end() || gpu->utilization_pct < 0) whole = false;
      if (whole && r.sampled_us > 0) {
        busy += static_cast<double>(now - r.sampled_us) / 1e6 *
                std::clamp(gpu->utilization_pct, 0, 100) / 100;
      }
    }
    if (read) r.peak_device_mib = std::max(r.peak_device_mib, held);
    if (whole && r.sampled_us > 0) r.busy_seconds = std::max(r.busy_seconds, 0.0) + busy;
    r.sampled_us = now;
  }
}

absl::Status Agent::Tick() {
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;  // health may change
  if (mps_) mps_->Supervise(gpus_);  // a dead MPS daemon is a device fault
  PublishMpsDaemons();
  PollAndEnforce();
  SampleDevices();
  VerifyMpsClients();
  for (auto& [key, r] : replicas_) {
    if (r.reclaim.is_null() && r.reclaiming.valid() &&
        r.reclaiming.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      r.reclaim = r.reclaiming.get();
    }
  }
  PublishLive();
  std::erase_if(stopping_, [](std::future<void>& f) {
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  if (CutOff()) {
    return absl::UnavailableError(absl::StrCat("cut off from the server on purpose (",
                                               options_.jobs_dir, "/simgpu/cut-off exists)"));
  }
  if (absl::Status s = RegisterAgainIfUpgraded(); !s.ok()) return s;
  ShipLogs();
  ApiClient api(options_.server, options_.token, options_.ca_file);
  const int64_t sent_ms = SteadyMs();
  auto sent = api.Post("/api/v1/agents/heartbeat", Report().ToJson());
  if (!sent.ok()) return sent.status();
  absl::StatusOr<HeartbeatAnswer> answer = HeartbeatAnswer::FromJson(*sent);
  if (!answer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the server's answer: ", answer.status().message()));
  }
  heard_ms_ = sent_ms;
  // An answer slower than the fence is too late to start work on: the server may have given up
  // on this node meanwhile and run those jobs elsewhere. Its stops are still followed.
  if (options_.fence_after_ms > 0 && SteadyMs() - sent_ms >= options_.fence_after_ms) {
    LogWarn("node ", options_.node, ": the server's answer took ", SteadyMs() - sent_ms,
            " ms (--fence-after-ms ", options_.fence_after_ms, "): its new work is not started");
    answer->assignments.clear();
  }
  // The server has the exits it was just told about: forget those replicas once their output is
  // shipped too.
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    std::error_code ec;
    auto size = std::filesystem::file_size(it->second.log_path, ec);
    bool shipped =
        ec || std::min(static_cast<int64_t>(size), options_.max_log_bytes) <= it->second.shipped;
    bool done = it->second.exit && !it->second.reclaim.is_null() && shipped;
    if (done) {
      std::lock_guard<std::mutex> live(live_mu_);
      fenced_.erase(it->first);
    }
    it = done ? replicas_.erase(it) : std::next(it);
  }
  Follow(*answer);
  SaveState();
  return absl::OkStatus();
}

void Agent::Follow(const HeartbeatAnswer& answer) {
  for (const StopOrder& stop : answer.stop) {
    auto it = replicas_.find({stop.job, stop.replica});
    if (it != replicas_.end() && it->second.launched && !it->second.exit && !it->second.stop_sent) {
      it->second.stop_sent = true;
      StopAsync(it->second.handle, stop.grace_ms.value_or(options_.stop_grace_ms));
    }
  }
  for (const AgentAssignment& a : answer.assignments) Launch(a);
  PublishLive();
  for (const LayoutOrder& order : answer.layouts) ApplyLayout(order);
  if (answer.layouts.empty()) layout_results_.clear();
}

void Agent::ApplyLayout(const LayoutOrder& order) {
  if (auto done = layout_results_.find(order.gpu);
      done != layout_results_.end() && done->second.request == order.request) {
    return;
  }
  std::vector<DiscoveredMigInstance> layout;
  for (const std::string& text : order.layout) {
    size_t at = text.find('@');
    if (at == std::string::npos) continue;  // the server sends resolved profile@start
    layout.push_back({"", text.substr(0, at), std::atoi(text.c_str() + at + 1)});
  }
  absl::Status s = devices_->ApplyMigLayout(order.gpu, layout);
  if (auto gpus = devices_->Discover(); gpus.ok()) gpus_ = *gpus;
  for (const DiscoveredGpu& g : gpus_) {
    if (s.ok() && g.index == order.gpu) baselines_->Retake(*devices_, g);  // new instances
  }
  layout_results_[order.gpu] = {order.gpu, order.request, s.ok(), std::string(s.message()),
                                WallUs()};
}

void Agent::SaveState() const {
  json reps = json::array();
  for (const auto& [key, r] : replicas_) {
    if (!r.launched || r.exit) continue;
    json grants = json::array();
    for (const GrantRecord& g : r.grants) grants.push_back(GrantToJson(g));
    reps.push_back({{"job", r.job},
                    {"replica", r.index},
                    {"attempt", r.attempt},
                    {"pid", r.handle.pid},
                    {"group_path", r.handle.group_path},
                    {"mechanism", r.handle.enforcement.mechanism},
                    {"detail", r.handle.enforcement.detail},
                    {"identity", r.handle.enforcement.identity},
                    {"devices", r.handle.enforcement.devices},
                    {"log_path", r.log_path},
                    {"status_path", r.status_path},
                    {"grants", grants},
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

std::string Agent::GroupPrefix() const {
  return absl::StrCat(options_.node, "-", Sha256Hex(options_.data_dir).substr(0, 8), "-job-");
}

void Agent::SweepGroups() {
  std::set<std::string> keep;
  for (const auto& [key, r] : replicas_) keep.insert(r.handle.group_path);
  SweptGroups swept = launcher_->Sweep(GroupPrefix(), keep);
  if (!swept.removed.empty()) {
    LogInfo("node ", options_.node, ": removed ", swept.removed.size(),
            " empty cgroup(s) of replicas that ended while the agent was down: ",
            absl::StrJoin(swept.removed, ", "));
  }
  if (!swept.killed.empty()) {
    LogWarn("node ", options_.node, ": killed the processes of ", swept.killed.size(),
            " cgroup(s) that no recorded replica owns, and removed them: ",
            absl::StrJoin(swept.killed, ", "));
  }
  for (const std::string& failed : swept.failed) {
    LogWarn("node ", options_.node, ": a leftover cgroup stays: ", failed);
  }
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
    r.attempt = j.value("attempt", 0);
    r.handle.pid = j.value("pid", 0);
    r.handle.group_path = j.value("group_path", "");
    r.handle.enforcement = {j.value("mechanism", ""), j.value("detail", ""),
                            j.value("identity", ""), j.value("devices", "")};
    r.log_path = j.value("log_path", "");
    r.status_path = j.value("status_path", "");
    for (const json& g : j.value("grants", json::array())) r.grants.push_back(GrantFromJson(g));
    r.gpu_isolation = j.value("gpu_isolation", json());
    r.shipped = j.value("shipped", int64_t{0});
    r.started_us = j.value("started_us", int64_t{0});
    r.deadline_us = j.value("deadline_us", int64_t{0});
    r.launched = true;
    if (r.handle.pid <= 0 || !launcher_->Alive(r.handle)) continue;
    exits_->Watch(r.handle.pid);
    replicas_[{r.job, r.index}] = r;
  }
}

}  // namespace carve
