#include "runtime/probe.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace carve {

using json = nlohmann::json;

namespace {

// This process's groups (/proc/self/cgroup) and the mounted hierarchies (/proc/self/mounts).
struct OwnCgroups {
  std::string groups;
  std::string mounts;
};

// The directory of this process's group in the hierarchy holding `controller` (v1), or in the
// cgroup2 hierarchy when `controller` is empty.
std::optional<std::string> OwnGroup(const OwnCgroups& own, const std::string& controller) {
  std::optional<std::string> path;
  for (absl::string_view line : absl::StrSplit(own.groups, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    std::vector<std::string> names = absl::StrSplit(f[1], ',');
    bool match = controller.empty()
                     ? f[0] == "0" && f[1].empty()
                     : std::find(names.begin(), names.end(), controller) != names.end();
    if (match) path = f[2];
  }
  if (!path) return std::nullopt;
  for (absl::string_view line : absl::StrSplit(own.mounts, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 4) continue;
    std::vector<std::string> options = absl::StrSplit(f[3], ',');
    bool match = controller.empty() ? f[2] == "cgroup2"
                                    : f[2] == "cgroup" && std::find(options.begin(), options.end(),
                                                                    controller) != options.end();
    if (match) return f[1] + (*path == "/" ? "" : *path);
  }
  return std::nullopt;
}

std::optional<int64_t> Number(const std::optional<std::string>& text) {
  int64_t n = 0;
  if (!text || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &n)) return std::nullopt;
  return n;
}

// The tightest of the values a limit was read as (nullopt: none said one).
struct Limit {
  std::optional<int64_t> value;
  void Tighten(std::optional<int64_t> v) {
    if (v && (!value || *v < *value)) value = v;
  }
};

// `file` of the group in `dir`, recorded in `sources` when it could be read.
std::optional<std::string> Read(const ProbeHost& host, const std::string& dir,
                                const std::string& file, json& sources) {
  std::string path = dir + "/" + file;
  std::optional<std::string> text = host.read_file(path);
  if (text) sources.push_back({{"file", path}, {"value", absl::StripAsciiWhitespace(*text)}});
  return text;
}

}  // namespace

json OwnCgroupLimits(const ProbeHost& host) {
  json sources = json::array();
  Limit memory, cpu, pids;
  std::optional<std::string> groups = host.read_file("/proc/self/cgroup");
  std::optional<std::string> mounts = host.read_file("/proc/self/mounts");
  OwnCgroups own{groups.value_or(""), mounts.value_or("")};
  if (auto v2 = OwnGroup(own, "")) {
    memory.Tighten(Number(Read(host, *v2, "memory.max", sources)));
    std::optional<std::string> text = Read(host, *v2, "cpu.max", sources);
    std::vector<std::string> f =
        text ? absl::StrSplit(absl::StripAsciiWhitespace(*text), ' ') : std::vector<std::string>{};
    auto quota = f.size() == 2 ? Number(f[0]) : std::nullopt;
    auto period = f.size() == 2 ? Number(f[1]) : std::nullopt;
    if (quota && period && *period > 0) cpu.Tighten(*quota * 1000 / *period);
    pids.Tighten(Number(Read(host, *v2, "pids.max", sources)));
  }
  if (auto v1 = OwnGroup(own, "memory")) {
    auto bytes = Number(Read(host, *v1, "memory.limit_in_bytes", sources));
    if (bytes && *bytes < (int64_t{1} << 62)) memory.Tighten(bytes);  // larger: unlimited
  }
  if (auto v1 = OwnGroup(own, "cpu")) {
    auto quota = Number(Read(host, *v1, "cpu.cfs_quota_us", sources));
    auto period = Number(Read(host, *v1, "cpu.cfs_period_us", sources));
    if (quota && *quota > 0 && period && *period > 0) cpu.Tighten(*quota * 1000 / *period);
  }
  if (auto v1 = OwnGroup(own, "pids")) pids.Tighten(Number(Read(host, *v1, "pids.max", sources)));
  auto value = [](const Limit& l) { return l.value ? json(*l.value) : json(); };
  return {{"memory_max_bytes", value(memory)},
          {"cpu_max_milli", value(cpu)},
          {"pids_max", value(pids)},
          {"read", sources}};
}

ProbeHost ProbeHost::Real() {
  ProbeHost host;
  host.read_file = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  host.env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  };
  return host;
}

