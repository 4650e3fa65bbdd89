#include "runtime/node_records.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// The codecs below read with nlohmann's checked accessors; a field of the wrong type throws, and
// this turns it into the status FromJson returns (the caller names the field).
template <typename Read>
auto Checked(Read read) -> decltype(read()) {
  try {
    return read();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

absl::Status NotAnObject() { return absl::InvalidArgumentError("must be an object"); }

}  // namespace

json RelayoutRecord::ToJson() const {
  json j = {{"layout", layout},        {"from", from},       {"by", by},
            {"phase", Name(phase)},    {"request", request}, {"requested_us", requested_us},
            {"jobs_moved", jobs_moved}};
  if (reclaimed_us) j["reclaimed_us"] = *reclaimed_us;
  if (!error.empty()) j["error"] = error;
  if (phase == RelayoutPhase::kDone) {
    json ids = json::array();
    for (const RelayoutPartition& p : partitions) ids.push_back({{"id", p.id}, {"uuid", p.uuid}});
    j["partitions"] = ids;
    j["done_us"] = done_us;
  }
  return j;
}

absl::StatusOr<RelayoutRecord> RelayoutRecord::FromJson(const json& j) {
  if (!j.is_object()) return NotAnObject();
  return Checked([&]() -> absl::StatusOr<RelayoutRecord> {
    RelayoutRecord r;
    const std::string phase = j.at("phase").get<std::string>();
    std::optional<RelayoutPhase> parsed = ParseRelayoutPhase(phase);
    if (!parsed) {
      return absl::InvalidArgumentError(
          absl::StrCat("phase: unknown phase \"", absl::CEscape(phase), "\""));
    }
    r.phase = *parsed;
    r.layout = j.at("layout").get<std::vector<std::string>>();
    r.from = j.value("from", std::vector<std::string>{});
    r.by = j.value("by", "");
    r.request = j.value("request", "");
    r.requested_us = j.value("requested_us", int64_t{0});
    r.jobs_moved = j.value("jobs_moved", std::vector<int64_t>{});
    if (j.contains("reclaimed_us")) r.reclaimed_us = j["reclaimed_us"].get<int64_t>();
    r.error = j.value("error", "");
    for (const json& p : j.value("partitions", json::array())) {
      r.partitions.push_back({p.at("id").get<std::string>(), p.at("uuid").get<std::string>()});
    }
    r.done_us = j.value("done_us", int64_t{0});
    return r;
  });
}

json MigInstancesToJson(const std::vector<DiscoveredMigInstance>& instances) {
  json out = json::array();
  for (const DiscoveredMigInstance& m : instances) {
    out.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}});
  }
  return out;
}

absl::StatusOr<std::vector<DiscoveredMigInstance>> MigInstancesFromJson(const json& j) {
  if (!j.is_array()) return absl::InvalidArgumentError("must be a list");
  return Checked([&]() -> absl::StatusOr<std::vector<DiscoveredMigInstance>> {
    std::vector<DiscoveredMigInstance> out;
    for (const json& m : j) {
      out.push_back({m.value("uuid", ""), m.value("profile", ""), m.value("start", 0)});
    }
    return out;
  });
}

std::string SlotKey(const MigSlotRef& slot) { return absl::StrCat(slot.gpu, "/", slot.start); }

std::optional<MigSlotRef> ParseSlotKey(const std::string& key) {
  std::vector<std::string> parts = absl::StrSplit(key, '/');
  MigSlotRef slot;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &slot.gpu) ||
      !absl::SimpleAtoi(parts[1], &slot.start) || SlotKey(slot) != key) {
    return std::nullopt;
  }
  return slot;
}

json InstanceFault::ToJson() const {
  return {{"profile", profile}, {"health", health}, {"reason", reason}};
}

absl::StatusOr<InstanceFault> InstanceFault::FromJson(const json& j) {
  if (!j.is_object()) return NotAnObject();
  return Checked([&]() -> absl::StatusOr<InstanceFault> {
    return InstanceFault{j.value("profile", ""), j.value("health", ""), j.value("reason", "")};
  });
}

json GpuResidue::ToJson() const {
  json list = json::array();
  for (const ResidueProcess& p : processes) {
    list.push_back({{"pid", p.pid},
                    {"uid", p.uid},
                    {"command", p.command},
                    {"memory_mib", p.memory_mib},
                    {"state", Name(p.state)}});
  }
  json out = {{"processes", list}};
  if (memory) {
    out["unexplained_mib"] = memory->unexplained_mib;
    out["used_mib"] = memory->used_mib;
    out["baseline_mib"] = memory->baseline_mib;
  }
  return out;
}

