// `carve server --store postgresql://...` (issue 17) against a private PostgreSQL the test starts:
// the real server and agents keep their state there, not in SQLite under --data; a SIGKILL and a
// restart on the same database keep the jobs and the event chain.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "adapters/private_postgres.h"
#include "adapters/store/sqlite_store.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

class PostgresServerTest : public PlatformTest {
 protected:
  void SetUp() override {
    const std::string why_not =
        pg_.Start(absl::StrCat(::testing::TempDir(), "carve-pg-it-", getpid()));
    ASSERT_EQ(why_not, "") << "the private PostgreSQL did not start";
    pg_.CreateDatabase("carve");
    server_args_ = {"--store", pg_.Url("carve")};
    PlatformTest::SetUp();
  }

  testing_pg::PrivatePostgres pg_;
};

TEST_F(PostgresServerTest, JobsAndTheChainLiveInPostgresAcrossARestart) {
  const int64_t done = Submit({{"command", {"true"}}})["id"];
  EXPECT_EQ(WaitFinal(done)["state"], "succeeded");
  const int64_t running = Submit({{"command", {"sleep", "300"}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(running)["state"] == "running"; })) << ServerLog();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "data/carve.db"))
      << "the state went to SQLite, not PostgreSQL";

  Kill(server_, SIGKILL);
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(Job(done)["state"], "succeeded");
  EXPECT_EQ(Job(running)["state"], "running") << "the agent's job outlived the server";
  json verify = ApiGet("/api/v1/audit/verify");
  EXPECT_EQ(verify["ok"], true) << verify.dump(2);
  EXPECT_GT(Submit({{"command", {"true"}}})["id"].get<int64_t>(), running);
}

// `carve store migrate` (issue 17): a server's SQLite store moves to PostgreSQL with its event
// chain intact (the same head hash before and after), its finished and running jobs, and the
// agents' jobs running on through the change; a second migration into the now full database is
// refused.
class StoreMigrateTest : public PlatformTest {
 protected:
  void SetUp() override {
    const std::string why_not =
        pg_.Start(absl::StrCat(::testing::TempDir(), "carve-pg-migrate-", getpid()));
    ASSERT_EQ(why_not, "") << "the private PostgreSQL did not start";
    pg_.CreateDatabase("carve");
    PlatformTest::SetUp();
  }

  CliRun Migrate(const std::string& redirect) {
    return RunShell(absl::StrCat("timeout 120 ", CARVE_BINARY,
                                 " store migrate --from sqlite:", (dir_ / "data").string(),
                                 " --to ", pg_.Url("carve"), " ", redirect));
  }

  testing_pg::PrivatePostgres pg_;
};

TEST_F(StoreMigrateTest, ASqliteStoreMovesToPostgresWithItsChainAndRunningJobs) {
  const int64_t done = Submit({{"command", {"true"}}})["id"];
  EXPECT_EQ(WaitFinal(done)["state"], "succeeded");
  const int64_t running = Submit({{"command", {"sleep", "300"}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(running)["state"] == "running"; })) << ServerLog();
  Kill(server_, SIGTERM);
  // The chain as the stopped server left it, read from its SQLite file.
  auto sqlite = OpenSqliteStore((dir_ / "data/carve.db").string());
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  int64_t head_seq = 0;
  std::string head_hash;
  for (;;) {
    auto page = (*sqlite)->Events(head_seq, 1000);
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->empty()) break;
    head_seq = page->back().seq;
    head_hash = page->back().hash;
  }
  sqlite->reset();

  CliRun moved = Migrate("2>/dev/null");
  ASSERT_EQ(moved.exit, 0) << moved.out;
  json report = json::parse(moved.out);
  EXPECT_EQ(report["events"], head_seq) << report.dump(2);
  EXPECT_EQ(report["head_hash"], head_hash) << report.dump(2);
  EXPECT_GE(report["records"]["job.done"].get<int>(), 1) << report.dump(2);
  CliRun again = Migrate("2>&1");
  EXPECT_NE(again.exit, 0) << again.out;
  EXPECT_THAT(again.out, ::testing::HasSubstr("the destination is not empty")) << again.out;

  server_args_ = {"--store", pg_.Url("carve")};
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(Job(done)["state"], "succeeded");
  EXPECT_EQ(Job(running)["state"], "running") << "the agent's job outlived the migration";
  json copied = ApiGet(absl::StrCat("/api/v1/events?after=", head_seq - 1, "&limit=1"));
  ASSERT_EQ(copied.size(), 1u) << copied.dump(2);
  EXPECT_EQ(copied[0]["hash"], head_hash) << "the chain changed in the move";
  EXPECT_EQ(WaitFinal(Submit({{"command", {"true"}}})["id"])["state"], "succeeded");
  json verify = ApiGet("/api/v1/audit/verify");
  EXPECT_EQ(verify["ok"], true) << verify.dump(2);
  EXPECT_GT(verify["events"].get<int64_t>(), head_seq) << "the new server appends to the chain";
}

}  // namespace
}  // namespace carve::it
