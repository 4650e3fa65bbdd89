#include "sim/bound.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace carve::sim {
namespace {

using ::testing::HasSubstr;

const std::string kTrace = CARVE_TRACE_DIR;

// Two nodes of one V100 each and pods of 600 milli: two such pods never share a GPU, so of the
// 1,800 milli the first 100% of arrivals ask (three pods: 1,200 + 600 <= 2,000 < 2,400), at
// most 1,200 can be placed. The packer places that much, and the relaxation's half-GPU rows
// prove no placement does better.
TEST(BoundTest, TwoBigSharesNeverShareAGpuAndTheBoundKnowsIt) {
  const std::string dir = ::testing::TempDir();
  BoundOptions o;
  o.nodes_path = dir + "bound-nodes.csv";
  o.pods_path = dir + "bound-pods.csv";
  std::ofstream(o.nodes_path) << "sn,cpu_milli,memory_mib,gpu,model\n"
                              << "n0,8000,65536,1,V100M16\nn1,8000,65536,1,V100M16\n";
  std::ofstream(o.pods_path) << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                             << "p0,1000,1024,1,600\np1,1000,1024,1,600\n";
  o.seeds = 3;
  o.loads = {100};
  auto r = RunBound(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 1u);
  EXPECT_EQ(r->points[0].asked_pct, 90);
  EXPECT_EQ(r->points[0].achievable_pct, 60);
  EXPECT_EQ(r->points[0].upper_pct, 60);
  EXPECT_EQ(r->seeds, (std::vector<int>{42, 43, 44}));
}

// On the default pod list: nothing placed passes the bound, and the bound passes neither what
// was asked nor the cluster.
TEST(BoundTest, OnTheTraceTheAchievableNeverPassesTheUpperBound) {
  BoundOptions o;
  o.nodes_path = kTrace + "/openb_node_list_gpu_node.csv";
  o.pods_path = kTrace + "/openb_pod_list_default.csv";
  o.seeds = 1;
  auto r = RunBound(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  for (const BoundPoint& p : r->points) {
    SCOPED_TRACE(p.load_pct);
    EXPECT_GT(p.achievable_pct, 90);
    EXPECT_LE(p.achievable_pct, p.upper_pct);
    EXPECT_LE(p.upper_pct, std::min(p.asked_pct, 100.0));
    EXPECT_LE(p.asked_pct, p.load_pct);
  }
  EXPECT_GT(r->lp_columns, 0);
}

TEST(BoundTest, BadOptionsAreRefusedNamingTheFlag) {
  BoundOptions o;
  o.seeds = 0;
  EXPECT_THAT(RunBound(o).status().message(), HasSubstr("--seeds"));
  o.seeds = 1;
  o.loads = {0};
  EXPECT_THAT(RunBound(o).status().message(), HasSubstr("--loads: 0 is not 1 to 1000"));
}

}  // namespace
}  // namespace carve::sim
