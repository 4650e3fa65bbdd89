// The partition lifecycle: planned per-GPU MIG re-layouts, and layouts that changed behind
// Carve's back (reported, never silently adopted).
#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// "profile@start" per instance, sorted by start: the form layouts are compared and shown in.
std::vector<std::string> LayoutNames(const std::vector<DiscoveredMigInstance>& instances) {
  std::vector<std::pair<int, std::string>> slots;
  for (const DiscoveredMigInstance& m : instances) {
    slots.push_back({m.start, absl::StrCat(m.profile, "@", m.start)});
  }
  std::sort(slots.begin(), slots.end());
  std::vector<std::string> out;
  for (auto& [start, name] : slots) out.push_back(std::move(name));
  return out;
}

// Places `floating` profiles (larger first) next to `slots`, trying every free start with
// backtracking: first-free alone misses layouts such as 3g+2g+1g+1g, where the 3g must go last.
bool PlaceFloating(const GpuModel& model, const std::vector<std::pair<int, int>>& floating,
                   size_t next, std::vector<MigSlot>& slots) {
  if (next == floating.size()) return true;
  int profile = floating[next].second;
  for (int start : FreeMigStarts(model, slots, profile)) {
    slots.push_back({profile, start});
    if (CheckMigLayout(model, slots).ok() && PlaceFloating(model, floating, next + 1, slots)) {
      return true;
    }
    slots.pop_back();
  }
  return false;
}

// The requested layout as valid slots for `model`; entries without "@start" are placed where
// they all fit.
absl::StatusOr<std::vector<std::string>> ResolveLayout(const GpuCatalog& catalog, GpuModelId id,
                                                       const json& layout) {
  const GpuModel& model = catalog.model(id);
  if (!layout.is_array()) {
    return absl::InvalidArgumentError(
        "layout: expected a list such as [\"3g.40gb@0\", \"1g.10gb\"]");
  }
  std::vector<MigSlot> fixed;
  std::vector<std::pair<int, int>> floating;  // (-slices, profile)
  for (const json& item : layout) {
    if (!item.is_string()) return absl::InvalidArgumentError("layout: entries are strings");
    std::vector<std::string> parts = absl::StrSplit(item.get<std::string>(), '@');
    auto profile = catalog.FindProfile(id, parts[0]);
    if (!profile.ok()) return absl::InvalidArgumentError("layout: " + profile.status().ToString());
    if (parts.size() == 1) {
      floating.push_back({-model.mig_profiles[*profile].memory_slices, *profile});
      continue;
    }
    int start = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &start)) {
      return absl::InvalidArgumentError(absl::StrCat("layout: \"", item.get<std::string>(),
                                                     "\" is not profile or profile@start"));
    }
    fixed.push_back({*profile, start});
  }
  if (absl::Status s = CheckMigLayout(model, fixed); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layout: ", s.message()));
  }
  std::sort(floating.begin(), floating.end());
  if (!PlaceFloating(model, floating, 0, fixed)) {
    std::vector<std::string> names;
    for (const auto& [size, profile] : floating) names.push_back(model.mig_profiles[profile].name);
    return absl::InvalidArgumentError(absl::StrCat("layout: ", absl::StrJoin(names, ", "),
                                                   " do not fit together on ", model.name,
                                                   " next to the fixed instances"));
  }
  std::vector<DiscoveredMigInstance> named;
  for (const MigSlot& s : fixed) named.push_back({"", model.mig_profiles[s.profile].name, s.start});
  return LayoutNames(named);
}

}  // namespace

absl::StatusOr<json> ControlPlane::Relayout(const std::string& name, int gpu, const json& body,
                                            const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kOperate); !s.ok()) return s;
  if (!body.is_object() || !body.contains("layout")) {
    return absl::InvalidArgumentError(
        "expected {\"layout\": [\"profile@start\" or \"profile\", ...]}");
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError("no node \"" + name + "\"");
  NodeRecord& node = it->second;
  if (gpu < 0 || gpu >= static_cast<int>(node.gpus.size())) {
    return absl::InvalidArgumentError(absl::StrCat("node ", name, " has no GPU ", gpu));
  }
  GpuModelId model = *catalog_->Find(node.gpus[gpu].model);  // checked at registration
  if (!catalog_->model(model).mig_capable()) {
    return absl::InvalidArgumentError(node.gpus[gpu].model + " does not support MIG");
  }
  auto layout = ResolveLayout(*catalog_, model, body["layout"]);
  if (!layout.ok()) return layout.status();
  if (auto r = node.relayouts.find(gpu);
      r != node.relayouts.end() && r->second.phase != RelayoutPhase::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu, " of ", name, " is already being re-laid out (", Name(r->second.phase), ")"));
  }
  StoreBatch batch;
  // Re-laying out a GPU whose layout changed behind Carve's back is how an admin settles it.
  if (node.layout_mismatch.erase(gpu) > 0) node.quarantined.erase(gpu);
  std::string target = absl::StrCat("GPU ", gpu, " of node ", name);
  std::string cause = absl::StrCat("MIG re-layout of ", target, " by ", who.name);
  RelayoutRecord record;
  record.layout = *layout;
  record.from = LayoutNames(node.gpus[gpu].mig_instances);
  record.by = who.name;
  record.request = absl::StrCat(now_());
  record.requested_us = now_();
  record.jobs_moved =
      MoveOff(name, gpu, -1, cause, true, batch)["jobs"].get<std::vector<int64_t>>();
  node.relayouts[gpu] = record;
  batch.puts.push_back({"node", name, node.ToJson().dump()});
  Event(batch, "user:" + who.name, "device.relayout-requested",
        absl::StrCat("node/", name, "/gpu/", gpu),
        absl::StrCat("draining ", target, " for layout ", absl::StrJoin(*layout, ", "), "; ",
                     record.jobs_moved.size(), " jobs moved by policy"),
        record.ToJson());
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return record.ToJson();
}

