// The pieces the scheduler uses to keep its cluster between cycles (runtime/scheduler_memory.h):
// comparing holdings in any order, what a change releases, and the comparer that checks a kept
// cluster against a rebuilt one.
#include "runtime/scheduler_memory.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/sched/placement/fit.h"

namespace carve {
namespace {

class SchedulerMemoryTest : public ::testing::Test {
 protected:
  // Two nodes: one of two exclusive H200s, one H200 partitioned on demand.
  Cluster TwoNodes() {
    Cluster cluster(&catalog_);
    for (DeliveryMode mode : {DeliveryMode::kExclusive, DeliveryMode::kPartition}) {
      Node n;
      n.name = mode == DeliveryMode::kExclusive ? "whole" : "mig";
      n.capacity = {CpuMilli(64000), MemMib(262144), MemMib(0), NetMbps(0)};
      for (int i = 0; i < (mode == DeliveryMode::kExclusive ? 2 : 1); ++i) {
        Device d;
        d.model = *catalog_.Find("H200");
        d.mode = mode;
        d.dynamic_layout = mode == DeliveryMode::kPartition;
        n.devices.push_back(d);
      }
      cluster.AddNode(std::move(n));
    }
    return cluster;
  }
  ReplicaPlacement Whole(int device) {
    return {NodeId(0),
            {CpuMilli(1000), MemMib(1024), MemMib(0), NetMbps(0)},
            {{device, kWholeGpu, MemMib(0), -1, -1, false}}};
  }
  ReplicaPlacement Slice(int start) {
    int profile = *catalog_.FindProfile(*catalog_.Find("H200"), "1g.18gb");
    return {NodeId(1),
            {CpuMilli(1000), MemMib(1024), MemMib(0), NetMbps(0)},
            {{0, GpuMilli(0), MemMib(0), profile, start, true}}};
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
};

TEST_F(SchedulerMemoryTest, HoldingsCompareInAnyOrder) {
  EXPECT_TRUE(SameHoldings({Whole(0), Whole(1)}, {Whole(1), Whole(0)}));
  EXPECT_FALSE(SameHoldings({Whole(0)}, {Whole(1)}));
  EXPECT_FALSE(SameHoldings({Whole(0), Whole(1)}, {Whole(0)}));
}

TEST_F(SchedulerMemoryTest, ReleasedNodesAreWhereSomethingWasGivenBack) {
  std::set<int64_t> nodes;
  EXPECT_FALSE(ReleasedNodes({Whole(0)}, {Whole(0), Slice(0)}, nodes)) << "it only took more";
  EXPECT_TRUE(nodes.empty());
  EXPECT_TRUE(ReleasedNodes({Whole(0), Slice(0)}, {Whole(0)}, nodes));
  EXPECT_EQ(nodes, std::set<int64_t>({1}));
}

// The comparer finds a holding missing from one side, and takes instances made in another order
// (a kept cluster applies changes in the order they came) as the same.
TEST_F(SchedulerMemoryTest, TheComparerFindsAMissingHoldingAndIgnoresInstanceOrder) {
  Cluster kept = TwoNodes(), rebuilt = TwoNodes();
  EXPECT_EQ(HoldingsDiffer(kept, rebuilt), "");
  ApplyReplica(kept, Whole(1));
  EXPECT_EQ(HoldingsDiffer(kept, rebuilt), "whole");
  ApplyReplica(rebuilt, Whole(1));
  for (int start : {0, 1}) ApplyReplica(kept, Slice(start));
  for (int start : {1, 0}) ApplyReplica(rebuilt, Slice(start));
  EXPECT_EQ(HoldingsDiffer(kept, rebuilt), "");
  ReleaseReplica(kept, Slice(0));
  EXPECT_EQ(HoldingsDiffer(kept, rebuilt), "mig");
}

}  // namespace
}  // namespace carve
