#include <gtest/gtest.h>

#include "ports/store.h"

namespace carve {
namespace {

TEST(StoreBatchTest, EmptyUntilSomethingIsAdded) {
  StoreBatch batch;
  EXPECT_TRUE(batch.empty());
  batch.events.push_back({});
  EXPECT_FALSE(batch.empty());
}

}  // namespace
}  // namespace carve
