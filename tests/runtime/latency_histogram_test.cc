#include "runtime/latency_histogram.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace carve {
namespace {

using ::testing::HasSubstr;

TEST(LatencyHistogramTest, BucketsAreCumulativeWithSumAndCount) {
  LatencyHistogram h;
  h.Observe(400);         // 0.4 ms: le 0.0005
  h.Observe(1000);        // 1 ms exactly: le 0.001
  h.Observe(30'000);      // 30 ms: le 0.05
  h.Observe(60'000'000);  // a minute: +Inf only
  const std::string text = h.Text("x_seconds", "What x took");
  EXPECT_THAT(text, HasSubstr("# TYPE x_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"0.0005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"0.001\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"0.025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"0.05\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"30\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_bucket{le=\"+Inf\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_count 4\n"));
  EXPECT_THAT(text, HasSubstr("x_seconds_sum 60.031400\n"));
}

TEST(LatencyHistogramTest, QuantileBoundsAreTheLeastBucketHoldingTheShare) {
  LatencyHistogram h;
  EXPECT_EQ(h.QuantileBound(0.5), 0);
  for (int i = 0; i < 98; ++i) h.Observe(2000);  // le 0.0025
  h.Observe(200'000);                            // le 0.25
  h.Observe(100'000'000);                        // +Inf
  EXPECT_DOUBLE_EQ(h.QuantileBound(0.5), 0.0025);
  EXPECT_DOUBLE_EQ(h.QuantileBound(0.99), 0.25);
  EXPECT_TRUE(std::isinf(h.QuantileBound(1.0)));
}

}  // namespace
}  // namespace carve
