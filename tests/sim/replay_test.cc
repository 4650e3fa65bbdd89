#include "sim/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace carve::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

const std::string kTrace = CARVE_TRACE_DIR;

constexpr char kPodHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";

// Two nodes of one V100 each; pods as CSV rows after the header.
ReplayOptions Small(const std::string& name, const std::string& pods) {
  const std::string dir = ::testing::TempDir();
  ReplayOptions o;
  o.nodes_path = dir + name + "-nodes.csv";
  o.pods_path = dir + name + "-pods.csv";
  std::ofstream(o.nodes_path) << "sn,cpu_milli,memory_mib,gpu,model\n"
                              << "n0,8000,65536,1,V100M16\nn1,8000,65536,1,V100M16\n";
  std::ofstream(o.pods_path) << kPodHeader << pods;
  o.buckets = 3;
  o.cycle_s = 1;
  return o;
}

// Two whole-GPU pods fill the cluster for 100 s; a third, arriving at 10 s, waits for the first
// to leave, runs 50 s and leaves.
constexpr char kThree[] =
    "a,1000,1024,1,1000,,LS,Running,0,100,0\n"
    "b,1000,1024,1,1000,,LS,Running,0,100,0\n"
    "c,1000,1024,1,1000,,LS,Running,10,60,10\n";

TEST(ReplayTest, AJobThatDoesNotFitWaitsInsteadOfBeingDroppedAndLeavesWhenItsLifetimeEnds) {
  // And a CPU-only pod at 150 s: the figures cover the arrivals, 0..150 s.
  auto r =
      RunReplay(Small("three", std::string(kThree) + "e,1000,1024,0,0,,LS,Running,150,151,150\n"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->jobs, 4);
  EXPECT_EQ(r->gpu_jobs, 3);
  EXPECT_EQ(r->placed, 4);
  EXPECT_EQ(r->never_placed, 0);
  EXPECT_EQ(r->wait_p50_s, 0);
  EXPECT_EQ(r->wait_max_s, 90);  // from 10 s to the first end at 100 s
  EXPECT_THAT(r->gpu_hours_waited, DoubleNear(90.0 / 3600, 1e-9));
  EXPECT_EQ(r->span_s, 151);
  EXPECT_EQ(r->window_s, 150);
  EXPECT_EQ(r->peak_queue, 1);
  ASSERT_EQ(r->rows.size(), 3u);
  EXPECT_THAT(r->rows[0].alloc_pct, DoubleNear(100, 1e-6));  // 0..50: both GPUs
  EXPECT_THAT(r->rows[1].alloc_pct, DoubleNear(100, 1e-6));  // 50..100
  EXPECT_THAT(r->rows[2].alloc_pct, DoubleNear(50, 1e-6));   // 100..150: c alone
  EXPECT_THAT(r->alloc_pct, DoubleNear(250.0 / 3, 1e-6));
  EXPECT_THAT(r->rows[0].queue_len, DoubleNear(0.8, 1e-6));  // c waits 10..50
  EXPECT_THAT(r->rows[1].queue_len, DoubleNear(1, 1e-6));
  EXPECT_EQ(r->rows[2].running_end, 1);  // at 150 s: c ended, e started
}

// Extra resources and spread limits from the optional columns: three replicas of an app with at
// most one per node share two nodes (the third waits for the first to leave), and a pod asking
// more RDMA bandwidth than any node offers is never placed.
TEST(ReplayTest, SpreadLimitsAndExtraResourcesHoldInAReplay) {
  const std::string dir = ::testing::TempDir();
  ReplayOptions o;
  o.nodes_path = dir + "spread-nodes.csv";
  o.pods_path = dir + "spread-pods.csv";
  std::ofstream(o.nodes_path) << "sn,cpu_milli,memory_mib,gpu,model,extra:rdma_gbps\n"
                              << "n0,8000,65536,2,V100M16,200\nn1,8000,65536,2,V100M16,200\n";
  std::ofstream(o.pods_path) << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                                "pod_phase,creation_time,deletion_time,scheduled_time,"
                                "extra:rdma_gbps,app,max_instance_per_node\n"
                             << "a,1000,1024,1,1000,,LS,Running,0,100,0,,web,1\n"
                             << "b,1000,1024,1,1000,,LS,Running,0,100,0,,web,1\n"
                             << "c,1000,1024,1,1000,,LS,Running,0,50,0,,web,1\n"
                             << "d,1000,1024,1,1000,,LS,Running,0,50,0,300,,\n";
  o.buckets = 1;
  o.cycle_s = 1;
  auto r = RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->placed, 3);
  EXPECT_EQ(r->never_placed, 1);  // d: 300 Gbps asked, 200 offered
  EXPECT_EQ(r->wait_max_s, 100);  // c: a and b hold both nodes until 100 s
}

TEST(ReplayTest, ASpeedupBringsArrivalsForwardAndLeavesLifetimesAlone) {
  ReplayOptions o = Small("speedup", kThree);
  o.speedup = 2;
  auto r = RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->wait_max_s, 95);  // arrives at 5 s
  EXPECT_EQ(r->span_s, 150);
}

TEST(ReplayTest, AJobNoNodeCanHoldIsCountedNeverPlacedAndTheRestRun) {
  auto r =
      RunReplay(Small("never", std::string(kThree) + "d,1000,1024,4,1000,,LS,Running,0,10,0\n"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->jobs, 4);
  EXPECT_EQ(r->placed, 3);
  EXPECT_EQ(r->never_placed, 1);
}

TEST(ReplayTest, BadInputIsAClearError) {
  ReplayOptions o = Small("bad", kThree);
  o.speedup = 0;
  EXPECT_THAT(RunReplay(o).status().message(), HasSubstr("--speedup"));
  o = Small("bad", kThree);
  o.policy = "nope";
  EXPECT_THAT(RunReplay(o).status().message(), HasSubstr("unknown placement policy \"nope\""));
  o = Small("bad", kThree);
  o.node_fraction = 0;
  EXPECT_THAT(RunReplay(o).status().message(), HasSubstr("--node-fraction"));
  o = Small("bad", kThree);
  o.pods_path = "/nonexistent/pods.csv";
  EXPECT_THAT(RunReplay(o).status().message(), HasSubstr("cannot open"));
  o = Small("bad", "x,1000,1024,1,1000,,LS,Running,5,5,5\n");
  EXPECT_THAT(RunReplay(o).status().message(), HasSubstr("no pod with a lifetime"));
}

// The default trace, sped up until the cluster queues, under carve and fgd: every pod that a
// node can hold is placed, waits are ordered percentiles, allocation stays within bounds.
TEST(ReplayTest, TheDefaultTraceReplaysUnderLoad) {
  ReplayOptions o;
  o.nodes_path = kTrace + "/openb_node_list_gpu_node.csv";
  o.pods_path = kTrace + "/openb_pod_list_default.csv";
  o.speedup = 200;
  o.cycle_s = 60;
  auto r = RunReplay(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->jobs, 8000);
  EXPECT_EQ(r->placed + r->never_placed, r->jobs);
  EXPECT_LE(r->wait_p50_s, r->wait_p95_s);
  EXPECT_LE(r->wait_p95_s, r->wait_p99_s);
  EXPECT_LE(r->wait_p99_s, r->wait_max_s);
  for (const ReplayRow& row : r->rows) {
    EXPECT_GE(row.alloc_pct, 0);
    EXPECT_LE(row.alloc_pct, 100.0 + 1e-6);
    EXPECT_GE(row.frag_pct, 0);
  }
}

}  // namespace
}  // namespace carve::sim
