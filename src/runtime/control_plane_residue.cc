// Residue judged by the device: what the agent reports it still sees on a GPU after reclaims, and
// the rule that a quarantine is not cleared while it is there.
#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

void ControlPlane::Residue(NodeRecord& node, const std::vector<GpuReport>& gpus,
                           StoreBatch& batch) {
  for (const GpuReport& g : gpus) {
    const int index = g.index;
    if (index < 0 || index >= static_cast<int>(node.gpus.size())) continue;
    std::string subject = absl::StrCat("node/", node.name, "/gpu/", index);
    bool had = node.residue.count(index) > 0;
    if (g.residue) {
      node.residue[index] = *g.residue;
      if (had) continue;
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
      Event(batch, "agent:" + node.name, "device.residue", subject,
            "the device shows residue: " + g.residue->Describe(), g.residue->ToJson());
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
      " cannot be made available: its agent still sees residue on it: ", it->second.Describe(),
      " (stop those processes or reset the GPU first)"));
}

}  // namespace carve