namespace {

// A simulated GPU: memory is "taken" by writing what the process holds to its device file
// (ports/devices.h); an enforcing MPS twin kills a process over its cap within 100 ms, so a step
// counts as held only after 300 ms alive.
class SimulatedDevice : public ProbeDevice {
 public:
  SimulatedDevice(std::string uuid, std::string dir)
      : uuid_(std::move(uuid)), dir_(std::move(dir)) {}
  ~SimulatedDevice() override { Release(); }
  json Describe() const override { return {{"id", uuid_}, {"source", "simulated"}, {"dir", dir_}}; }
  const std::string& id() const override { return uuid_; }
  absl::Status Take(int64_t mib) override {
    std::string file = absl::StrCat(dir_, "/probe.", ::getpid());
    std::ofstream out(file, std::ios::trunc);
    out << held_ + mib << "\n";
    out.close();
    if (!out) return absl::UnavailableError("cannot write " + file);
    held_ += mib;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return absl::OkStatus();
  }
  void Release() override {
    std::error_code ignored;
    std::filesystem::remove(absl::StrCat(dir_, "/probe.", ::getpid()), ignored);
    held_ = 0;
  }

 private:
  std::string uuid_, dir_;
  int64_t held_ = 0;
};

std::vector<std::string> Visible(const ProbeHost& host) {
  std::optional<std::string> visible = host.env("CUDA_VISIBLE_DEVICES");
  if (!visible) return {};
  return absl::StrSplit(*visible, ',', absl::SkipEmpty());
}

json EnvOrNull(const ProbeHost& host, const std::string& name) {
  std::optional<std::string> v = host.env(name);
  return v ? json(*v) : json();
}

// A fixed amount of integer work, so iterations per second compare across runs; the result goes
// where the compiler cannot drop it.
volatile uint64_t spin_sink = 0;
void Spin() {
  uint64_t seed = spin_sink;
  for (int i = 0; i < 1 << 20; ++i) seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  spin_sink = seed;
}

// How the probe computes: a unit of work, and what it is called in its lines.
struct Work {
  std::function<absl::Status()> unit;
  std::string kind;
};

// The GPU kernel on the first device when it runs there (a line says why when it does not on a
// real GPU), else the CPU loop.
Work ChooseWork(const std::vector<std::unique_ptr<ProbeDevice>>& devices, std::ostream& out) {
  if (!devices.empty()) {
    ProbeDevice* device = devices.front().get();
    absl::Status first = device->Spin();
    if (first.ok()) return {[device] { return device->Spin(); }, "gpu-kernel"};
    if (!absl::IsUnimplemented(first)) {
      out << json{{"probe", "kernel"}, {"device", device->id()}, {"error", first.message()}}.dump()
          << std::endl;
    }
  }
  return {[] {
            Spin();
            return absl::OkStatus();
          },
          "cpu-loop"};
}

// Computes seconds `first` + 1 .. `seconds`, a line per second; `done(s)` after each. False when
// a unit of work failed (its line says why).
bool Compute(int64_t first, int64_t seconds, const Work& work, std::ostream& out,
             const std::function<void(int64_t)>& done) {
  using Clock = std::chrono::steady_clock;
  int64_t total = 0;
  for (int64_t s = first + 1; s <= seconds; ++s) {
    int64_t iterations = 0;
    Clock::time_point end = Clock::now() + std::chrono::seconds(1);
    while (Clock::now() < end) {
      if (absl::Status st = work.unit(); !st.ok()) {
        out << json{{"probe", "kernel"}, {"second", s}, {"error", st.message()}}.dump()
            << std::endl;
        return false;
      }
      ++iterations;
    }
    total += iterations;
    out << json{{"probe", "progress"},
                {"second", s},
                {"iterations", iterations},
                {"kind", work.kind}}
               .dump()
        << std::endl;
    done(s);
  }
  const int64_t ran = std::max<int64_t>(0, seconds - first);
  out << json{{"probe", "done"}, {"per_second", ran > 0 ? total / ran : 0}, {"kind", work.kind}}
             .dump()
      << std::endl;
  return true;
}

// With --checkpoint: the seconds already computed by an earlier attempt, from
// $CARVE_CHECKPOINT_DIR/probe-progress (0 when there is none), said in a line.
int64_t Resume(const ProbeHost& host, std::ostream& out, std::string* file) {
  std::optional<std::string> dir = host.env("CARVE_CHECKPOINT_DIR");
  json line = {{"probe", "resumed"}, {"attempt", EnvOrNull(host, "CARVE_ATTEMPT")}};
  int64_t from = 0;
  if (!dir || dir->empty()) {
    line["error"] = "no CARVE_CHECKPOINT_DIR";
  } else {
    *file = *dir + "/probe-progress";
    std::optional<std::string> text = host.read_file(*file);
    if (text && !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &from)) from = 0;
  }
  line["from_second"] = from;
  out << line.dump() << std::endl;
  return from;
}

