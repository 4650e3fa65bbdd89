#include "runtime/agent_swarm.h"

#include <gtest/gtest.h>

namespace carve {
namespace {

TEST(VirtualRuntimeTest, SleepCommandsLastTheirSecondsOthersTheFallback) {
  EXPECT_EQ(VirtualRuntimeMs({"sleep", "30"}, 5), 30000);
  EXPECT_EQ(VirtualRuntimeMs({"sleep", "0.5"}, 5), 500);
  EXPECT_EQ(VirtualRuntimeMs({"sh", "-c", "sleep 2"}, 5), 2000);
  EXPECT_EQ(VirtualRuntimeMs({"bash", "-c", "  sleep   3 "}, 5), 3000);
  EXPECT_EQ(VirtualRuntimeMs({"sh", "-c", "sleep 2; echo done"}, 5), 5);
  EXPECT_EQ(VirtualRuntimeMs({"sleep", "-1"}, 5), 5);
  EXPECT_EQ(VirtualRuntimeMs({"sleep", "soon"}, 5), 5);
  EXPECT_EQ(VirtualRuntimeMs({"python", "train.py"}, 7), 7);
  EXPECT_EQ(VirtualRuntimeMs({}, 7), 7);
}

TEST(SwarmShapeTest, MixedTakesFourShapesInTurnAndAnUnknownProfileIsRefused) {
  EXPECT_EQ(SwarmShape("mixed", 0)->model, "H100-80GB");
  EXPECT_EQ(SwarmShape("mixed", 3)->model, "L40S");
  EXPECT_EQ(SwarmShape("mixed", 3)->gpus, 4);
  EXPECT_EQ(SwarmShape("mixed", 4)->model, "H100-80GB");
  EXPECT_EQ(SwarmShape("h100", 3)->model, "H100-80GB");
  auto bad = SwarmShape("tpu", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--profile tpu: not a profile (mixed, h100)");
}

TEST(LatencySummaryTest, PercentilesAreOfTheSortedSamples) {
  std::vector<int64_t> us;
  for (int i = 100; i >= 1; --i) us.push_back(i * 1000);  // 1..100 ms, unsorted
  nlohmann::json s = LatencySummary(us);
  EXPECT_EQ(s["count"], 100);
  EXPECT_DOUBLE_EQ(s["p50_ms"].get<double>(), 51);
  EXPECT_DOUBLE_EQ(s["p99_ms"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(s["max_ms"].get<double>(), 100);
  EXPECT_EQ(LatencySummary({})["count"], 0);
}

}  // namespace
}  // namespace carve
