// The acceptance kit's report in a real browser (issue 13): the kit runs one test against a real
// server and agent, then web/tests/poc-report.mjs opens DIR/report.html in Debian's Chromium with
// the network refused and finds the acceptance table's rows and every chart drawn, then finds
// the report the kit kept on the server in the dashboard (Audit & usage). Screenshots go to the
// build directory (CARVE_SCREENSHOT_DIR/poc-report.png, poc-dashboard.png).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "integration/cli.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace carve::it {
namespace {

const NodeList kReportNodes = {{"poc-0", "gpus:\n  - {model: L40S, count: 1, mode: shared}\n"}};

class PocReportTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kReportNodes; }
};

TEST_F(PocReportTest, ABrowserFindsTheTableAndEveryChartDrawnWithNothingFetched) {
  if (!std::filesystem::exists("/usr/bin/chromium")) {
    FAIL() << "/usr/bin/chromium is missing: scripts/deps installs Debian's chromium";
  }
  const std::filesystem::path out = dir_ / "poc";
  CliRun kit =
      RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                            " poc run --suite software --only software.reclamation --out ",
                            out.string(), " --job-memory-mib ", kSanitized ? 1536 : 512, " 2>&1"));
  ASSERT_EQ(kit.exit, 0) << kit.out << ServerLog();

  CliRun r = RunShell(
      absl::StrCat("cd ", CARVE_SOURCE_DIR, "/web && CARVE_SCREENSHOTS=", CARVE_SCREENSHOT_DIR,
                   " CARVE_URL=", url_, " CARVE_ADMIN_TOKEN=", token_,
                   " node tests/poc-report.mjs ", (out / "report.html").string(),
                   " software.resource-request=not-run software.contention=not-run",
                   " software.quota-priority=not-run",
                   " software.abnormal-job=not-run software.reclamation=pass 2>&1"));
  EXPECT_EQ(r.exit, 0) << r.out;
  std::cout << r.out;
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(CARVE_SCREENSHOT_DIR, "/poc-report.png")));
}

}  // namespace
}  // namespace carve::it
