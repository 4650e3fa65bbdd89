#include "runtime/reclaim_check.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/node_records.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxCommand = 200;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ResidueProcess DescribeProcess(const DeviceProcess& p) {
  ResidueProcess out;
  out.pid = p.pid;
  out.memory_mib = p.memory_mib;
  const std::string proc = absl::StrCat("/proc/", p.pid);
  std::string stat = ReadFile(proc + "/stat");
  size_t paren = stat.rfind(')');
  if (p.pid <= 0 || paren == std::string::npos) {
    out.state = ProcessState::kGone;
    return out;
  }
  out.state = paren + 2 < stat.size() && stat[paren + 2] == 'Z' ? ProcessState::kDefunct
                                                                : ProcessState::kRunning;
  std::istringstream status(ReadFile(proc + "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    int64_t uid = -1;
    if (fields >> uid) out.uid = uid;
  }
  std::string cmdline = ReadFile(proc + "/cmdline");
  while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
  for (char& c : cmdline) {
    if (c == '\0') c = ' ';
  }
  if (cmdline.empty()) {  // a zombie has no command line left: its name
    size_t open = stat.find('(');
    if (open != std::string::npos && open < paren) {
      cmdline = "[" + stat.substr(open + 1, paren - open - 1) + "]";
    }
  }
  if (cmdline.size() > kMaxCommand) cmdline = cmdline.substr(0, kMaxCommand) + "...";
  out.command = cmdline;
  return out;
}

std::string DescribeResidue(const std::vector<ResidueProcess>& residue) {
  std::vector<std::string> parts;
  for (const ResidueProcess& p : residue) {
    std::vector<std::string> what;
    what.push_back(p.uid >= 0 ? absl::StrCat("uid ", p.uid) : "uid unknown");
    if (p.state != ProcessState::kRunning) what.emplace_back(Name(p.state));
    if (!p.command.empty()) what.push_back("`" + p.command + "`");
    what.push_back(p.memory_mib >= 0 ? absl::StrCat(p.memory_mib, " MiB") : "memory unknown");
    parts.push_back(absl::StrCat("pid ", p.pid, " (", absl::StrJoin(what, ", "), ")"));
  }
  return absl::StrJoin(parts, "; ");
}

DeviceView ViewDevice(DeviceBackend& devices, int index, std::optional<int64_t> baseline_mib,
                      const Explains& explains) {
  DeviceView view;
  absl::StatusOr<std::vector<DeviceProcess>> processes = devices.Processes(index);
  bool explained_known = true;
  if (processes.ok()) {
    view.process_count = static_cast<int>(processes->size());
    for (const DeviceProcess& p : *processes) {
      if (p.pid > 0 && explains(p.pid)) {
        if (p.memory_mib >= 0) view.explained_mib += p.memory_mib;
        explained_known &= p.memory_mib >= 0;
        continue;
      }
      view.residue.push_back(DescribeProcess(p));
    }
  } else {
    view.processes = processes.status();
  }
  absl::StatusOr<int64_t> used = devices.UsedMemory(index);
  if (!used.ok()) {
    view.memory = used.status();
  } else if (!baseline_mib) {
    view.memory = absl::FailedPreconditionError("the agent has no baseline for this GPU");
  } else if (!processes.ok()) {
    view.memory = absl::UnavailableError("its processes could not be listed");
  } else if (!explained_known) {
    view.memory =
        absl::UnavailableError("a live replica's process on it does not report its memory");
  } else {
    view.used_mib = *used;
    view.baseline_mib = *baseline_mib;
  }
  return view;
}

json ResidueJson(const DeviceView& view, int64_t tolerance_mib) {
  std::optional<GpuResidue> residue = ResidueSeen(view, tolerance_mib);
  return residue ? residue->ToJson() : json();
}

void DeviceBaselines::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  std::ifstream in(path_);
  if (!in) return;
  json j = json::parse(in, nullptr, false);
  if (!j.is_object()) return;
  for (const auto& [uuid, mib] : j.items()) {
    if (mib.is_number_integer()) mib_[uuid] = mib.get<int64_t>();
  }
}

void DeviceBaselines::SaveLocked() const {
  {
    std::ofstream out(path_ + ".tmp");
    out << json(mib_).dump();
  }
  std::error_code ec;
  std::filesystem::rename(path_ + ".tmp", path_, ec);
}

void DeviceBaselines::Take(DeviceBackend& devices, const DiscoveredGpu& gpu) {
  absl::StatusOr<int64_t> used = devices.UsedMemory(gpu.index);
  if (!used.ok() || gpu.uuid.empty()) return;
  absl::StatusOr<std::vector<DeviceProcess>> processes = devices.Processes(gpu.index);
  int64_t held = 0;
  if (processes.ok()) {
    for (const DeviceProcess& p : *processes) held += std::max<int64_t>(p.memory_mib, 0);
  }
  mib_[gpu.uuid] = std::max<int64_t>(*used - held, 0);
}

void DeviceBaselines::TakeMissing(DeviceBackend& devices, const std::vector<DiscoveredGpu>& gpus) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const DiscoveredGpu& g : gpus) {
    if (!mib_.count(g.uuid)) Take(devices, g);
  }
  SaveLocked();
}

void DeviceBaselines::Retake(DeviceBackend& devices, const DiscoveredGpu& gpu) {
  std::lock_guard<std::mutex> lock(mu_);
  Take(devices, gpu);
  SaveLocked();
}

void DeviceBaselines::Lower(const std::string& uuid, int64_t used_mib) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mib_.find(uuid);
  if (it == mib_.end() || used_mib >= it->second) return;
  it->second = used_mib;
  SaveLocked();
}

std::optional<int64_t> DeviceBaselines::Get(const std::string& uuid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mib_.find(uuid);
  if (it == mib_.end()) return std::nullopt;
  return it->second;
}

}  // namespace carve