void ControlPlane::AdvanceRelayouts(NodeRecord& node, const HeartbeatRequest& report,
                                    StoreBatch& batch, std::vector<LayoutOrder>& layouts) {
  for (auto& [gpu, r] : node.relayouts) {
    std::string subject = absl::StrCat("node/", node.name, "/gpu/", gpu);
    if (r.phase == RelayoutPhase::kDraining) {
      // (index = gpu: clang 14, which builds scripts/fuzz, cannot capture a binding.)
      std::vector<JobRecord*> on = jobs_.PlacedOn(node.name);
      bool busy = std::any_of(on.begin(), on.end(), [&, index = gpu](const JobRecord* job) {
        return job->Uses(node.name, index);
      });
      if (busy) continue;  // its jobs are still stopping or their evidence is not in
      if (node.quarantined.count(gpu)) {
        r.phase = RelayoutPhase::kFailed;
        r.error = "reclaim was not verified: " + node.quarantined[gpu];
        Event(batch, "scheduler", "device.relayout-failed", subject, r.error, r.ToJson());
        batch.puts.push_back({"node", node.name, node.ToJson().dump()});
        continue;
      }
      r.phase = RelayoutPhase::kReconfiguring;
      r.reclaimed_us = now_();
      Event(batch, "scheduler", "device.reconfiguring", subject,
            "every job off the GPU with verified reclamation; applying the layout", r.ToJson());
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
    }
    if (r.phase != RelayoutPhase::kReconfiguring) continue;
    layouts.push_back({gpu, r.layout, r.request});
    const LayoutResult* result = nullptr;
    for (const LayoutResult& l : report.layouts) {
      if (l.gpu == gpu && l.request == r.request) result = &l;
    }
    if (result == nullptr) continue;  // not applied yet
    std::vector<DiscoveredMigInstance> discovered = report.InstancesOn(gpu);
    if (!result->ok || LayoutNames(discovered) != r.layout) {
      r.phase = RelayoutPhase::kFailed;
      r.error = !result->ok ? "the agent could not apply it: " + result->error
                            : "the agent reports " + absl::StrJoin(LayoutNames(discovered), ", ");
      Event(batch, "agent:" + node.name, "device.relayout-failed", subject, r.error, r.ToJson());
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
      continue;
    }
    DiscoveredGpu& g = node.gpus[gpu];
    g.mig_instances = discovered;
    g.mode = "partition";
    g.mig_enabled = true;
    g.dynamic_layout = false;
    mode_overrides_[node.name][gpu] = "partition";
    for (const DiscoveredMigInstance& m : g.mig_instances) {
      r.partitions.push_back({PartitionId(node.name, gpu, m.profile, m.start), m.uuid});
    }
    r.phase = RelayoutPhase::kDone;
    r.done_us = now_();
    Event(batch, "agent:" + node.name, "device.relayout-done", subject,
          absl::StrCat("layout ", absl::StrJoin(r.layout, ", "), " verified; GPU back in service"),
          r.ToJson());
    batch.puts.push_back({"node-modes", node.name, ModesToJson(mode_overrides_[node.name]).dump()});
  }
  bool done = std::erase_if(node.relayouts, [](const auto& entry) {
                return entry.second.phase == RelayoutPhase::kDone;
              }) > 0;
  if (done) batch.puts.push_back({"node", node.name, node.ToJson().dump()});
}

