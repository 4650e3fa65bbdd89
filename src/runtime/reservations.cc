#include "runtime/reservations.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/cycle_plan.h"
#include "runtime/records.h"

namespace carve {

namespace {

Taint TaintOf(const ReservationConfig& r, int64_t now) {
  const bool active = r.PhaseAt(now) == ReservationConfig::Phase::kActive;
  return {active ? kReservationTaint : kReservationAheadTaint, r.name};
}

bool SameTime(const ReservationConfig& a, const ReservationConfig& b) {
  return a.start_us < b.end_us && b.start_us < a.end_us;
}

// What device `g` gives towards a reservation of gpus `want` of `model`: 1 GPU, the MIG
// instances of its profile it can hold (its layout's, or as many as fit an empty dynamic one), or
// 1,000 milli-GPUs of shares; 0 when it is of another model or mode.
int64_t Gives(const GpuCatalog& catalog, const ReservationConfig::Gpus& want, GpuModelId model,
              const DiscoveredGpu& g) {
  auto id = catalog.Find(g.model);
  if (!id.ok() || *id != model) return 0;
  if (want.share_milli > 0) return g.mode == "shared" ? 1000 : 0;
  if (want.mig.empty()) return g.mode == "exclusive" ? 1 : 0;
  if (g.mode != "partition") return 0;
  auto profile = catalog.FindProfile(model, want.mig);
  if (!profile.ok()) return 0;
  int64_t n = 0;
  if (!g.dynamic_layout) {
    for (const DiscoveredMigInstance& m : g.mig_instances) n += m.profile == want.mig;
    return n;
  }
  std::vector<MigSlot> layout;
  while (true) {
    std::vector<int> starts = FreeMigStarts(catalog.model(model), layout, *profile);
    if (starts.empty()) return n;
    layout.push_back({*profile, starts.front()});
    ++n;
  }
}

}  // namespace

ReservationView::ReservationView(const std::vector<ReservationConfig>& all,
                                 const std::map<std::string, NodeRecord>& nodes,
                                 const std::vector<PoolSelector>& pools, int64_t now,
                                 const GpuCatalog& catalog)
    : now_(now) {
  for (const ReservationConfig& r : all) {
    if (r.PhaseAt(now) != ReservationConfig::Phase::kOver) live_.push_back(r);
  }
  if (live_.empty()) return;
  for (const auto& [name, rec] : nodes) {
    const std::string pool = PoolOf(rec.labels, pools);
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].Covers(name, pool)) by_node_[name].push_back(i);
    }
  }
  PickDevices(all, nodes, pools, catalog);
}

// Every reservation of gpus picks, ended ones too, so that what one picks never depends on the
// moment: an earlier one that ends does not shift a later one's devices in its window.
void ReservationView::PickDevices(const std::vector<ReservationConfig>& all,
                                  const std::map<std::string, NodeRecord>& nodes,
                                  const std::vector<PoolSelector>& pools,
                                  const GpuCatalog& catalog) {
  std::vector<const ReservationConfig*> order;
  for (const ReservationConfig& r : all) {
    if (r.gpus) order.push_back(&r);
  }
  if (order.empty()) return;
  std::sort(order.begin(), order.end(), [](const ReservationConfig* a, const ReservationConfig* b) {
    return std::tie(a->start_us, a->name) < std::tie(b->start_us, b->name);
  });
  std::map<std::string, size_t> live;  // name -> index into live_
  for (size_t i = 0; i < live_.size(); ++i) live[live_[i].name] = i;
  std::map<DeviceKey, std::vector<const ReservationConfig*>> taken;
  for (const ReservationConfig* r : order) {
    const ReservationConfig::Gpus& want = *r->gpus;
    Cover cover;
    cover.asked = want.share_milli > 0 ? want.share_milli : want.count;
    auto model = catalog.Find(want.model);
    auto busy = [&](const std::vector<const ReservationConfig*>& holders) {
      return std::any_of(holders.begin(), holders.end(),
                         [&](const ReservationConfig* o) { return SameTime(*r, *o); });
    };
    for (auto it = nodes.begin(); model.ok() && it != nodes.end() && cover.covered < cover.asked;
         ++it) {
      const std::string& name = it->first;  // a lambda below captures it: clang 14 refuses a
      const NodeRecord& rec = it->second;   // captured structured binding
      if (rec.state == NodeRecordState::kDead) continue;
      const std::string pool = PoolOf(rec.labels, pools);
      if (!r->pool.empty() && pool != r->pool) continue;
      const bool whole = std::any_of(all.begin(), all.end(), [&](const ReservationConfig& o) {
        return o.Covers(name, pool) && SameTime(*r, o);
      });
      if (whole) continue;
      for (size_t d = 0; d < rec.gpus.size() && cover.covered < cover.asked; ++d) {
        const int64_t gives = Gives(catalog, want, *model, rec.gpus[d]);
        std::vector<const ReservationConfig*>& holders = taken[{name, static_cast<int>(d)}];
        if (gives == 0 || busy(holders)) continue;
        holders.push_back(r);
        cover.covered += gives;
        ++cover.devices;
        if (auto l = live.find(r->name); l != live.end()) {
          by_device_[{name, static_cast<int>(d)}].push_back(l->second);
        }
      }
    }
    if (live.count(r->name)) covers_[r->name] = cover;
  }
}

