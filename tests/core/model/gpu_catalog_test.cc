#include "core/model/gpu_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GpuCatalogTest : public ::testing::Test {
 protected:
  const GpuModel& Model(absl::string_view name) { return catalog_.model(*catalog_.Find(name)); }
  int Profile(absl::string_view model, absl::string_view profile) {
    return *catalog_.FindProfile(*catalog_.Find(model), profile);
  }
  std::vector<MigSlot> Layout(absl::string_view model,
                              std::vector<std::pair<std::string, int>> slots) {
    std::vector<MigSlot> out;
    for (auto& [p, start] : slots) out.push_back({Profile(model, p), start});
    return out;
  }
  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
};

TEST_F(GpuCatalogTest, FindsModelsByNameAndAliasCaseInsensitively) {
  EXPECT_EQ(Model("a100-sxm4-40gb").name, "A100-40GB");
  EXPECT_EQ(Model("H200").memory.units(), 143771);
  EXPECT_EQ(Model("V100M32").memory.units(), 32768);
  for (const char* trace_model : {"G1", "G2", "G3", "P100", "T4", "V100M16", "V100M32", "A10"}) {
    EXPECT_TRUE(catalog_.Find(trace_model).ok()) << trace_model;
    EXPECT_FALSE(Model(trace_model).mig_capable()) << trace_model;
  }
  auto missing = catalog_.Find("B300");
  EXPECT_THAT(missing.status().message(), HasSubstr("unknown GPU model \"B300\""));
  EXPECT_THAT(missing.status().message(), HasSubstr("H200-141GB"));
}