void ControlPlane::InstanceHealth(NodeRecord& node, const std::vector<GpuReport>& gpus,
                                  StoreBatch& batch) {
  auto subject = [&](const MigSlotRef& slot) {
    return absl::StrCat("node/", node.name, "/gpu/", slot.gpu, "/mig/", slot.start);
  };
  std::set<MigSlotRef> listed;
  for (const GpuReport& g : gpus) {
    for (const MigInstanceReport& m : g.mig_instances) listed.insert({g.index, m.instance.start});
  }
  // A faulty dynamic instance that was destroyed (with the jobs it held) takes its fault along.
  for (auto it = node.instance_faults.begin(); it != node.instance_faults.end();) {
    if (listed.count(it->first)) {
      ++it;
      continue;
    }
    Event(batch, "agent:" + node.name, "device.healthy", subject(it->first),
          "the faulty MIG instance no longer exists");
    it = node.instance_faults.erase(it);
    batch.puts.push_back({"node", node.name, node.ToJson().dump()});
  }
  for (const GpuReport& g : gpus) {
    const int index = g.index;
    if (index < 0 || index >= static_cast<int>(node.gpus.size())) continue;
    for (const MigInstanceReport& m : g.mig_instances) {
      const MigSlotRef slot{index, m.instance.start};
      InstanceFault fault{m.instance.profile,
                          std::string(HealthName(m.health.value_or(DeviceHealth::kHealthy))),
                          m.health_reason};
      auto known = node.instance_faults.find(slot);
      if (fault.health == "healthy") {
        if (known == node.instance_faults.end()) continue;
        node.instance_faults.erase(known);
        batch.puts.push_back({"node", node.name, node.ToJson().dump()});
        Event(batch, "agent:" + node.name, "device.healthy", subject(slot),
              "the MIG instance reports healthy");
        continue;
      }
      if (known != node.instance_faults.end() && known->second.health == fault.health &&
          known->second.reason == fault.reason) {
        continue;
      }
      node.instance_faults[slot] = fault;
      batch.puts.push_back({"node", node.name, node.ToJson().dump()});
      // The blast radius: only the jobs on this instance.
      std::string cause =
          absl::StrCat("MIG instance ", PartitionId(node.name, index, fault.profile, slot.start),
                       " is ", fault.health, fault.reason.empty() ? "" : ": " + fault.reason);
      json radius = MoveOff(node.name, index, slot.start, cause, false, batch);
      radius["reason"] = fault.reason;
      Event(batch, "agent:" + node.name, "device." + fault.health, subject(slot), cause, radius);
    }
  }
}

void ControlPlane::CarryOver(const NodeRecord& old, NodeRecord& fresh, StoreBatch& batch) {
  fresh.quarantined = old.quarantined;
  fresh.fenced = old.fenced;
  fresh.cordoned_by = old.cordoned_by;
  fresh.cordoned_gpus = old.cordoned_gpus;
  fresh.relayouts = old.relayouts;
  fresh.layout_mismatch = old.layout_mismatch;
  fresh.instance_faults = old.instance_faults;
  fresh.admin_labels = old.admin_labels;
  // An agent restarted inside its node's maintenance window (after a driver upgrade, say) leaves
  // the window as it was: it was dropped, and the node was back in service mid-maintenance.
  fresh.maintenance = old.maintenance;
  for (DiscoveredGpu& g : fresh.gpus) {
    if (g.index >= static_cast<int>(old.gpus.size())) continue;
    const DiscoveredGpu& was = old.gpus[g.index];
    if (was.mode != "partition" || was.dynamic_layout || fresh.relayouts.count(g.index)) continue;
    const std::vector<DiscoveredMigInstance>& recorded = was.mig_instances;
    const std::vector<DiscoveredMigInstance> discovered = g.mig_instances;
    if (LayoutNames(recorded) == LayoutNames(discovered)) {  // same ids, maybe new UUIDs
      if (fresh.layout_mismatch.erase(g.index) > 0) {
        fresh.quarantined.erase(g.index);
        Event(batch, "agent:" + fresh.name, "device.layout-restored",
              absl::StrCat("node/", fresh.name, "/gpu/", g.index),
              "the discovered MIG layout matches the recorded one again");
      }
      continue;
    }
    // Not adopted: keep the recorded layout and keep the GPU out until an admin decides.
    g.mig_instances = was.mig_instances;
    g.dynamic_layout = false;
    std::string why = absl::StrCat(
        "MIG layout mismatch: recorded ", absl::StrJoin(LayoutNames(recorded), ", "),
        "; discovered ", absl::StrJoin(LayoutNames(discovered), ", "),
        " (re-lay it out with `carve relayout`, or clear the quarantine to adopt what was found)");
    if (fresh.layout_mismatch.count(g.index) && fresh.quarantined.count(g.index)) continue;
    fresh.layout_mismatch[g.index] = discovered;
    fresh.quarantined[g.index] = why;
    Event(batch, "agent:" + fresh.name, "device.layout-mismatch",
          absl::StrCat("node/", fresh.name, "/gpu/", g.index), why,
          {{"recorded", LayoutNames(recorded)}, {"discovered", LayoutNames(discovered)}});
  }
}

}  // namespace carve