std::vector<std::string> ReservationView::NodesOf(const ReservationConfig& r) const {
  std::set<std::string> out;
  for (const auto& [node, held] : by_node_) {
    for (size_t i : held) {
      if (live_[i].name == r.name) out.insert(node);
    }
  }
  for (const auto& [device, held] : by_device_) {
    for (size_t i : held) {
      if (live_[i].name == r.name) out.insert(device.first);
    }
  }
  return {out.begin(), out.end()};
}

bool ReservationView::HoldsDevice(const ReservationConfig& r, const std::string& node,
                                  int gpu) const {
  if (auto whole = by_node_.find(node); whole != by_node_.end()) {
    for (size_t i : whole->second) {
      if (live_[i].name == r.name) return true;
    }
  }
  auto it = by_device_.find({node, gpu});
  if (it == by_device_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](size_t i) { return live_[i].name == r.name; });
}

std::vector<std::string> ReservationView::DevicesOf(const ReservationConfig& r) const {
  std::vector<std::string> out;
  for (const auto& [device, held] : by_device_) {
    for (size_t i : held) {
      if (live_[i].name == r.name) out.push_back(absl::StrCat(device.first, "/", device.second));
    }
  }
  return out;
}

ReservationView::Cover ReservationView::CoverOf(const ReservationConfig& r) const {
  auto it = covers_.find(r.name);
  return it == covers_.end() ? Cover{} : it->second;
}

std::vector<Taint> ReservationView::TaintsOf(const std::string& node) const {
  std::vector<Taint> out;
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return out;
  for (size_t i : it->second) out.push_back(TaintOf(live_[i], now_));
  return out;
}

std::vector<Taint> ReservationView::DeviceTaintsOf(const std::string& node, int gpu) const {
  std::vector<Taint> out;
  auto it = by_device_.find({node, gpu});
  if (it == by_device_.end()) return out;
  for (size_t i : it->second) out.push_back(TaintOf(live_[i], now_));
  return out;
}

Node ReservationView::Build(const GpuCatalog& catalog, const std::string& name,
                            const NodeRecord& rec, const std::vector<PoolSelector>& pools) const {
  Node n = NodeFromRecord(catalog, name, rec, pools, TaintsOf(name));
  if (by_device_.empty()) return n;
  for (size_t d = 0; d < n.devices.size(); ++d) {
    n.devices[d].taints = DeviceTaintsOf(name, static_cast<int>(d));
  }
  return n;
}

const ReservationConfig* ReservationView::ActiveOn(const std::string& node, int gpu) const {
  auto active = [&](const std::vector<size_t>& held) -> const ReservationConfig* {
    for (size_t i : held) {
      if (live_[i].PhaseAt(now_) == ReservationConfig::Phase::kActive) return &live_[i];
    }
    return nullptr;
  };
  if (auto it = by_node_.find(node); it != by_node_.end()) {
    if (const ReservationConfig* r = active(it->second)) return r;
  }
  if (gpu < 0) return nullptr;
  auto it = by_device_.find({node, gpu});
  return it == by_device_.end() ? nullptr : active(it->second);
}

