// The fake's scenario from a directory, for tests that run the real `carve agent` process
// (which the FakeNvml* functions cannot reach). Set FAKE_NVML_DIR; then:
//   DIR/gpus                 one GPU per line: "<uuid> <memory MiB> [mig] <name...>" (mig: MIG
//                            mode on, no instances yet), read at nvmlInit_v2
//   DIR/processes/<pid>      "<gpu uuid> <MiB>" lines: a compute process on those GPUs, listed
//                            while <pid> lives (the driver frees a dead process's memory)
//   DIR/utilization/<uuid>   the GPU's activity in percent
//   DIR/xid/<name>           "<gpu uuid> <xid> [<GPU instance id>]": a critical XID, delivered
//                            once (then removed)
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fake_nvml_state.h"

namespace fake_nvml {
namespace {

const char* Dir() { return std::getenv("FAKE_NVML_DIR"); }

bool Alive(unsigned int pid) {
  if (pid == 0 || kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

int GpuByUuid(const std::string& uuid) {
  for (size_t i = 0; i < State().gpus.size(); ++i) {
    if (State().gpus[i].uuid == uuid) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

void LoadDirScenario() {
  if (Dir() == nullptr || !State().gpus.empty()) return;
  std::ifstream in(std::string(Dir()) + "/gpus");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    FakeGpu gpu;
    if (!(fields >> gpu.uuid >> gpu.memory_mib)) continue;
    std::getline(fields >> std::ws, gpu.name);
    // "mig NAME": MIG mode on, no instances yet.
    if (gpu.name.rfind("mig ", 0) == 0) {
      gpu.mig_enabled = true;
      gpu.name = gpu.name.substr(4);
    }
    State().gpus.push_back(gpu);
  }
}

void RefreshFromDir(size_t gpu) {
  if (Dir() == nullptr || gpu >= State().gpus.size()) return;
  FakeGpu& g = State().gpus[gpu];
  g.processes.clear();
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(Dir()) + "/processes", ec)) {
    unsigned int pid =
        static_cast<unsigned int>(std::strtoul(entry.path().filename().c_str(), nullptr, 10));
    std::ifstream in(entry.path());
    std::string uuid;
    unsigned long long mib = 0;
    while (in >> uuid >> mib) {
      if (uuid == g.uuid && Alive(pid)) g.processes.push_back({pid, mib << 20, -1});
    }
  }
  std::ifstream(std::string(Dir()) + "/utilization/" + g.uuid) >> g.utilization;
}

void XidsFromDir() {
  if (Dir() == nullptr) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(Dir()) + "/xid", ec)) {
    std::ifstream in(entry.path());
    std::string uuid;
    unsigned long long xid = 0;
    unsigned int instance = nvml::kNoInstance;
    in >> uuid >> xid >> instance;
    int gpu = GpuByUuid(uuid);
    if (gpu >= 0 && xid > 0) State().events.push_back({static_cast<size_t>(gpu), xid, instance});
    std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace fake_nvml
