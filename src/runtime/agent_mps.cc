// The agent's part in shared GPUs: their MPS daemons, each share's caps and its record.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/agent.h"
#include "runtime/control_plane.h"
#include "runtime/log.h"
#include "runtime/records.h"

namespace carve {

using json = nlohmann::json;

void Agent::StartMps() {
  MpsSupervisor::Options o;
  const std::string data = std::filesystem::absolute(options_.data_dir).string();
  o.root = !options_.mps_dir.empty()
               ? options_.mps_dir
               : absl::StrCat("/tmp/carve-mps-", Sha256Hex(data).substr(0, 12));
  o.simulated = devices_->name() == "simulated";
  if (options_.mps_control == "none") {
    o.control.clear();
  } else if (!options_.mps_control.empty()) {
    o.control = {options_.mps_control};
  } else if (o.simulated) {
    o.control = {options_.self_exe, "internal-sim-mps"};
  } else {
    o.control = {"nvidia-cuda-mps-control"};
  }
  if (o.simulated) {
    o.env["CARVE_SIM_GPU_DIR"] = options_.jobs_dir + "/simgpu";
    o.env["CARVE_SIM_MPS_SUPERVISOR"] = std::to_string(::getpid());
  }
  mps_ = std::make_unique<MpsSupervisor>(std::move(o));
  mps_->Start(gpus_);
  PublishMpsDaemons();
}

void Agent::PublishMpsDaemons() {
  std::set<int64_t> pids;
  for (const DiscoveredGpu& g : gpus_) {
    const MpsSupervisor::Daemon* d = mps_ ? mps_->Find(g.index) : nullptr;
    if (d != nullptr && d->pid > 0) pids.insert(d->pid);
  }
  std::lock_guard<std::mutex> lock(live_mu_);
  mps_daemons_ = std::move(pids);
}

std::pair<int64_t, int64_t> Agent::ShareCaps(const GrantRecord& grant) const {
  const int64_t compute = grant.compute_milli;
  int64_t mem = grant.memory_mib;
  if (mem <= 0) {  // never uncapped: the GPU's memory in proportion to the compute share
    for (const DiscoveredGpu& d : gpus_) {
      if (d.index == grant.device) mem = d.memory_mib * compute / 1000;
    }
  }
  return {std::max<int64_t>(1, mem), std::max<int64_t>(1, compute / 10)};
}

json Agent::GpuIsolation(const AgentAssignment& a) const {
  if (a.mode != DeliveryMode::kShared || !mps_) return json();
  json out = json::array();
  for (const GrantRecord& g : a.grants) {
    if (!g.profile.empty()) continue;
    auto [mem, pct] = ShareCaps(g);
    mps_->MarkShared(g.device);
    out.push_back(mps_->Record(g.device, mem, pct, a.isolation == "best-effort"));
  }
  return out.size() == 1 ? out[0] : out;
}

namespace {

// Calls `f` on each of the replica's share records (one object, or an array for several GPUs).
template <typename F>
void ForEachShareRecord(json& isolation, F f) {
  if (isolation.is_array()) {
    for (json& record : isolation) f(record);
  } else if (isolation.is_object()) {
    f(isolation);
  }
}

}  // namespace

void Agent::VerifyMpsClients() {
  if (!mps_ || devices_->name() == "simulated") return;
  if (mps_check_.valid()) {
    // Still reading: this heartbeat goes on without it.
    if (mps_check_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    const MpsCheck check = mps_check_.get();
    for (auto& entry : replicas_) {
      Replica& r = entry.second;  // clang 14 cannot capture a structured binding
      if (!r.launched || r.exit) continue;
      ForEachShareRecord(r.gpu_isolation, [&](json& record) { VerifyMpsRecord(r, record, check); });
    }
  }
  StartMpsCheck();
}

void Agent::StartMpsCheck() {
  constexpr int64_t kEveryUs = 1'000'000;
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (mps_check_started_us_ > 0 && now - mps_check_started_us_ < kEveryUs) return;
  std::set<int> gpus;
  for (auto& [key, r] : replicas_) {
    if (!r.launched || r.exit) continue;
    ForEachShareRecord(r.gpu_isolation, [&](json& record) {
      if (record.value("enforced", "") == "mps") gpus.insert(record.value("gpu", -1));
    });
  }
  if (gpus.empty()) return;
  mps_check_started_us_ = now;
  // The device's processes first, then the clients: a process that connects in between is then
  // a client, never one that bypassed MPS.
  MpsCheck check;
  std::vector<MpsSupervisor::ClientQuery> queries;
  for (int gpu : gpus) {
    check.listed.emplace(gpu, devices_->Processes(gpu));
    const MpsSupervisor::Daemon* daemon = mps_->Find(gpu);
    check.daemons[gpu] = daemon == nullptr ? 0 : daemon->pid;
    queries.push_back(mps_->QueryClients(gpu));
  }
  auto round = [check = std::move(check), queries = std::move(queries)]() mutable {
    for (const MpsSupervisor::ClientQuery& q : queries) {
      check.clients.emplace(q.gpu, MpsSupervisor::Clients(q));
    }
    return std::move(check);
  };
  try {
    mps_check_ = std::async(std::launch::async, std::move(round));
  } catch (const std::system_error& e) {  // no thread for it now: the next round tries again
    LogWarn("the MPS client check could not start: ", e.what());
  }
}

void Agent::VerifyMpsRecord(const Replica& r, json& record, const MpsCheck& check) {
  if (record.value("enforced", "") != "mps") return;  // none already, or simulated
  const int gpu = record.value("gpu", -1);
  auto it = check.listed.find(gpu);
  auto known = check.clients.find(gpu);
  if (it == check.listed.end() || known == check.clients.end()) return;  // not in this round
  const MpsSupervisor::Daemon* daemon = mps_->Find(gpu);
  auto was = check.daemons.find(gpu);
  if (daemon == nullptr || was == check.daemons.end() || daemon->pid != was->second) return;
  if (!it->second.ok() || !known->second.ok()) return;  // not read: nothing is concluded
  for (const DeviceProcess& p : *it->second) {
    if (p.memory_mib <= 0 || !launcher_->Owns(r.handle, p.pid)) continue;
    if (known->second->count(p.pid)) {
      if (!record.contains("client")) {
        record["client"] = {
            {"pid", p.pid},
            {"checked", absl::StrCat("process ", p.pid, " of the replica is a client of GPU ", gpu,
                                     "'s MPS server (get_client_list): the limits in its "
                                     "environment apply to it")}};
      }
      continue;
    }
    // Every process of the replica on the GPU is checked while it runs, not only the first.
    record["enforced"] = "none";
    record["bypassed"] = {{"pid", p.pid}, {"memory_mib", p.memory_mib}};
    record["why"] = absl::StrCat(
        "process ", p.pid, " of the replica holds ", p.memory_mib, " MiB on GPU ", gpu,
        " and no MPS server lists it as a client: CUDA ran without MPS and the caps did not apply");
    if (record.contains("limits")) {
      record["requested_not_enforced"] = record["limits"];
      record.erase("limits");
    }
    LogWarn("job ", r.job, " replica ", r.index, ": ", record["why"].get<std::string>());
    return;
  }
}

}  // namespace carve
