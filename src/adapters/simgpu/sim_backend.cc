// Simulated GPUs from a YAML description (the format is in ports/devices.h and docs/devices.md).
// The whole description is checked when the backend is opened, so a bad file fails at start-up
// with the file, the entry and the field named; Discover() then always returns the same GPUs.
#include <yaml-cpp/yaml.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/model/gpu_catalog.h"
#include "ports/devices.h"

namespace carve {
namespace {

// More GPUs than any real node has; a typo like "count: 80000" should not allocate them.
constexpr int kMaxGpusPerEntry = 1024;

class SimulatedBackend : public DeviceBackend {
 public:
  SimulatedBackend(std::vector<DiscoveredGpu> gpus, std::string node)
      : gpus_(std::move(gpus)), node_(std::move(node)), catalog_(GpuCatalog::BuiltIn()) {}
  std::string name() const override { return "simulated"; }
  // A file DIR/<uuid>/health ("unhealthy XID 79", "suspect ...") injects a device fault.
  absl::StatusOr<std::vector<DiscoveredGpu>> Discover() override {
    std::vector<DiscoveredGpu> out = gpus_;
    if (state_dir_.empty()) return out;
    for (DiscoveredGpu& g : out) {
      ReadAppliedLayout(g);
      if (g.dynamic_layout) ReadDynamicInstances(g);
      g.utilization_pct = 0;
      std::ifstream(state_dir_ + "/" + g.uuid + "/utilization") >> g.utilization_pct;
      for (const DiscoveredMigInstance& m : g.mig_instances) {
        std::ifstream in(absl::StrCat(state_dir_, "/", g.uuid, "/health-", m.start));
        std::string line;
        if (std::getline(in, line) && !line.empty()) g.instance_health[m.start] = line;
      }
      std::ifstream in(state_dir_ + "/" + g.uuid + "/health");
      std::string health;
      if (!(in >> health)) continue;
      std::getline(in >> std::ws, g.health_reason);
      g.health = health;
    }
    return out;
  }
  void SetStateDir(const std::string& dir) override { state_dir_ = dir; }

  absl::StatusOr<std::vector<DeviceProcess>> Processes(int index) override {
    absl::StatusOr<std::vector<Entry>> entries = Entries(index);
    if (!entries.ok()) return entries.status();
    std::vector<DeviceProcess> out;
    for (const Entry& e : *entries) {
      if (e.listed) out.push_back({e.pid, e.mib, e.owner});
    }
    return out;
  }

  absl::StatusOr<int64_t> UsedMemory(int index) override {
    absl::StatusOr<std::vector<Entry>> entries = Entries(index);
    if (!entries.ok()) return entries.status();
    int64_t used = 0;
    for (const Entry& e : *entries) used += e.mib;
    return used;
  }

  // The driver version: DIR/driver-version (an upgrade while the agent runs, as
  // scripts/poc-dev-faults writes it), else CARVE_SIM_DRIVER_VERSION, else "simulated".
  DriverVersions Versions() override {
    std::string file;
    if (!state_dir_.empty()) std::getline(std::ifstream(state_dir_ + "/driver-version"), file);
    const char* env = std::getenv("CARVE_SIM_DRIVER_VERSION");
    const std::string driver = !file.empty()                    ? file
                               : env != nullptr && *env != '\0' ? std::string(env)
                                                                : "simulated";
    return {driver, "simulated", "simulated"};
  }

