// The pieces the scheduler uses to keep its cluster between cycles (runtime/scheduler_memory.h):
// comparing holdings in any order, what a change releases, and the comparer that checks a kept
// cluster against a rebuilt one.
#include "runtime/scheduler_memory.h"

#include <gtest/gtest.h>

#include <map>
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

// How many parked jobs of each request a release can let back: the replicas the released nodes
// take of it, placed one after another; the cluster is left as it was.
TEST_F(SchedulerMemoryTest, RoomCountsTheReplicasEachParkedRequestFitsOnReleasedNodes) {
  Cluster cluster = TwoNodes();
  auto whole = [](int count) {
    ReplicaRequest r;
    r.gpu.count = count;
    r.resources = {CpuMilli(1000), MemMib(1024), MemMib(0), NetMbps(0)};
    return r;
  };
  ReplicaRequest slice = whole(1);
  slice.gpu.mode = DeliveryMode::kPartition;
  slice.gpu.profile = "1g.18gb";
  ReplicaRequest cpu_heavy = whole(0);  // no GPU: one per node, by its CPUs
  cpu_heavy.resources.cpu = CpuMilli(40000);
  auto Pending = [](int64_t id, const ReplicaRequest& replica) {
    PendingJob job;
    job.id = id;
    job.request.replica = replica;
    return job;
  };
  SchedulerMemory memory;
  memory.Park(Pending(1, whole(1)), 1, false, true);
  memory.Park(Pending(2, whole(2)), 1, false, true);
  memory.Park(Pending(3, slice), 1, false, true);
  memory.Park(Pending(4, cpu_heavy), 1, false, true);
  memory.Park(Pending(5, whole(1)), 1, false, true);  // the same request as job 1: one shape

  ApplyReplica(cluster, Whole(0));  // one of node 0's two GPUs stays taken
  const Cluster before = cluster;
  Released released;
  released.nodes = {0, 1};
  std::map<size_t, int> room = memory.RoomFor(cluster, released, 1024);
  EXPECT_EQ(HoldingsDiffer(before, cluster), "");
  ASSERT_EQ(memory.shapes.size(), 4u);
  EXPECT_EQ(room, (std::map<size_t, int>{{0, 1}, {2, 7}, {3, 2}}));  // no room for two GPUs

  EXPECT_EQ(memory.RoomFor(cluster, released, 3).at(2), 3);  // counted up to the limit
  released.nodes = {1};
  EXPECT_EQ(memory.RoomFor(cluster, released, 1024), (std::map<size_t, int>{{2, 7}, {3, 1}}));
}

}  // namespace
}  // namespace carve
