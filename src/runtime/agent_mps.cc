// The agent's part in shared GPUs: their MPS daemons, each share's caps and its record.
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/agent.h"
#include "runtime/control_plane.h"
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

}  // namespace carve
