#include "runtime/work_board.h"

#include <gtest/gtest.h>

#include <future>

namespace carve {
namespace {

TEST(WorkBoardTest, AVersionGrowsOnlyForWorkTheNodeWasNotToldOf) {
  WorkBoard board;
  EXPECT_EQ(board.Post({{"a", {{1, 0, false}}}, {"b", {{2, 0, false}}}}), 2);
  EXPECT_EQ(board.version("a"), 1);
  // The same work again: nothing new.
  EXPECT_EQ(board.Post({{"a", {{1, 0, false}}}, {"b", {{2, 0, false}}}}), 0);
  // A stop for a's replica is new work; b has none now.
  EXPECT_EQ(board.Post({{"a", {{1, 0, false}, {1, 0, true}}}}), 1);
  EXPECT_EQ(board.version("a"), 2);
  EXPECT_EQ(board.version("b"), 1);
  // b was told it has nothing: the same replica again is news.
  EXPECT_EQ(board.Post({{"b", {{2, 0, false}}}}), 1);
  EXPECT_EQ(board.version("b"), 2);
  EXPECT_EQ(board.version("c"), 0);
}

TEST(WorkBoardTest, AWaitEndsWhenItsNodeGetsWork) {
  WorkBoard board;
  auto waited = std::async(std::launch::async, [&] { return board.Wait("a", 0, 60000, 8); });
  board.Post({{"a", {{1, 0, false}}}});
  auto version = waited.get();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 1);
  // A node already past `after` answers at once; a timeout answers the version unchanged.
  EXPECT_EQ(*board.Wait("a", 0, 60000, 8), 1);
  EXPECT_EQ(*board.Wait("a", 1, 0, 8), 1);
}

TEST(WorkBoardTest, EndAnswersEveryWaitNowAndLater) {
  WorkBoard board;
  auto waited = std::async(std::launch::async, [&] { return board.Wait("a", 0, 60000, 8); });
  board.End();
  EXPECT_EQ(*waited.get(), 0);
  EXPECT_EQ(*board.Wait("b", 0, 60000, 8), 0);
}

TEST(WorkBoardTest, WaitsBeyondTheLimitAreRefused) {
  WorkBoard board;
  auto refused = board.Wait("a", 0, 60000, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("poll at the heartbeat period"), std::string::npos);
}

}  // namespace
}  // namespace carve