  absl::StatusOr<std::string> CreateMigInstance(int index, const std::string& profile,
                                                int start) override {
    const DiscoveredGpu* gpu = Find(index);
    if (gpu == nullptr) return absl::NotFoundError(absl::StrCat("no simulated GPU ", index));
    if (!gpu->dynamic_layout || state_dir_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", index, " is not dynamic"));
    }
    GpuModelId model = *catalog_.Find(gpu->model);
    std::vector<MigSlot> slots;
    DiscoveredGpu current = *gpu;
    ReadDynamicInstances(current);
    for (const DiscoveredMigInstance& m : current.mig_instances) {
      slots.push_back({*catalog_.FindProfile(model, m.profile), m.start});
    }
    absl::StatusOr<int> id = catalog_.FindProfile(model, profile);
    if (!id.ok()) return id.status();
    slots.push_back({*id, start});
    if (absl::Status s = CheckMigLayout(catalog_.model(model), slots); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create ", profile, "@", start,
                                                        " on GPU ", index, ": ", s.message()));
    }
    std::string dir = state_dir_ + "/" + gpu->uuid + "/instances";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(dir + "/" + std::to_string(start)) << profile << "\n";
    return InstanceUuid(index, start);
  }

  absl::Status DestroyMigInstance(int index, int start) override {
    const DiscoveredGpu* gpu = Find(index);
    if (gpu == nullptr) return absl::NotFoundError(absl::StrCat("no simulated GPU ", index));
    std::error_code ec;
    if (!std::filesystem::remove(absl::StrCat(state_dir_, "/", gpu->uuid, "/instances/", start),
                                 ec)) {
      return absl::NotFoundError(absl::StrCat("GPU ", index, " has no instance at slice ", start));
    }
    // An XID belongs to the instance that raised it: one made later at this slice starts healthy
    // (a fault left here displaced the next job too: the kit's blast radius raced with it).
    std::filesystem::remove(absl::StrCat(state_dir_, "/", gpu->uuid, "/health-", start), ec);
    return absl::OkStatus();
  }

