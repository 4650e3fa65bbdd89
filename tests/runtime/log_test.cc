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

// A heartbeat's health_reason reached the log through its event with ESC and BEL raw (red team,
// 2026-12-02): control characters are escaped.
TEST(LogTest, ControlCharactersAreWrittenAsEscapes) {
  std::vector<std::string> lines;
  SetLogSinkForTest([&](LogLevel, const std::string& line) { lines.push_back(line); });
  LogWarn("device.unhealthy node/n1/gpu/0: \x1b[2J\x1b]0;owned\x07 reason");
  SetLogSinkForTest(nullptr);
  EXPECT_THAT(lines, ::testing::ElementsAre(
                         "device.unhealthy node/n1/gpu/0: \\x1b[2J\\x1b]0;owned\\x07 reason"));
}

}  // namespace
}  // namespace carve