// Takes options.memory_mib on `device` in steps; each step is a line. Returns what it held.
int64_t TakeMemory(const ProbeOptions& options, ProbeDevice& device, std::ostream& out) {
  int64_t held = 0;
  while (held < options.memory_mib) {
    int64_t step = std::min(options.step_mib, options.memory_mib - held);
    absl::Status s = device.Take(step);
    json line = {
        {"probe", "memory"}, {"device", device.id()}, {"mib", held + step}, {"ok", s.ok()}};
    if (!s.ok()) line["error"] = s.message();
    out << line.dump() << std::endl;
    if (!s.ok()) break;
    held += step;
  }
  out << json{{"probe", "memory-reached"}, {"device", device.id()}, {"mib", held}}.dump()
      << std::endl;
  return held;
}

}  // namespace

std::vector<std::unique_ptr<ProbeDevice>> SimulatedProbeDevices(const ProbeHost& host) {
  std::vector<std::unique_ptr<ProbeDevice>> out;
  std::optional<std::string> root = host.env("CARVE_SIM_GPU_DIR");
  if (!root) return out;
  for (const std::string& uuid : Visible(host)) {
    std::string dir = *root + "/" + uuid;
    if (std::filesystem::is_directory(dir))
      out.push_back(std::make_unique<SimulatedDevice>(uuid, dir));
  }
  return out;
}

int RunProbe(const ProbeOptions& options, const ProbeHost& host, std::ostream& out) {
  std::vector<std::unique_ptr<ProbeDevice>> devices = SimulatedProbeDevices(host);
  json sees = {
      {"probe", "sees"},
      {"uid", ::getuid()},
      {"gid", ::getgid()},
      {"visible_devices", EnvOrNull(host, "CUDA_VISIBLE_DEVICES")},
      {"nvidia_visible_devices", EnvOrNull(host, "NVIDIA_VISIBLE_DEVICES")},
      {"devices", json::array()},
      {"cgroup", OwnCgroupLimits(host)},
      {"mps",
       {{"pipe_directory", EnvOrNull(host, "CUDA_MPS_PIPE_DIRECTORY")},
        {"active_thread_percentage", EnvOrNull(host, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")},
        {"pinned_device_mem_limit", EnvOrNull(host, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")}}}};
  if (devices.empty() && !host.env("CARVE_SIM_GPU_DIR")) {
    auto cuda = CudaProbeDevices();
    if (cuda.ok()) {
      devices = *std::move(cuda);
    } else {
      sees["cuda"] = cuda.status().message();
    }
  }
  for (const auto& d : devices) sees["devices"].push_back(d->Describe());
  out << sees.dump() << std::endl;
  int code = 0;
  if (options.memory_mib > 0 && devices.empty()) {
    out << json{{"probe", "memory"}, {"ok", false}, {"error", "no device to take memory on"}}.dump()
        << std::endl;
    code = 1;
  } else if (options.memory_mib > 0) {
    TakeMemory(options, *devices.front(), out);
  }
  if (options.hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options.hold_ms));
  for (auto& d : devices) d->Release();
  std::string checkpoint;
  const int64_t first = options.checkpoint ? Resume(host, out, &checkpoint) : 0;
  const Work work = options.seconds > first ? ChooseWork(devices, out) : Work{nullptr, "none"};
  const bool computed =
      Compute(first, options.seconds, work, out, [&checkpoint, &out](int64_t second) {
        if (checkpoint.empty()) return;
        std::ofstream(checkpoint + ".tmp", std::ios::trunc) << second << "\n";
        std::error_code ec;
        std::filesystem::rename(checkpoint + ".tmp", checkpoint, ec);
        if (ec) out << json{{"probe", "checkpoint"}, {"error", ec.message()}}.dump() << std::endl;
      });
  if (options.crash) {
    out << json{{"probe", "crash"}, {"signal", SIGSEGV}}.dump() << std::endl;
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
  if (!computed && code == 0) code = 1;
  return code != 0 ? code : options.exit_code;
}

}  // namespace carve
