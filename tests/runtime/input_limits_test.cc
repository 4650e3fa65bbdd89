#include "runtime/input_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/job_spec.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string Nested(int depth, char open, char close) {
  return std::string(static_cast<size_t>(depth), open) +
         std::string(static_cast<size_t>(depth), close);
}

TEST(JsonDepth, SixtyFourLevelsPassAndSixtyFiveAreRefused) {
  EXPECT_TRUE(CheckJsonDepth(Nested(64, '[', ']')).ok());
  absl::Status deep = CheckJsonDepth(Nested(65, '[', ']'));
  EXPECT_TRUE(absl::IsInvalidArgument(deep));
  EXPECT_EQ(deep.message(), "the body nests deeper than 64 levels");
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += "{\"a\":";
  objects += "1" + std::string(65, '}');
  EXPECT_FALSE(CheckJsonDepth(objects).ok());
}

TEST(JsonDepth, AMillionLevelsAreRefusedWithoutRecursion) {
  // The body of the H1 attack: 2 MB nested 1,000,000 deep, and its unclosed variant.
  std::string attack = "{\"replicas\":" + Nested(1'000'000, '[', ']') + "}";
  auto parsed = ParseJsonBody(attack);
  EXPECT_EQ(parsed.status().message(), "the body nests deeper than 64 levels");
  EXPECT_FALSE(ParseJsonBody(std::string(1'000'000, '[')).ok());
}

TEST(JsonDepth, BracketsInStringsAndEscapesDoNotCount) {
  std::string text = "{\"a\":\"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\"}";
  auto parsed = ParseJsonBody(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ((*parsed)["a"].get<std::string>().size(), 201u);
  EXPECT_EQ(ParseJsonBody("{\"a\":").status().message(), "the body is not valid JSON");
}

TEST(JsonDepth, WideBodiesParse) {
  std::string wide = "[";
  for (int i = 0; i < 100'000; ++i) wide += i ? ",{}" : "{}";
  wide += "]";
  auto parsed = ParseJsonBody(wide);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), 100'000u);
}

TEST(Printable, RefusesControlCharactersAndLongNamesNamingTheField) {
  EXPECT_TRUE(CheckPrintable("name", "train-resnet ü 日本", 128).ok());
  absl::Status ansi = CheckPrintable("name", "x\x1b[2J", 128);
  EXPECT_EQ(ansi.message(),
            "name: holds the control character \\x1b at byte 1; only printable characters are "
            "allowed");
  EXPECT_THAT(std::string(CheckPrintable("name", "a\nb", 128).message()), HasSubstr("\\n"));
  EXPECT_FALSE(CheckPrintable("name",
                              "\xc2\x9b"
                              "2J",
                              128)
                   .ok());  // C1 CSI
  EXPECT_FALSE(CheckPrintable("name",
                              "\xe2\x80\xae"
                              "txt",
                              128)
                   .ok());  // RTL override
  EXPECT_THAT(std::string(CheckPrintable("name", "\xff", 128).message()),
              HasSubstr("not valid UTF-8"));
  EXPECT_EQ(CheckPrintable("name", std::string(129, 'a'), 128).message(),
            "name: 129 bytes; at most 128");
  EXPECT_TRUE(CheckPrintable("name", std::string(128, 'a'), 128).ok());
}

TEST(Printable, EnvNamesArePosix) {
  EXPECT_TRUE(IsEnvName("EPOCHS"));
  EXPECT_TRUE(IsEnvName("_x1"));
  EXPECT_FALSE(IsEnvName(""));
  EXPECT_FALSE(IsEnvName("X=EVIL"));
  EXPECT_FALSE(IsEnvName("1X"));
  EXPECT_FALSE(IsEnvName(std::string("A\0B", 3)));
}

TEST(TerminalSafe, EscapesWhatSteersATerminal) {
  EXPECT_EQ(TerminalSafe("ok ü"), "ok ü");
  EXPECT_EQ(TerminalSafe("a\x1b[31mred\nrow\t"), "a\\x1b[31mred\\nrow\\t");
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "2J"),
            "\\u009b2J");
  EXPECT_EQ(TerminalSafe("\x9b"), "\\x9b");
  json j = {{"name\x1b", "a\nb"}, {"list", {"\x07"}}};
  MakeTerminalSafe(j);
  EXPECT_EQ(j, json({{"name\\x1b", "a\\nb"}, {"list", {"\\x07"}}}));
}

TEST(Submission, NamesEnvAndSizesAreChecked) {
  auto check = [](json body) {
    auto spec = JobSpecFromJson(body);
    return spec.ok() ? CheckSubmission(*spec) : spec.status();
  };
  EXPECT_TRUE(check({{"command", {"true"}}, {"name", "ok"}, {"env", {{"A_1", "x\ny"}}}}).ok());
  EXPECT_THAT(
      std::string(check({{"command", {"true"}}, {"name", std::string(3 << 20, 'n')}}).message()),
      HasSubstr("name: 3145728 bytes; at most 128"));
  EXPECT_THAT(std::string(check({{"command", {"true"}}, {"name", "x\x1b]0;owned\x07"}}).message()),
              HasSubstr("name: holds the control character \\x1b"));
  EXPECT_THAT(std::string(check({{"command", {"true"}}, {"env", {{"", "x"}}}}).message()),
              HasSubstr("env: \"\" is not a variable name"));
  EXPECT_THAT(std::string(check({{"command", {"true"}}, {"env", {{"X=EVIL", "x"}}}}).message()),
              HasSubstr("env: \"X=EVIL\" is not a variable name"));
  EXPECT_THAT(
      std::string(
          check({{"command", {"true"}}, {"env", {{"X", std::string("a\0b", 3)}}}}).message()),
      HasSubstr("env.X: holds a NUL byte"));
  EXPECT_THAT(
      std::string(
          check({{"command", {"true"}}, {"env", {{"X", std::string(300 << 10, 'v')}}}}).message()),
      HasSubstr("at most 262144"));
  // A job named after its command gets a printable name of at most 128 bytes.
  auto spec = JobSpecFromJson({{"command", {std::string(500, 'c') + "\x1b"}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->name, std::string(128, 'c'));
  EXPECT_TRUE(CheckSubmission(*spec).ok());
}

TEST(Yaml, DeepAndAliasBombsGiveAClearError) {
  std::string deep = "a: " + std::string(100, '[') + std::string(100, ']') + "\n";
  EXPECT_THAT(std::string(YamlToJson(deep).status().message()),
              HasSubstr("nests deeper than 64 levels"));
  auto very_deep = YamlToJson("a: " + std::string(10'000, '[') + "\n");
  EXPECT_FALSE(very_deep.ok());
  // The billion laughs: 9 levels of 9 aliases each.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
  }
  EXPECT_THAT(std::string(YamlToJson(bomb).status().message()),
              HasSubstr("more than 200000 values"));
  EXPECT_THAT(std::string(YamlDocumentsToJson("kind: tenant\n---\n" + bomb).status().message()),
              HasSubstr("document at line 2: the YAML expands to more than 200000 values"));
  EXPECT_TRUE(YamlToJson("a: &a [1, 2]\nb: *a\n").ok());
}

}  // namespace
}  // namespace carve
