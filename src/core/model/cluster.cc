#include "core/model/cluster.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"

namespace carve {

absl::string_view ToString(DeliveryMode mode) {
  switch (mode) {
    case DeliveryMode::kExclusive:
      return "exclusive";
    case DeliveryMode::kShared:
      return "shared";
    case DeliveryMode::kPartition:
      return "partition";
  }
  return "unknown";
}

absl::StatusOr<DeliveryMode> ParseDeliveryMode(absl::string_view text) {
  for (DeliveryMode m :
       {DeliveryMode::kExclusive, DeliveryMode::kShared, DeliveryMode::kPartition}) {
    if (ToString(m) == text) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown delivery mode \"", text,
                                                 "\": expected exclusive, shared or partition"));
}

absl::string_view ToString(NodeState state) {
  static constexpr std::array<absl::string_view, 5> kNames = {"ready", "not-ready", "cordoned",
                                                              "draining", "maintenance"};
  return kNames[static_cast<int>(state)];
}

int64_t ExtraAmount(const ExtraResources& extra, absl::string_view name) {
  auto it =
      std::lower_bound(extra.begin(), extra.end(), name,
                       [](const ExtraResource& r, absl::string_view n) { return r.name < n; });
  return it != extra.end() && it->name == name ? it->amount : 0;
}

const ExtraResource* ExtraShort(const ExtraResources& have, const ExtraResources& need) {
  for (const ExtraResource& r : need) {
    if (ExtraAmount(have, r.name) < r.amount) return &r;
  }
  return nullptr;
}

namespace {

// Adds `sign` times each of `add` to `into`, keeping it sorted and without zero amounts, so that
// equal amounts compare equal however they were reached (a cluster kept between cycles and one
// rebuilt from the holdings, when a node stopped offering a resource a replica still holds).
void AddExtra(ExtraResources& into, const ExtraResources& add, int64_t sign) {
  for (const ExtraResource& r : add) {
    auto it =
        std::lower_bound(into.begin(), into.end(), r.name,
                         [](const ExtraResource& x, const std::string& n) { return x.name < n; });
    if (it == into.end() || it->name != r.name) it = into.insert(it, {r.name, 0});
    it->amount += sign * r.amount;
    if (it->amount == 0) into.erase(it);
  }
}

}  // namespace

Resources& Resources::operator-=(const Resources& o) {
  cpu -= o.cpu;
  memory -= o.memory;
  storage -= o.storage;
  network -= o.network;
  if (!o.extra.empty()) AddExtra(extra, o.extra, -1);
  return *this;
}

Resources& Resources::operator+=(const Resources& o) {
  cpu += o.cpu;
  memory += o.memory;
  storage += o.storage;
  network += o.network;
  if (!o.extra.empty()) AddExtra(extra, o.extra, 1);
  return *this;
}

NodeId Cluster::AddNode(Node node) {
  node.free = node.capacity;
  for (size_t i = 0; i < node.devices.size(); ++i) {
    Device& d = node.devices[i];
    d.index = static_cast<int>(i);
    d.free_compute = kWholeGpu;
    d.free_memory = catalog_->model(d.model).memory;
  }
  total_gpus_ += static_cast<int64_t>(node.devices.size());
  max_node_cpu_ = std::max(max_node_cpu_, node.capacity.cpu);
  max_node_gpus_ = std::max(max_node_gpus_, static_cast<int>(node.devices.size()));
  nodes_.push_back(std::move(node));
  return NodeId(static_cast<int64_t>(nodes_.size()) - 1);
}

int64_t Cluster::AllocatedGpuMilli() const {
  int64_t milli = 0;
  for (const Node& n : nodes_) {
    for (const Device& d : n.devices) {
      if (d.mode != DeliveryMode::kPartition) {
        milli += kWholeGpu.units() - d.free_compute.units();
        continue;
      }
      const GpuModel& model = catalog_->model(d.model);
      for (const MigInstance& i : d.instances) {
        if (!i.allocated) continue;
        milli += kWholeGpu.units() * model.mig_profiles[i.profile].compute_slices /
                 model.mig_compute_slices;
      }
    }
  }
  return milli;
}

bool operator==(const MigInstance& a, const MigInstance& b) {
  return a.profile == b.profile && a.start == b.start && a.allocated == b.allocated &&
         a.transient == b.transient;
}

bool operator==(const Device& a, const Device& b) {
  return a.index == b.index && a.model == b.model && a.mode == b.mode && a.health == b.health &&
         a.state == b.state && a.free_compute == b.free_compute && a.free_memory == b.free_memory &&
         a.holders == b.holders && a.dynamic_layout == b.dynamic_layout &&
         a.instances == b.instances && a.share_caps_enforced == b.share_caps_enforced &&
         a.share_group == b.share_group && a.taints == b.taints;
}

bool operator==(const Node& a, const Node& b) {
  return a.name == b.name && a.pool == b.pool && a.labels == b.labels && a.taints == b.taints &&
         a.state == b.state && a.capacity == b.capacity && a.free == b.free &&
         a.devices == b.devices && a.kinds == b.kinds && a.apps == b.apps;
}

bool operator==(const Cluster& a, const Cluster& b) {
  return a.catalog_ == b.catalog_ && a.nodes_ == b.nodes_ && a.total_gpus_ == b.total_gpus_;
}

}  // namespace carve