absl::StatusOr<GpuResidue> GpuResidue::FromJson(const json& j) {
  if (!j.is_object()) return NotAnObject();
  return Checked([&]() -> absl::StatusOr<GpuResidue> {
    GpuResidue r;
    for (const json& p : j.value("processes", json::array())) {
      ResidueProcess process;
      process.pid = p.value("pid", int64_t{0});
      process.uid = p.value("uid", int64_t{-1});
      process.command = p.value("command", "");
      process.memory_mib = p.value("memory_mib", int64_t{-1});
      const std::string state = p.value("state", std::string(Name(ProcessState::kRunning)));
      std::optional<ProcessState> parsed = ParseProcessState(state);
      if (!parsed) {
        return absl::InvalidArgumentError(absl::StrCat("processes[", r.processes.size(),
                                                       "].state: unknown state \"",
                                                       absl::CEscape(state), "\""));
      }
      process.state = *parsed;
      r.processes.push_back(std::move(process));
    }
    if (j.contains("unexplained_mib")) {
      r.memory =
          UnexplainedMemory{j["unexplained_mib"].get<int64_t>(), j.value("used_mib", int64_t{0}),
                            j.value("baseline_mib", int64_t{0})};
    }
    return r;
  });
}

std::string GpuResidue::Describe() const {
  std::string out = DescribeResidue(processes);
  if (memory) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", memory->unexplained_mib,
                    " MiB in use above the device's baseline of ", memory->baseline_mib,
                    " MiB that no live replica holds");
  }
  return out;
}

std::optional<GpuResidue> ResidueSeen(const DeviceView& view, int64_t tolerance_mib) {
  if (view.Clean(tolerance_mib)) return std::nullopt;
  GpuResidue residue{view.residue, std::nullopt};
  if (!view.MemoryClean(tolerance_mib)) {
    residue.memory = UnexplainedMemory{view.Unexplained(), view.used_mib, view.baseline_mib};
  }
  return residue;
}

json NodeVersionSet::ToJson() const {
  json out = Compact();
  out["backend"] = backend;
  out["gpus"] = json::array();
  for (const GpuVersions& g : gpus) {
    out["gpus"].push_back({{"index", g.index}, {"vbios", g.vbios}, {"mig", g.mig}});
  }
  return out;
}

json NodeVersionSet::Compact() const {
  return {{"id", id},
          {"carve", carve},
          {"kernel", kernel},
          {"driver", driver},
          {"cuda_driver", cuda_driver},
          {"nvml", nvml}};
}

absl::StatusOr<NodeVersionSet> NodeVersionSet::FromJson(const json& j) {
  if (!j.is_object()) return NotAnObject();
  return Checked([&]() -> absl::StatusOr<NodeVersionSet> {
    NodeVersionSet v;
    v.id = j.value("id", "");
    v.carve = j.value("carve", "");
    v.kernel = j.value("kernel", "");
    v.driver = j.value("driver", "");
    v.cuda_driver = j.value("cuda_driver", "");
    v.nvml = j.value("nvml", "");
    v.backend = j.value("backend", "");
    for (const json& g : j.value("gpus", json::array())) {
      v.gpus.push_back({g.at("index").get<int>(), g.value("vbios", ""), g.value("mig", false)});
    }
    return v;
  });
}

NodeVersionSet NodeVersions(const json& reported, const std::string& backend,
                            const std::vector<DiscoveredGpu>& gpus) {
  auto field = [&](const char* key) {
    const json f = reported.is_object() ? reported.value(key, json("")) : json("");
    return f.is_string() ? f.get<std::string>() : std::string();
  };
  NodeVersionSet v;
  v.carve = field("carve");
  v.kernel = field("kernel");
  v.driver = field("driver");
  v.cuda_driver = field("cuda_driver");
  v.nvml = field("nvml");
  v.backend = backend;
  for (const DiscoveredGpu& g : gpus) v.gpus.push_back({g.index, g.vbios, g.mig_enabled});
  // The id hashes the set as it is shown, without the id.
  json hashed = v.ToJson();
  hashed.erase("id");
  v.id = "vs-" + Sha256Hex(hashed.dump()).substr(0, 10);
  return v;
}

}  // namespace carve
