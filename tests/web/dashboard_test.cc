// The dashboard in a real browser: a cluster (the real server and agents, real job processes),
// two tenants, jobs submitted with the CLI, then web/tests/dashboard.mjs drives Debian's Chromium
// through sign-in, the job list, a waiting job's explanation, a chart, a cancel, and what another
// tenant must not see. Screenshots of each page go to the build directory (CARVE_SCREENSHOT_DIR).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

class DashboardTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(Api()
                    .Post("/api/v1/apply",
                          json::array({
                              {{"kind", "tenant"}, {"name", "acme"}},
                              {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                              {{"kind", "tenant"}, {"name", "globex"}},
                              {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                          }))
                    .ok());
  }

  // `carve submit -q ARGS` as the holder of `token`: the new job's id.
  std::string CliSubmit(const std::string& token, const std::string& args) {
    CliRun r = RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token, " ",
                                     CARVE_BINARY, " submit -q ", args, " 2>&1"));
    EXPECT_EQ(r.exit, 0) << r.out;
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }
};

TEST_F(DashboardTest, ABrowserSignsInSeesOnlyItsTenantsJobsExplainsDrawsAndCancels) {
  if (!std::filesystem::exists("/usr/bin/chromium")) {
    FAIL() << "/usr/bin/chromium is missing: scripts/deps installs Debian's chromium";
  }
  const std::string a_token = MemberToken("acme-member", "acme", "vision");
  const std::string b_token = MemberToken("globex-member", "globex", "nlp");
  const std::string job_a =
      CliSubmit(a_token,
                "--name sleeper --gpus 1 --gpu-model H200 -- sh -c "
                "'printf \"\\377\\377 caf\\303\\251\\n\"; i=0; "
                "while [ $i -lt 600 ]; do i=$((i+1)); echo tick $i; sleep 0.5; done'");
  const std::string unfit =
      CliSubmit(a_token, "--name too-big --gpus 8 --allow-unschedulable -- true");
  const std::string job_b = CliSubmit(b_token, "--name other -- sleep 300");
  ASSERT_FALSE(job_a.empty());
  ASSERT_FALSE(unfit.empty());
  ASSERT_FALSE(job_b.empty());
  ASSERT_TRUE(Eventually([&] { return Job(std::stoll(job_a))["state"] == "running"; }))
      << Job(std::stoll(job_a)).dump(1);
  const std::string node_a = Job(std::stoll(job_a))["replicas"][0]["node"];

  const std::string shots = CARVE_SCREENSHOT_DIR;
  CliRun r = RunShell(absl::StrCat(
      "cd ", CARVE_SOURCE_DIR, "/web && CARVE_URL=", url_, " CARVE_ADMIN_TOKEN=", token_,
      " CARVE_A_TOKEN=", a_token, " CARVE_A_USER=acme-member CARVE_B_TOKEN=", b_token,
      " CARVE_JOB_A=", job_a, " CARVE_JOB_UNFIT=", unfit, " CARVE_JOB_B=", job_b,
      " CARVE_NODE_A=", node_a, " CARVE_SCREENSHOTS=", shots, " node tests/dashboard.mjs 2>&1"));
  EXPECT_EQ(r.exit, 0) << r.out << ServerLog();
  std::cout << r.out;

  // What the browser did, as the API records it.
  json cancelled = WaitFinal(std::stoll(job_a));
  EXPECT_EQ(cancelled["state"], "cancelled");
  EXPECT_EQ(cancelled["cancelled_by"], "acme-member");
  for (const char* page : {"signin-refused", "jobs", "job-waiting", "overview", "nodes", "queues",
                           "audit", "job-running", "job-cancelled"}) {
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(shots, "/", page, ".png"))) << page;
  }
}

}  // namespace
}  // namespace carve::it
