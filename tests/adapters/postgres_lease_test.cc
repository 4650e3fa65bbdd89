// The leader's lease and fencing on PostgreSQL (adapters/store/postgres_lease.h) against a
// private server the suite starts: one holder at a time, a take-over only once the lease has
// expired, a new term each time, and a deposed leader's commits refused with nothing written.
#include "adapters/store/postgres_lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "adapters/private_postgres.h"
#include "adapters/store/postgres_store.h"
#include "adapters/stored_event.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using testing_store::Event;

class PostgresLeaseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing_pg::SuitePostgres::Start("carve-pg-lease"); }
  static void TearDownTestSuite() { testing_pg::SuitePostgres::Stop(); }

  void SetUp() override {
    url_ = testing_pg::SuitePostgres::NewDatabase("lease_");
    ASSERT_NE(url_, "");
  }

  std::unique_ptr<PostgresLease> Lease(const std::string& holder, int64_t lease_ms = 2000) {
    auto lease = PostgresLease::Open(url_, holder, "http://" + holder, lease_ms);
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? *std::move(lease) : nullptr;
  }

  // Waits (polling the row, at most 30 s) until the lease has expired by the database's clock.
  static bool Expired(PostgresLease& lease) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      auto row = lease.Current();
      if (row.ok() && row->has_value() && (*row)->expires_in_ms < 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::string url_;
};

TEST_F(PostgresLeaseTest, OneLeaderAtATimeAndATakeOverFencesTheOldOne) {
  std::unique_ptr<PostgresLease> a = Lease("a:1"), b = Lease("b:1");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  EXPECT_FALSE(a->Current()->has_value()) << "nobody has led yet";
  ASSERT_EQ(*a->TryAcquire(), 1);
  EXPECT_EQ(*b->TryAcquire(), 0) << "a holds an unexpired lease";
  EXPECT_TRUE(a->Renew(1).ok());
  LeaseRow row = **b->Current();
  EXPECT_EQ(row.holder, "a:1");
  EXPECT_EQ(row.address, "http://a:1");
  EXPECT_EQ(row.term, 1);
  EXPECT_GT(row.expires_in_ms, 0);

  auto fenced_a = OpenFencedPostgresStore(url_, "a:1", 1, 1000);
  ASSERT_TRUE(fenced_a.ok()) << fenced_a.status();
  ASSERT_TRUE((*fenced_a)->Commit({{{"job", "1", "{}"}}, {}, {Event("job/1")}}).ok());

  // a stops renewing (paused): once its lease has expired, b takes over with term 2.
  ASSERT_TRUE(Expired(*b));
  absl::Status late = (*fenced_a)->Commit({{{"job", "2", "{}"}}, {}, {Event("job/2")}}).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(std::string(late.message()), HasSubstr("refused (fenced)"));
  ASSERT_EQ(*b->TryAcquire(), 2);
  EXPECT_EQ(a->Renew(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*a->TryAcquire(), 0) << "b holds it now";
  late = (*fenced_a)->Commit({{{"job", "3", "{}"}}, {}, {Event("job/3")}}).status();
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;

  auto fenced_b = OpenFencedPostgresStore(url_, "b:1", 2, 1000);
  ASSERT_TRUE(fenced_b.ok()) << fenced_b.status();
  EXPECT_EQ(*(*fenced_b)->Commit({{{"job", "4", "{}"}}, {}, {Event("job/4")}}), 2);
  EXPECT_EQ((*fenced_b)->Load("job")->size(), 2u) << "the refused commits wrote nothing";
  EXPECT_TRUE((*fenced_b)->VerifyEventChain().ok());
}

TEST_F(PostgresLeaseTest, ARestartTakesItsOwnLeaseBackAndAReleaseHandsItOverAtOnce) {
  std::unique_ptr<PostgresLease> a = Lease("a:1", 60'000), b = Lease("b:1", 60'000);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_EQ(*a->TryAcquire(), 1);
  std::unique_ptr<PostgresLease> again = Lease("a:1", 60'000);  // the same server, restarted
  ASSERT_EQ(*again->TryAcquire(), 2) << "a restarted server need not wait for its old lease";
  auto old_term = OpenFencedPostgresStore(url_, "a:1", 1, 1000);
  ASSERT_TRUE(old_term.ok());
  EXPECT_EQ((*old_term)->Commit({{}, {}, {Event("job/1")}}).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the process of the old term, if it still ran, is fenced";
  EXPECT_EQ(*b->TryAcquire(), 0);
  ASSERT_TRUE(again->Release(2).ok());
  EXPECT_EQ(*b->TryAcquire(), 3) << "released: no wait for the minute-long lease";
}

}  // namespace
}  // namespace carve
