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

}  // namespace
}  // namespace carve::it
