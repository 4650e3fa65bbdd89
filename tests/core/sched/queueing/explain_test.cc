// NearestFit names only nodes the replica could run on (issue 14: a job pinned to T4 was told
// the best node was an H200 node with "0 free").
#include "core/sched/queueing/explain.h"

#include <gtest/gtest.h>

#include "fixture.h"

namespace carve {
namespace {

using testing_queueing::Catalog;
using testing_queueing::Gpus;
using testing_queueing::H200Cluster;

// n0, n1: 4 H200 each; t4: 2 T4 (appended last).
Cluster WithT4Node() {
  Cluster cluster = H200Cluster(2, 4);
  Node n;
  n.name = "t4";
  n.capacity.cpu = CpuMilli(32000);
  n.capacity.memory = MemMib(128 * 1024);
  for (int g = 0; g < 2; ++g) {
    Device d;
    d.index = g;
    d.model = *Catalog().Find("T4");
    n.devices.push_back(d);
  }
  cluster.AddNode(std::move(n));
  return cluster;
}

TEST(NearestFit, TheBestNodeIsOneWithTheModelTheJobAsksFor) {
  Cluster cluster = WithT4Node();
  JobRequest job = Gpus(8);
  job.replica.allowed_models = {*Catalog().Find("T4")};
  EXPECT_EQ(NearestFit(cluster, job.replica),
            "needs 8 whole T4 on one node; best node t4 has 2 free");
}

TEST(NearestFit, NamesTheExtraResourceNoNodeHasEnoughOf) {
  Cluster cluster = WithT4Node();
  cluster.mutable_node(NodeId(1)).capacity.extra = {{"rdma_gbps", 400}};
  cluster.mutable_node(NodeId(1)).free.extra = {{"rdma_gbps", 100}};
  JobRequest job = Gpus(1);
  job.replica.resources.extra = {{"rdma_gbps", 200}};
  EXPECT_EQ(NearestFit(cluster, job.replica),
            "needs 200 of extra resource rdma_gbps on one node; best node n1 has 100 free");
  job.replica.resources.extra = {{"nvme_gb", 1}};
  EXPECT_EQ(NearestFit(cluster, job.replica),
            "needs 1 of extra resource nvme_gb on one node; no eligible node offers it");
}

TEST(NearestFit, NamesTheSpreadLimitEveryNodeHasReached) {
  Cluster cluster = H200Cluster(2, 4);
  for (int64_t n = 0; n < 2; ++n)
    cluster.mutable_node(NodeId(n)).apps["app web of tenant acme"] = 1;
  JobRequest job = Gpus(1);
  job.replica.app = "app web of tenant acme";
  job.replica.max_per_node = 1;
  EXPECT_EQ(NearestFit(cluster, job.replica),
            "at most 1 replica(s) of app web of tenant acme per node, and each of the 2 eligible "
            "nodes runs "
            "that many already");
}

TEST(NearestFit, NoNodeWithTheModelSaysSo) {
  Cluster cluster = H200Cluster(2, 4);
  JobRequest job = Gpus(1);
  job.replica.allowed_models = {*Catalog().Find("T4")};
  EXPECT_EQ(NearestFit(cluster, job.replica), "no eligible node has a T4 GPU in exclusive mode");
}

TEST(NearestFit, AnyModelStillNamesTheNodeWithTheMostFree) {
  Cluster cluster = WithT4Node();
  EXPECT_EQ(NearestFit(cluster, Gpus(8).replica),
            "needs 8 whole GPUs on one node; best node n0 has 4 free");
}

}  // namespace
}  // namespace carve