void ReservationView::Tolerate(ReplicaRequest& replica, const std::string& tenant,
                               const std::string& queue, bool preemptible,
                               int64_t max_runtime_us) const {
  for (const ReservationConfig& r : live_) {
    const bool holder = r.HeldBy(tenant, queue);
    if (r.PhaseAt(now_) == ReservationConfig::Phase::kActive) {
      // Others only as borrowers: preemptible, so the holder's jobs can take the room back.
      if (holder || (r.borrowable && preemptible)) {
        replica.tolerations.push_back({kReservationTaint, r.name});
      }
    } else if (holder || (max_runtime_us > 0 && now_ + max_runtime_us <= r.start_us)) {
      replica.tolerations.push_back({kReservationAheadTaint, r.name});
    }
  }
}

std::vector<std::string> ReservationView::Holds(const std::string& tenant,
                                                const std::string& queue) const {
  std::vector<std::string> out;
  for (const ReservationConfig& r : live_) {
    if (r.PhaseAt(now_) == ReservationConfig::Phase::kActive && r.HeldBy(tenant, queue)) {
      out.push_back(r.name);
    }
  }
  return out;
}

std::string ReservationView::Borrows(
    const std::string& tenant, const std::string& queue,
    const std::vector<std::pair<std::string, std::vector<int>>>& used) const {
  for (const auto& [node, gpus] : used) {
    for (int gpu : gpus) {  // the node held whole, or the device
      const ReservationConfig* r = ActiveOn(node, gpu);
      if (r != nullptr && !r->HeldBy(tenant, queue)) return r->name;
    }
    if (gpus.empty()) {  // a CPU-only replica: only a node held whole is borrowed
      const ReservationConfig* r = ActiveOn(node);
      if (r != nullptr && !r->HeldBy(tenant, queue)) return r->name;
    }
  }
  return "";
}

ReservationTaintCounts CountReservationTaints(const Cluster& cluster) {
  ReservationTaintCounts counts;
  auto ours = [](const Taint& t) {
    return t.key == kReservationTaint || t.key == kReservationAheadTaint;
  };
  for (const Node& n : cluster.nodes()) {
    for (const Taint& t : n.taints) {
      if (ours(t)) ++counts[{t.key, t.value}].nodes;
    }
    for (const Device& d : n.devices) {
      for (const Taint& t : d.taints) {
        if (ours(t)) ++counts[{t.key, t.value}].devices;
      }
    }
  }
  return counts;
}

std::string ReservationsHoldingBack(const ReservationTaintCounts& counts,
                                    const std::set<std::string>& unnamed,
                                    const ReplicaRequest& replica) {
  std::map<std::string, TaintCount> held;  // reservation -> nodes, devices it keeps it off
  for (const auto& [taint, count] : counts) {
    const Taint t{taint.first, taint.second};
    if (std::find(replica.tolerations.begin(), replica.tolerations.end(), t) ==
        replica.tolerations.end()) {
      held[t.value].nodes += count.nodes;
      held[t.value].devices += count.devices;
    }
  }
  auto text = [](const TaintCount& c) {
    std::vector<std::string> what;
    if (c.nodes > 0) what.push_back(absl::StrCat(c.nodes, c.nodes == 1 ? " node" : " nodes"));
    if (c.devices > 0) {
      what.push_back(absl::StrCat(c.devices, c.devices == 1 ? " GPU" : " GPUs"));
    }
    return absl::StrJoin(what, " and ");
  };
  std::vector<std::string> parts;
  TaintCount others;
  for (const auto& [name, count] : held) {
    if (unnamed.count(name)) {
      others.nodes += count.nodes;
      others.devices += count.devices;
      continue;
    }
    parts.push_back(absl::StrCat("reservation ", name, " (", text(count), ")"));
  }
  if (others.nodes + others.devices > 0) {
    parts.push_back(absl::StrCat(text(others), " reserved for another tenant"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace carve
