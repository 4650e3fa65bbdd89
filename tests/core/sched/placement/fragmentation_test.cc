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
