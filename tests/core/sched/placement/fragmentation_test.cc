#include "core/sched/placement/fragmentation.h"

#include <gtest/gtest.h>

#include <random>

#include "core/sched/placement/fgd_policy.h"

namespace carve {
namespace {

// A workload with every kind of class the measure knows: whole (one and several devices),
// shares of several sizes with CPU requests that differ, a model-restricted share, MIG (ignored)
// and CPU-only work.
Workload MixedWorkload(const GpuCatalog& catalog) {
  Workload w;
  auto add = [&](int64_t cpu, GpuRequest gpu, std::vector<GpuModelId> models = {}) {
    WorkloadClass c;
    c.request.resources.cpu = CpuMilli(cpu);
    c.request.gpu = std::move(gpu);
    c.request.allowed_models = std::move(models);
    c.weight = 1.0 / 9;
    w.push_back(c);
  };
  add(8000, {DeliveryMode::kExclusive, 1, kWholeGpu, {}, ""});
  add(32000, {DeliveryMode::kExclusive, 4, kWholeGpu, {}, ""});
  add(2000, {DeliveryMode::kShared, 1, GpuMilli(250), {}, ""});
  add(6000, {DeliveryMode::kShared, 1, GpuMilli(250), {}, ""});
  add(3000, {DeliveryMode::kShared, 1, GpuMilli(500), {}, ""});
  add(4000, {DeliveryMode::kShared, 1, GpuMilli(300), {}, ""}, {*catalog.Find("L40S")});
  add(4000, {DeliveryMode::kPartition, 1, {}, {}, "1g.10gb"});
  add(16000, {});
  add(1000, {DeliveryMode::kShared, 1, GpuMilli(100), {}, ""});
  return w;
}

std::vector<FreeGpu> RandomGpus(const GpuCatalog& catalog, std::mt19937_64& rng) {
  static constexpr int64_t kFree[] = {0, 100, 250, 500, 700, 750, 1000};
  GpuModelId models[] = {*catalog.Find("L40S"), *catalog.Find("H200")};
  std::vector<FreeGpu> gpus(1 + rng() % 8);
  for (FreeGpu& g : gpus) g = {models[rng() % 2], kFree[rng() % 7], rng() % 2 == 0};
  return gpus;
}

// The memo (by device state, CPU applied on each call) and the per-node cache give exactly
// what the model computes, for both measures, whatever order states arrive in.
TEST(FragMemoTest, GivesExactlyTheModelsAnswer) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  for (auto measure : {FragmentationModel::Measure::kFgd, FragmentationModel::Measure::kCapacity}) {
    FragmentationModel model(MixedWorkload(catalog), measure);
    FragMemo memo;
    std::mt19937_64 rng(3);
    std::vector<std::vector<FreeGpu>> seen;
    for (int i = 0; i < 3000; ++i) {
      // Half the time a state seen before, so that the memo and the node cache answer.
      std::vector<FreeGpu> gpus =
          !seen.empty() && rng() % 2 ? seen[rng() % seen.size()] : RandomGpus(catalog, rng);
      seen.push_back(gpus);
      int64_t cpu = static_cast<int64_t>(rng() % 64) * 500;
      double want = model.NodeFragmentation(cpu, gpus);
      ASSERT_EQ(memo.Get(model, cpu, gpus), want) << i;
      ASSERT_EQ(memo.Current(model, NodeId(static_cast<int64_t>(rng() % 5)), cpu, gpus), want) << i;
    }
  }
}

// FragDelta's change for each kind of grant equals the model's before and after, including the
// shortcut for grants that take no compute (CPU-only, MIG), a CPU amount the memo's slots could
// mistake for an empty one, and a node with more devices than the memo keys.
TEST(FragDeltaTest, EqualsTheModelsBeforeAndAfter) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuModelId l40s = *catalog.Find("L40S");
  FragmentationModel model(MixedWorkload(catalog), FragmentationModel::Measure::kCapacity);
  FragMemo memo;
  for (int devices : {4, 20}) {
    Cluster cluster(&catalog);
    Node n;
    n.name = "n";
    n.capacity.cpu = CpuMilli(64000);
    n.capacity.memory = MemMib(1 << 20);
    for (int g = 0; g < devices; ++g) {
      Device d;
      d.model = l40s;
      d.mode = DeliveryMode::kShared;
      n.devices.push_back(d);
    }
    NodeId id = cluster.AddNode(std::move(n));
    cluster.mutable_node(id).devices[1].free_compute = GpuMilli(400);
    const Node& node = cluster.node(id);
    auto gpus = FragmentationModel::FreeGpus(node);
    const double before = model.NodeFragmentation(node);
    for (int64_t cpu : {0, 6000, 64000, 64001}) {  // 64,001: 1 more than the node has
      ReplicaRequest r;
      r.resources.cpu = CpuMilli(cpu);
      const int64_t left = 64000 - cpu;
      FragDelta delta(model, memo, id, node, r);
      EXPECT_EQ(delta.After({}), model.NodeFragmentation(left, gpus) - before) << devices;
      DeviceGrant mig{0, {}, {}, 0, 0, true};
      EXPECT_EQ(delta.After({mig}), model.NodeFragmentation(left, gpus) - before) << devices;
      DeviceGrant share{1, GpuMilli(250), MemMib(1024), -1, -1, false};
      auto after = gpus;
      after[1].milli -= 250;
      EXPECT_EQ(delta.After({share}), model.NodeFragmentation(left, after) - before) << devices;
    }
  }
}

// The measure itself on one node: 4 idle L40S (shared) and 16 cores.
TEST(FragmentationModelTest, CountsWhatEachClassCannotUse) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuModelId l40s = *catalog.Find("L40S");
  Workload w(2);
  w[0].request.resources.cpu = CpuMilli(8000);  // one whole GPU and 8 cores
  w[0].request.gpu = {DeliveryMode::kExclusive, 1, kWholeGpu, {}, ""};
  w[0].weight = 0.5;
  w[1].request.resources.cpu = CpuMilli(1000);  // a half share and one core
  w[1].request.gpu = {DeliveryMode::kShared, 1, GpuMilli(500), {}, ""};
  w[1].weight = 0.5;
  std::vector<FreeGpu> gpus(4, FreeGpu{l40s, 1000, true});
  gpus[3].milli = 300;  // too little for either class
  FragmentationModel fgd(w, FragmentationModel::Measure::kFgd);
  // kFgd: both classes fit; each cannot use the 300 milli device.
  EXPECT_DOUBLE_EQ(fgd.NodeFragmentation(16000, gpus), 300);
  // Less CPU than the whole-GPU class asks: it can use nothing (3,300 milli).
  EXPECT_DOUBLE_EQ(fgd.NodeFragmentation(4000, gpus), 0.5 * 3300 + 0.5 * 300);
  FragmentationModel capacity(w, FragmentationModel::Measure::kCapacity);
  // kCapacity at 16 cores: two whole replicas (CPU-bound), so 1,300 left; six half shares
  // (device-bound), so 300 left.
  EXPECT_DOUBLE_EQ(capacity.NodeFragmentation(16000, gpus), 0.5 * 1300 + 0.5 * 300);
}

}  // namespace
}  // namespace carve
