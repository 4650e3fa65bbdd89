// Residue judged by the device: what the agent reports it still sees on a GPU after reclaims, and
// the rule that a quarantine is not cleared while it is there.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

std::string DescribeResidueJson(const json& residue) {
  std::vector<std::string> parts;
  for (const json& p : residue.value("processes", json::array())) {
    int64_t uid = p.value("uid", int64_t{-1});
    int64_t mib = p.value("memory_mib", int64_t{-1});
    std::string state = p.value("state", "");
    std::vector<std::string> what;
    what.push_back(uid >= 0 ? absl::StrCat("uid ", uid) : "uid unknown");
    if (!state.empty() && ParseProcessState(state) != ProcessState::kRunning) what.push_back(state);
    if (!p.value("command", "").empty()) what.push_back("`" + p.value("command", "") + "`");
    what.push_back(mib >= 0 ? absl::StrCat(mib, " MiB") : "memory unknown");
    parts.push_back(
        absl::StrCat("pid ", p.value("pid", int64_t{0}), " (", absl::StrJoin(what, ", "), ")"));
  }
  if (residue.contains("unexplained_mib")) {
    parts.push_back(absl::StrCat(
        residue.value("unexplained_mib", int64_t{0}), " MiB in use above the device's baseline of ",
        residue.value("baseline_mib", int64_t{0}), " MiB that no live replica holds"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

void ControlPlane::Residue(NodeRecord& node, const json& gpus, StoreBatch& batch) {
  for (const json& g : gpus) {
    int index = g.value("index", -1);
    if (index < 0 || index >= static_cast<int>(node.gpus.size())) continue;
    json residue = g.value("residue", json());
    std::string subject = absl::StrCat("node/", node.name, "/gpu/", index);
    bool had = node.residue.count(index) > 0;
    if (residue.is_object()) {
      node.residue[index] = residue;
      if (had) continue;
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
      Event(batch, "agent:" + node.name, "device.residue", subject,
            "the device shows residue: " + DescribeResidueJson(residue), residue);
    } else if (had) {
      node.residue.erase(index);
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
      Event(batch, "agent:" + node.name, "device.residue-gone", subject,
            "the device shows no residue any more");
    }
  }
}

absl::Status ControlPlane::CheckNoResidue(size_t doc, const NodeRecord& node, int gpu) const {
  auto it = node.residue.find(gpu);
  if (it == node.residue.end()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "document ", doc, ": gpus.state: GPU ", gpu, " of ", node.name,
      " cannot be made available: its agent still sees residue on it: ",
      DescribeResidueJson(it->second), " (stop those processes or reset the GPU first)"));
}

}  // namespace carve
