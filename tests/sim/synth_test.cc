#include "sim/synth.h"

#include <gtest/gtest.h>

namespace carve::sim {
namespace {

TEST(SynthTest, IndexAndScanPlaceTheSameJobs) {
  SynthOptions o;
  o.nodes = 150;
  o.jobs = 3000;
  auto indexed = RunSynth(o);
  o.scan = true;
  auto scanned = RunSynth(o);
  ASSERT_TRUE(indexed.ok() && scanned.ok());
  EXPECT_EQ(indexed->gpus_total, 1200);
  EXPECT_EQ(indexed->jobs, 3000);
  EXPECT_GT(indexed->placed, 2000);
  EXPECT_EQ(indexed->placed, scanned->placed);
  EXPECT_DOUBLE_EQ(indexed->mean_alloc_pct, scanned->mean_alloc_pct);
  EXPECT_GT(indexed->mean_alloc_pct, 40);
}

TEST(SynthTest, RejectsEmptyClusters) {
  SynthOptions o;
  o.nodes = 0;
  EXPECT_FALSE(RunSynth(o).ok());
}

}  // namespace
}  // namespace carve::sim