  absl::Status ApplyMigLayout(int index,
                              const std::vector<DiscoveredMigInstance>& layout) override {
    const DiscoveredGpu* gpu = Find(index);
    if (gpu == nullptr) return absl::NotFoundError(absl::StrCat("no simulated GPU ", index));
    if (state_dir_.empty()) return absl::FailedPreconditionError("no state directory");
    GpuModelId model = *catalog_.Find(gpu->model);  // checked when the description was read
    if (!catalog_.model(model).mig_capable()) {
      return absl::FailedPreconditionError(absl::StrCat(gpu->model, " has no MIG"));
    }
    std::vector<MigSlot> slots;
    for (const DiscoveredMigInstance& m : layout) {
      absl::StatusOr<int> profile = catalog_.FindProfile(model, m.profile);
      if (!profile.ok()) return profile.status();
      slots.push_back({*profile, m.start});
    }
    if (absl::Status s = CheckMigLayout(catalog_.model(model), slots); !s.ok()) return s;
    absl::StatusOr<std::vector<DeviceProcess>> procs = Processes(index);
    if (!procs.ok()) return procs.status();
    for (const DeviceProcess& p : *procs) {
      if (p.pid > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("GPU ", index, " is in use by pid ", p.pid, " (", p.owner, ")"));
      }
    }
    DiscoveredGpu current = *gpu;
    ReadAppliedLayout(current);
    std::string dir = state_dir_ + "/" + gpu->uuid;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    {
      std::ofstream out(dir + "/mig-layout.tmp");
      for (const DiscoveredMigInstance& m : layout) out << m.profile << "@" << m.start << "\n";
      out << "generation " << generation_[index] + 1 << "\n";
      if (!out) return absl::InternalError(absl::StrCat(dir, ": cannot write the layout"));
    }
    std::filesystem::rename(dir + "/mig-layout.tmp", dir + "/mig-layout", ec);
    if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
    return absl::OkStatus();
  }

 private:
  const DiscoveredGpu* Find(int index) const {
    for (const DiscoveredGpu& g : gpus_) {
      if (g.index == index) return &g;
    }
    return nullptr;
  }

  std::string InstanceUuid(int index, int start) const {
    return absl::StrCat("MIG-sim-", node_, "-", index, "-", start);
  }

  // The instances created on a dynamic GPU.
  void ReadDynamicInstances(DiscoveredGpu& g) const {
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(state_dir_ + "/" + g.uuid + "/instances", ec)) {
      int start = 0;
      std::string profile;
      if (!absl::SimpleAtoi(entry.path().filename().string(), &start)) continue;
      std::ifstream(entry.path()) >> profile;
      g.mig_instances.push_back({InstanceUuid(g.index, start), profile, start});
    }
    std::sort(g.mig_instances.begin(), g.mig_instances.end(),
              [](const DiscoveredMigInstance& a, const DiscoveredMigInstance& b) {
                return a.start < b.start;
              });
  }

  // A layout applied earlier (by this agent or, to model a change outside Carve, by hand).
  void ReadAppliedLayout(DiscoveredGpu& g) {
    std::ifstream in(state_dir_ + "/" + g.uuid + "/mig-layout");
    if (!in) return;
    std::vector<DiscoveredMigInstance> instances;
    int generation = 0;
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view view = line;
      if (absl::ConsumePrefix(&view, "generation ")) {
        (void)absl::SimpleAtoi(view, &generation);
        continue;
      }
      std::vector<std::string> parts = absl::StrSplit(line, '@');
      int start = 0;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &start)) continue;
      instances.push_back({"", parts[0], start});
    }
    generation_[g.index] = generation;
    for (DiscoveredMigInstance& m : instances) {
      m.uuid = absl::StrCat("MIG-sim-", node_, "-", g.index, "-", m.start, "-g", generation);
    }
    g.mig_instances = std::move(instances);
    g.mode = "partition";
    g.mig_enabled = true;
    g.dynamic_layout = false;
  }

  // One file of a GPU's state directory that counts: `listed` as a process, or memory only.
  struct Entry {
    int64_t pid = 0;
    int64_t mib = 0;
    std::string owner;
    bool listed = false;
  };

  // The counted entries of GPU `index`; a dead process's plain entry is freed (removed).
  absl::StatusOr<std::vector<Entry>> Entries(int index) {
    std::vector<Entry> out;
    if (state_dir_.empty()) return out;
    const DiscoveredGpu* gpu = Find(index);
    if (gpu == nullptr) return absl::NotFoundError(absl::StrCat("no simulated GPU ", index));
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(state_dir_ + "/" + gpu->uuid, ec)) {
      std::string file = entry.path().filename().string();
      size_t dot = file.rfind('.');
      int64_t pid = 0;
      if (dot == std::string::npos || !absl::SimpleAtoi(file.substr(dot + 1), &pid)) continue;
      std::ifstream in(entry.path());
      int64_t mib = 0;
      std::string kind;
      in >> mib >> kind;
      bool exists = pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0;
      bool alive = exists && !Zombie(pid);
      bool listed = kind == "hold" ? exists : alive;
      if (!listed && kind != "leak") {
        std::filesystem::remove(entry.path(), ec);  // the driver freed a dead process's memory
        continue;
      }
      out.push_back({listed ? pid : 0, mib, file.substr(0, dot), listed});
    }
    return out;
  }

  static bool Zombie(int64_t pid) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
  }

  std::vector<DiscoveredGpu> gpus_;
  std::string node_;
  GpuCatalog catalog_;
  std::string state_dir_;
  std::map<int, int> generation_;  // GPU index -> generation of its applied layout
};

// Reads one description; every error names the source, the entry and the field.
class DescriptionParser {
 public:
  DescriptionParser(std::string source, std::string node)
      : source_(std::move(source)), node_(std::move(node)), catalog_(GpuCatalog::BuiltIn()) {}

  absl::StatusOr<std::vector<DiscoveredGpu>> Parse(const std::string& text) {
    try {
      return ParseDocument(YAML::Load(text));
    } catch (const YAML::Exception& e) {
      if (e.mark.is_null()) return absl::InvalidArgumentError(absl::StrCat(source_, ": ", e.msg));
      return absl::InvalidArgumentError(absl::StrCat(source_, ": line ", e.mark.line + 1,
                                                     ", column ", e.mark.column + 1, ": ", e.msg));
    }
  }