TEST_F(GpuCatalogTest, ProfileTablesFollowTheMigUserGuide) {
  const GpuModel& a100 = Model("A100-40GB");
  EXPECT_EQ(a100.mig_compute_slices, 7);
  EXPECT_EQ(a100.mig_memory_slices, 8);
  const MigProfile& p = a100.mig_profiles[Profile("A100-40GB", "1g.10gb")];
  EXPECT_EQ(p.id, 15);
  EXPECT_EQ(p.size, 2);
  EXPECT_THAT(p.starts, ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(a100.mig_profiles[Profile("A100-40GB", "3g.20gb")].starts, ElementsAre(0, 4));
  EXPECT_EQ(a100.mig_profiles[Profile("A100-40GB", "7g.40gb")].size, 8);
  const GpuModel& h200 = Model("H200-141GB");
  EXPECT_EQ(h200.mig_profiles[Profile("H200-141GB", "3g.71gb")].memory.units(), 143771 / 2);
  const GpuModel& a30 = Model("A30");
  EXPECT_EQ(a30.mig_compute_slices, 4);
  EXPECT_THAT(a30.mig_profiles[Profile("A30", "2g.12gb")].starts, ElementsAre(0, 2));
  EXPECT_THAT(catalog_.FindProfile(*catalog_.Find("A100-40GB"), "3g.71gb").status().message(),
              HasSubstr("its profiles: 1g.5gb"));
  EXPECT_THAT(catalog_.FindProfile(*catalog_.Find("T4"), "1g.5gb").status().message(),
              HasSubstr("does not support MIG"));
}

TEST_F(GpuCatalogTest, GuideExamplesAreValidLayouts) {
  const GpuModel& m = Model("A100-40GB");
  EXPECT_TRUE(CheckMigLayout(m, Layout("A100-40GB", {{"3g.20gb", 0}, {"3g.20gb", 4}})).ok());
  EXPECT_TRUE(
      CheckMigLayout(m, Layout("A100-40GB", {{"4g.20gb", 0}, {"2g.10gb", 4}, {"1g.5gb", 6}})).ok());
  EXPECT_TRUE(
      CheckMigLayout(
          m, Layout("A100-40GB", {{"1g.5gb", 0}, {"1g.5gb", 1}, {"2g.10gb", 2}, {"3g.20gb", 4}}))
          .ok());
  // Supported since driver R510.
  EXPECT_TRUE(CheckMigLayout(m, Layout("A100-40GB", {{"4g.20gb", 0}, {"3g.20gb", 4}})).ok());
}

TEST_F(GpuCatalogTest, InvalidLayoutsSayWhy) {
  const GpuModel& m = Model("A100-40GB");
  EXPECT_THAT(
      CheckMigLayout(m, Layout("A100-40GB", {{"3g.20gb", 0}, {"3g.20gb", 4}, {"1g.5gb", 0}}))
          .message(),
      HasSubstr("overlaps 3g.20gb@0"));
  EXPECT_THAT(
      CheckMigLayout(
          m, Layout("A100-40GB",
                    {{"2g.10gb", 0}, {"2g.10gb", 2}, {"2g.10gb", 4}, {"1g.5gb", 6}, {"1g.5gb", 7}}))
          .message(),
      HasSubstr("cannot start at memory slice 7"));
  EXPECT_THAT(CheckMigLayout(m, Layout("A100-40GB", {{"3g.20gb", 1}})).message(),
              HasSubstr("cannot start"));
  // Fragmentation: 1g.5gb at slices 2 and 6 leave no 4-slice window.
  auto frag = Layout("A100-40GB", {{"1g.5gb", 2}, {"1g.5gb", 6}});
  EXPECT_TRUE(FreeMigStarts(m, frag, Profile("A100-40GB", "3g.20gb")).empty());
  EXPECT_TRUE(FreeMigStarts(m, frag, Profile("A100-40GB", "4g.20gb")).empty());
  EXPECT_THAT(FreeMigStarts(m, frag, Profile("A100-40GB", "2g.10gb")), ElementsAre(0, 4));
}

// Every maximal layout of the classic A100-40GB profiles (1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb,
// 7g.40gb), enumerated from the catalog, equals the guide's diagram of 19 configurations.
void Enumerate(const GpuModel& m, const std::vector<int>& profiles, std::vector<MigSlot>& layout,
               std::set<std::string>& out) {
  bool maximal = true;
  for (int p : profiles) {
    for (int start : FreeMigStarts(m, layout, p)) {
      maximal = false;
      if (!layout.empty() && start < layout.back().start) continue;  // each set once
      layout.push_back({p, start});
      Enumerate(m, profiles, layout, out);
      layout.pop_back();
    }
  }
  if (!maximal) return;
  std::vector<std::string> names;
  for (const MigSlot& s : layout) {
    names.push_back(absl::StrCat(m.mig_profiles[s.profile].name.substr(0, 2), "@", s.start));
  }
  out.insert(absl::StrJoin(names, " "));
}

TEST_F(GpuCatalogTest, A100ClassicProfilesHaveNineteenMaximalLayouts) {
  const GpuModel& m = Model("A100-40GB");
  std::vector<int> classic;
  for (const char* p : {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}) {
    classic.push_back(Profile("A100-40GB", p));
  }
  std::vector<MigSlot> layout;
  std::set<std::string> found;
  Enumerate(m, classic, layout, found);
  std::set<std::string> guide = {"1g@0 1g@1 1g@2 1g@3 1g@4 1g@5 1g@6",
                                 "1g@0 1g@1 1g@2 1g@3 2g@4 1g@6",
                                 "1g@0 1g@1 1g@2 1g@3 3g@4",
                                 "1g@0 1g@1 2g@2 1g@4 1g@5 1g@6",
                                 "1g@0 1g@1 2g@2 2g@4 1g@6",
                                 "1g@0 1g@1 2g@2 3g@4",
                                 "2g@0 1g@2 1g@3 1g@4 1g@5 1g@6",
                                 "2g@0 1g@2 1g@3 2g@4 1g@6",
                                 "2g@0 1g@2 1g@3 3g@4",
                                 "2g@0 2g@2 1g@4 1g@5 1g@6",
                                 "2g@0 2g@2 2g@4 1g@6",
                                 "2g@0 2g@2 3g@4",
                                 "3g@0 1g@4 1g@5 1g@6",
                                 "3g@0 2g@4 1g@6",
                                 "3g@0 3g@4",
                                 "4g@0 1g@4 1g@5 1g@6",
                                 "4g@0 2g@4 1g@6",
                                 "4g@0 3g@4",
                                 "7g@0"};
  EXPECT_EQ(found, guide);
}

TEST_F(GpuCatalogTest, A30HasFourFullLayouts) {
  const GpuModel& m = Model("A30");
  std::vector<int> all;
  for (const char* p : {"1g.6gb", "2g.12gb", "4g.24gb"}) all.push_back(Profile("A30", p));
  std::vector<MigSlot> layout;
  std::set<std::string> found;
  Enumerate(m, all, layout, found);
  EXPECT_EQ(found, (std::set<std::string>{"1g@0 1g@1 1g@2 1g@3", "1g@0 1g@1 2g@2", "2g@0 1g@2 1g@3",
                                          "2g@0 2g@2", "4g@0"}));
}

}  // namespace
}  // namespace carve
