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