 private:
  absl::Status Error(absl::string_view field, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", field, ": ", message));
  }

  // The keys of a map, rejecting unknown and repeated ones.
  absl::Status CheckKeys(const YAML::Node& map, absl::string_view where,
                         const std::vector<std::string>& allowed) const {
    std::vector<std::string> seen;
    for (const auto& entry : map) {
      std::string key = entry.first.Scalar();
      std::string field = where.empty() ? key : absl::StrCat(where, ".", key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(field,
                     absl::StrCat("unknown key (expected ", absl::StrJoin(allowed, ", "), ")"));
      }
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return Error(field, "given twice");
      }
      seen.push_back(key);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ScalarField(const YAML::Node& node, absl::string_view field) const {
    if (!node.IsScalar()) return Error(field, "expected a single value");
    return node.Scalar();
  }

  absl::StatusOr<std::vector<DiscoveredGpu>> ParseDocument(const YAML::Node& root) {
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": expected a map with a \"gpus\" list"));
    }
    if (absl::Status s = CheckKeys(root, "", {"gpus"}); !s.ok()) return s;
    const YAML::Node gpus = root["gpus"];
    if (!gpus) return Error("gpus", "missing");
    if (!gpus.IsSequence()) return Error("gpus", "expected a list of GPU entries");
    std::vector<DiscoveredGpu> out;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (absl::Status s = ParseEntry(gpus[i], absl::StrCat("gpus[", i, "]"), out); !s.ok()) {
        return s;
      }
    }
    return out;
  }

  absl::Status ParseEntry(const YAML::Node& entry, const std::string& where,
                          std::vector<DiscoveredGpu>& out) {
    if (!entry.IsMap()) return Error(where, "expected a map with model, count, mode, layout");
    if (absl::Status s = CheckKeys(entry, where, {"model", "count", "mode", "layout"}); !s.ok()) {
      return s;
    }

    const std::string model_field = absl::StrCat(where, ".model");
    if (!entry["model"]) return Error(model_field, "missing");
    absl::StatusOr<std::string> model_name = ScalarField(entry["model"], model_field);
    if (!model_name.ok()) return model_name.status();
    absl::StatusOr<GpuModelId> id = catalog_.Find(*model_name);
    if (!id.ok()) return Error(model_field, id.status().message());
    const GpuModel& model = catalog_.model(*id);

    int count = 1;
    if (entry["count"]) {
      const std::string field = absl::StrCat(where, ".count");
      absl::StatusOr<std::string> text = ScalarField(entry["count"], field);
      if (!text.ok()) return text.status();
      if (!absl::SimpleAtoi(*text, &count)) {
        return Error(field, absl::StrCat("\"", *text, "\" is not a whole number"));
      }
      if (count < 1 || count > kMaxGpusPerEntry) {
        return Error(field, absl::StrCat(count, " is not between 1 and ", kMaxGpusPerEntry));
      }
    }

    std::string mode = "exclusive";
    if (entry["mode"]) {
      const std::string field = absl::StrCat(where, ".mode");
      absl::StatusOr<std::string> text = ScalarField(entry["mode"], field);
      if (!text.ok()) return text.status();
      mode = *text;
      if (mode != "exclusive" && mode != "shared" && mode != "partition") {
        return Error(field, absl::StrCat("\"", mode, "\" is not exclusive, shared or partition"));
      }
      if (mode == "partition" && !model.mig_capable()) {
        return Error(field, absl::StrCat("partition needs a MIG-capable model; ", model.name,
                                         " has no MIG (MIG-capable: ", MigCapableModels(), ")"));
      }
    }

    bool dynamic = mode == "partition";
    std::vector<MigSlot> layout;
    if (entry["layout"]) {
      const std::string field = absl::StrCat(where, ".layout");
      if (mode != "partition") return Error(field, "only partition mode takes a layout");
      absl::StatusOr<bool> parsed = ParseLayout(entry["layout"], field, *id, layout);
      if (!parsed.ok()) return parsed.status();
      dynamic = *parsed;
    }

    for (int n = 0; n < count; ++n) {
      DiscoveredGpu gpu;
      gpu.index = static_cast<int>(out.size());
      gpu.uuid = absl::StrCat("GPU-sim-", node_, "-", gpu.index);
      gpu.model = model.name;
      gpu.memory_mib = model.memory.units();
      gpu.vbios = "simulated";
      gpu.mode = mode;
      gpu.mig_enabled = mode == "partition";
      gpu.dynamic_layout = dynamic;
      for (const MigSlot& slot : layout) {
        gpu.mig_instances.push_back(
            {absl::StrCat("MIG-sim-", node_, "-", gpu.index, "-", slot.start),
             model.mig_profiles[slot.profile].name, slot.start});
      }
      out.push_back(std::move(gpu));
    }
    return absl::OkStatus();
  }

  // "dynamic" (true), or a list of "profile@start" (false) that must be a valid layout; the
  // slots come back sorted by start.
  absl::StatusOr<bool> ParseLayout(const YAML::Node& node, const std::string& field,
                                   GpuModelId model_id, std::vector<MigSlot>& layout) const {
    const GpuModel& model = catalog_.model(model_id);
    if (node.IsScalar()) {
      if (node.Scalar() == "dynamic") return true;
      return Error(field, absl::StrCat("\"", node.Scalar(),
                                       "\" is neither dynamic nor a list of profile@start"));
    }
    if (!node.IsSequence()) return Error(field, "expected dynamic or a list of profile@start");
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string item_field = absl::StrCat(field, "[", i, "]");
      absl::StatusOr<std::string> text = ScalarField(node[i], item_field);
      if (!text.ok()) return text.status();
      std::vector<absl::string_view> parts = absl::StrSplit(*text, '@');
      MigSlot slot;
      if (parts.size() != 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &slot.start)) {
        return Error(item_field, absl::StrCat("\"", *text, "\" is not profile@start (e.g. \"",
                                              model.mig_profiles.front().name, "@0\")"));
      }
      absl::StatusOr<int> profile = catalog_.FindProfile(model_id, parts[0]);
      if (!profile.ok()) return Error(item_field, profile.status().message());
      slot.profile = *profile;
      layout.push_back(slot);
    }
    if (absl::Status s = CheckMigLayout(model, layout); !s.ok()) return Error(field, s.message());
    std::sort(layout.begin(), layout.end(),
              [](const MigSlot& a, const MigSlot& b) { return a.start < b.start; });
    return false;
  }

  std::string MigCapableModels() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < catalog_.size(); ++i) {
      const GpuModel& m = catalog_.model(GpuModelId(static_cast<int64_t>(i)));
      if (m.mig_capable()) names.push_back(m.name);
    }
    return absl::StrJoin(names, ", ");
  }

  std::string source_;
  std::string node_;
  GpuCatalog catalog_;
};

absl::StatusOr<std::unique_ptr<DeviceBackend>> FromText(const std::string& text,
                                                        const std::string& source,
                                                        const std::string& node_name) {
  if (node_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the node name is empty"));
  }
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus =
      DescriptionParser(source, node_name).Parse(text);
  if (!gpus.ok()) return gpus.status();
  return std::make_unique<SimulatedBackend>(*std::move(gpus), node_name);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenSimulatedBackend(const std::string& yaml_path,
                                                                    const std::string& node_name) {
  std::ifstream in(yaml_path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat(yaml_path, ": cannot open GPU description: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(yaml_path, ": cannot read GPU description"));
  }
  return FromText(text.str(), yaml_path, node_name);
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> SimulatedBackendFromYaml(
    const std::string& yaml_text, const std::string& node_name) {
  return FromText(yaml_text, "<yaml>", node_name);
}

}  // namespace carve
