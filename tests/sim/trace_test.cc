#include "sim/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace carve::sim {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TraceTest, ReadsTheRealNodeListAndBothPodLayouts) {
  auto nodes = ReadNodeList(std::string(CARVE_TRACE_DIR) + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  int gpus = 0;
  for (const TraceNode& n : *nodes) gpus += n.gpus;
  EXPECT_EQ(nodes->size(), 1213u);
  EXPECT_EQ(gpus, 6212);
  auto pods = ReadPodList(std::string(CARVE_TRACE_DIR) + "/openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 8152u);
  auto multi = ReadPodList(std::string(CARVE_TRACE_DIR) + "/openb_pod_list_multigpu20.csv");
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_EQ(multi->size(), 8324u);
  auto spec = ReadPodList(std::string(CARVE_TRACE_DIR) + "/openb_pod_list_gpuspec25.csv");
  ASSERT_TRUE(spec.ok());
  int constrained = 0;
  for (const TracePod& p : *spec) constrained += !p.gpu_spec.empty();
  EXPECT_GT(constrained, 0);
}

TEST(TraceTest, BadRowsNameFileAndLine) {
  std::string path = WriteTemp("bad_pods.csv",
                               "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                               "p0,1000,1024,1,500\n"
                               "p1,1000,1024,2,500\n");
  auto pods = ReadPodList(path);
  ASSERT_FALSE(pods.ok());
  EXPECT_THAT(pods.status().message(), HasSubstr("bad_pods.csv:3: gpu_milli"));
  path = WriteTemp("bad_nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,abc,1,0,nan\n");
  EXPECT_THAT(ReadNodeList(path).status().message(),
              HasSubstr("bad_nodes.csv:2: cpu_milli: \"abc\""));
  path = WriteTemp("bad_header.csv", "a,b\n");
  EXPECT_THAT(ReadPodList(path).status().message(), HasSubstr("unexpected header"));
  path = WriteTemp("short.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1\n");
  EXPECT_THAT(ReadPodList(path).status().message(), HasSubstr("short.csv:2: expected 5 fields"));
  EXPECT_THAT(ReadPodList("/nonexistent.csv").status().message(), HasSubstr("cannot open"));
}

// Optional columns after either layout: extra resources on both lists, and the application and
// its spread limit on a pod list; an unknown or repeated column is refused, naming the options.
TEST(TraceTest, OptionalColumnsCarryExtraResourcesAndSpread) {
  std::string path = WriteTemp("extra_nodes.csv",
                               "sn,cpu_milli,memory_mib,gpu,model,extra:rdma_gbps,extra:nvme_gb\n"
                               "n0,8000,65536,1,V100M16,400,\nn1,8000,65536,0,nan,0,3000\n");
  auto nodes = ReadNodeList(path);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ((*nodes)[0].extra, (ExtraAmounts{{"rdma_gbps", 400}}));
  EXPECT_EQ((*nodes)[1].extra, (ExtraAmounts{{"nvme_gb", 3000}}));
  path = WriteTemp("extra_pods.csv",
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,extra:rdma_gbps,app,"
                   "max_instance_per_node\n"
                   "p0,1000,1024,1,1000,200,web,1\np1,1000,1024,0,0,,,\n");
  auto pods = ReadPodList(path);
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ((*pods)[0].extra, (ExtraAmounts{{"rdma_gbps", 200}}));
  EXPECT_EQ((*pods)[0].app, "web");
  EXPECT_EQ((*pods)[0].max_per_node, 1);
  EXPECT_TRUE((*pods)[1].extra.empty());
  EXPECT_EQ((*pods)[1].max_per_node, 0);
  path = WriteTemp("spread_no_app.csv",
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,app,max_instance_per_node\n"
                   "p0,1000,1024,1,1000,,2\n");
  EXPECT_THAT(ReadPodList(path).status().message(),
              HasSubstr("spread_no_app.csv:2: max_instance_per_node: a spread limit needs an app"));
  path = WriteTemp("unknown_column.csv", "sn,cpu_milli,memory_mib,gpu,model,app\n");
  EXPECT_THAT(ReadNodeList(path).status().message(),
              HasSubstr("then optional columns extra:<name> (each once)"));
  path = WriteTemp("twice.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,extra:a,extra:a\n");
  EXPECT_THAT(ReadPodList(path).status().message(), HasSubstr("unexpected header"));
}

}  // namespace
}  // namespace carve::sim
