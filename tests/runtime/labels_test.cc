#include "runtime/labels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace carve {
namespace {

using ::testing::HasSubstr;

TEST(LabelsTest, KeysAndValuesFollowOneSyntax) {
  for (const char* key : {"pool", "nvlink-domain", "example.com/rack", "a", "A_b.c-9"}) {
    EXPECT_TRUE(CheckLabel(key, "x").ok()) << key;
  }
  const std::string too_long(64, 'k');
  for (const std::string& key :
       std::vector<std::string>{"", "-pool", "pool-", "po ol", "Carve.IO/rack", "/rack", "a/",
                                "a/b/c", "pool!", too_long}) {
    absl::Status s = CheckLabel(key, "x");
    EXPECT_FALSE(s.ok()) << key;
    EXPECT_THAT(std::string(s.message()), HasSubstr("label key")) << key;
  }
  EXPECT_THAT(std::string(CheckLabel("carve.io/node", "n-2").message()), HasSubstr("Carve's own"));
  EXPECT_THAT(std::string(CheckLabel("pool", "").message()), HasSubstr("a pool needs a name"));
  EXPECT_TRUE(CheckLabel("tier", "").ok());
  EXPECT_THAT(std::string(CheckLabel("rack", "two words").message()),
              HasSubstr("label rack: value \"two words\""));
  EXPECT_FALSE(CheckLabel("rack", std::string(64, 'v')).ok());
}

TEST(LabelsTest, ParsesKeyEqualsValue) {
  auto kv = ParseLabel("pool=train");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "pool");
  EXPECT_EQ(kv->second, "train");
  EXPECT_EQ(ParseLabel("tier=")->second, "");
  EXPECT_FALSE(ParseLabel("pool=").ok());
  EXPECT_THAT(std::string(ParseLabel("pool").status().message()), HasSubstr("write KEY=VALUE"));
  EXPECT_FALSE(ParseLabel("=x").ok());
  EXPECT_FALSE(ParseLabel("a=b=c").ok());  // '=' is not in a value
}

TEST(LabelsTest, AnAdminsEditsSitOnTopOfTheAgents) {
  Labels agent = {{"pool", "b"}, {"rack", "r1"}};
  LabelEdits admin = {{"pool", "a"}, {"rack", std::nullopt}, {"tier", "gold"}};
  EXPECT_EQ(EffectiveLabels(agent, admin), (Labels{{"pool", "a"}, {"tier", "gold"}}));
  EXPECT_EQ(EffectiveLabels(agent, {}), agent);
  EXPECT_EQ(PoolOf({}), "default");
  EXPECT_EQ(PoolOf(agent), "b");
}

TEST(LabelsTest, ANodesPoolLabelWinsThenTheFirstSelectorItMatches) {
  const std::vector<PoolSelector> pools = {{"gold", {{"tier", "gold"}}},
                                           {"west", {{"rack", "r1"}, {"region", "west"}}}};
  EXPECT_EQ(PoolOf({{"tier", "gold"}, {"rack", "r1"}, {"region", "west"}}, pools), "gold");
  EXPECT_EQ(PoolOf({{"rack", "r1"}, {"region", "west"}}, pools), "west");
  EXPECT_EQ(PoolOf({{"rack", "r1"}}, pools), "default");  // every label of the selector
  EXPECT_EQ(PoolOf({{"tier", "silver"}}, pools), "default");
  EXPECT_EQ(PoolOf({{"pool", "a"}, {"tier", "gold"}}, pools), "a");
}

}  // namespace
}  // namespace carve
