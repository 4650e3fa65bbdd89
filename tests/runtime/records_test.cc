#include "runtime/records.h"

#include <gtest/gtest.h>

namespace carve {
namespace {

using json = nlohmann::json;

// R1: node mode overrides were written as an array of pairs and read back as an object, which
// aborted every restart after `carve apply` of a node document or a `carve relayout`.
TEST(RecordsTest, NodeModesReadBothStoredForms) {
  std::map<int, std::string> modes = {{1, "exclusive"}, {3, "partition"}};
  EXPECT_EQ(ModesToJson(modes), json({{"1", "exclusive"}, {"3", "partition"}}));
  EXPECT_EQ(ModesFromJson(ModesToJson(modes)), modes);
  // What servers before the fix wrote (json of a map<int, string>): an array of pairs.
  EXPECT_EQ(ModesFromJson(json(modes)), modes);
  EXPECT_TRUE(ModesFromJson(json("junk")).empty());
}

}  // namespace
}  // namespace carve
