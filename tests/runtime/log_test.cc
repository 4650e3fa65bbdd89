#include "runtime/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace carve {
namespace {

TEST(LogTest, ParsesEveryLevelAndNamesTheChoicesOtherwise) {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"}) {
    auto level = ParseLogLevel(name);
    ASSERT_TRUE(level.ok()) << name;
    EXPECT_STREQ(LogLevelName(*level), name);
  }
  auto bad = ParseLogLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              ::testing::HasSubstr("\"verbose\": one of trace, debug, info, warn, error, off"));
}

TEST(LogTest, WritesOnlyEnabledLevelsOneLineEach) {
  std::vector<std::string> lines;
  SetLogSinkForTest([&](LogLevel, const std::string& line) { lines.push_back(line); });
  SetLogLevel(LogLevel::kWarn);
  LogInfo("hidden");
  LogWarn("shown ", 1, "\nsecond line");
  LogError("also shown");
  SetLogLevel(LogLevel::kOff);
  LogError("off");
  SetLogLevel(LogLevel::kInfo);
  SetLogSinkForTest(nullptr);
  EXPECT_THAT(lines, ::testing::ElementsAre("shown 1 second line", "also shown"));
}

}  // namespace
}  // namespace carve
