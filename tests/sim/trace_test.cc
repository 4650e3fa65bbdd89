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

}  // namespace
}  // namespace carve::sim
