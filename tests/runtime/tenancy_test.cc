// Roles, visibility filters and per-tenant paths.
#include "runtime/tenancy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/tenant_paths.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
namespace fs = std::filesystem;

TEST(TenancyTest, RolesReachOnlyTheirTenantAndProject) {
  Principal admin{"a", Role::kAdmin, "", "", ""};
  Principal tadmin{"t", Role::kTenantAdmin, "acme", "", ""};
  Principal member{"m", Role::kMember, "acme", "vision", ""};
  Principal viewer{"v", Role::kViewer, "acme", "vision", ""};
  Principal agent{"g", Role::kAgent, "", "", ""};
  EXPECT_TRUE(Allowed(admin, Access::kAdminister, "globex", "nlp"));
  EXPECT_TRUE(Allowed(tadmin, Access::kAdminister, "acme", "audio"));
  EXPECT_FALSE(Allowed(tadmin, Access::kRead, "globex", "nlp"));
  EXPECT_TRUE(Allowed(member, Access::kWrite, "acme", "vision"));
  EXPECT_FALSE(Allowed(member, Access::kRead, "acme", "audio"));
  EXPECT_FALSE(Allowed(member, Access::kAdminister, "acme", "vision"));
  EXPECT_TRUE(Allowed(viewer, Access::kRead, "acme", "vision"));
  EXPECT_FALSE(Allowed(viewer, Access::kWrite, "acme", "vision"));
  EXPECT_FALSE(Allowed(agent, Access::kRead, "acme", "vision"));
  EXPECT_FALSE(Allowed(Principal{"x", Role::kMember, "", "", ""}, Access::kRead, "", ""));
  EXPECT_TRUE(SeesEvent(member, {{"tenant", "acme"}, {"project", "vision"}}));
  EXPECT_FALSE(SeesEvent(member, {{"tenant", "acme"}}));
  EXPECT_TRUE(SeesEvent(tadmin, {{"tenant", "acme"}}));
  EXPECT_FALSE(SeesEvent(tadmin, json::object()));  // platform events: admins only
  EXPECT_EQ(NoJobMessage(7), "no job 7; `carve ls --all` lists jobs");
}

TEST(TenancyTest, NodesHideWhyAGpuIsOutFromNonAdmins) {
  json nodes = json::array({{{"name", "n1"},
                             {"quarantined", {{"0", "job 17: device-memory: 2048 MiB"}}},
                             {"fenced", {{"1", 18}}}}});
  json seen = VisibleNodes(nodes, Principal{"m", Role::kMember, "acme", "vision", ""});
  EXPECT_EQ(seen[0]["quarantined"]["0"], "out of service");
  EXPECT_EQ(seen[0]["fenced"]["1"], "out of service");
  EXPECT_EQ(VisibleNodes(nodes, Principal{"a", Role::kAdmin, "", "", ""}), nodes);
}

// Red team: the live MIG instances of a GPU show other tenants' job sizes, places and UUIDs.
TEST(TenancyTest, LiveMigInstancesAreForAdminsOnly) {
  json nodes = json::array(
      {{{"name", "a100-0"},
        {"gpus",
         {{{"index", 0},
           {"mig_live", {{{"uuid", "MIG-x"}, {"profile", "2g.20gb"}, {"start", 0}}}}}}}}});
  json seen = VisibleNodes(nodes, Principal{"m", Role::kMember, "globex", "default", ""});
  EXPECT_FALSE(seen[0]["gpus"][0].contains("mig_live")) << seen.dump();
  EXPECT_EQ(VisibleNodes(nodes, Principal{"a", Role::kAdmin, "", "", ""}), nodes);
}

TEST(TenantPathsTest, WorkdirMustStayInsideTheTenantDirectory) {
  EXPECT_TRUE(CheckWorkdir("").ok());
  EXPECT_TRUE(CheckWorkdir("runs/exp1").ok());
  EXPECT_TRUE(CheckWorkdir("a..b/c").ok());
  for (const char* bad : {"/etc", "/", "~/x", "..", "../x", "a/../../b", "a/.."}) {
    absl::Status s = CheckWorkdir(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.message(), HasSubstr("workdir")) << bad;
  }
}

TEST(TenantPathsTest, DirectoriesAreOwnerOnlyAndSymlinksCannotEscape) {
  fs::path root = fs::path(::testing::TempDir()) / absl::StrCat("tenant-paths-", getpid());
  fs::remove_all(root);
  std::string tenant = TenantDir(root.string(), "acme");
  EXPECT_EQ(tenant, (root / "tenants/acme").string());
  struct stat st {};
  ASSERT_EQ(stat(tenant.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto work = ResolveWorkdir(tenant + "/vision", "runs/exp1");
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_EQ(*work, fs::canonical(tenant + "/vision/runs/exp1").string());
  ASSERT_EQ(stat(work->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // A symlink planted inside the tenant's directory is never followed, wherever it points: the
  // agent neither creates nor chmods anything through it.
  fs::create_directories(root / "elsewhere");
  chmod((root / "elsewhere").c_str(), 0755);
  fs::create_symlink(root / "elsewhere", tenant + "/vision/out");
  auto escaped = ResolveWorkdir(tenant + "/vision", "out/data");
  ASSERT_FALSE(escaped.ok());
  EXPECT_THAT(escaped.status().message(), HasSubstr("is a symlink"));
  EXPECT_FALSE(fs::exists(root / "elsewhere/data"));
  EXPECT_FALSE(ResolveWorkdir(tenant + "/vision", "out").ok());
  ASSERT_EQ(stat((root / "elsewhere").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  fs::create_symlink(tenant + "/vision/runs", tenant + "/vision/latest");
  EXPECT_FALSE(ResolveWorkdir(tenant + "/vision", "latest/exp1").ok());
  // A planted file is not a directory either.
  std::ofstream(tenant + "/vision/file") << "x";
  EXPECT_FALSE(ResolveWorkdir(tenant + "/vision", "file").ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace carve
