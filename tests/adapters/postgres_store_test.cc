// The PostgreSQL store (adapters/store/postgres_store.h) against a private PostgreSQL server the
// suite starts from Debian's packages (initdb and pg_ctl in a temporary directory, a free port on
// 127.0.0.1) and stops: the Store port's contract — ids in byte order, puts before deletes, the
// hash chain and its check, concurrent writers in one process and in two, state across reopen.
#include "adapters/store/postgres_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/private_postgres.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One private server for the suite; each test gets a database of its own.
class PostgresStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pg_ = new testing_pg::PrivatePostgres();
    why_not_ = pg_->Start(absl::StrCat(::testing::TempDir(), "carve-pg-", getpid()));
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(why_not_, "") << "the private PostgreSQL did not start";
    const std::string name =
        absl::StrCat("t_", ::testing::UnitTest::GetInstance()->current_test_info()->line());
    pg_->CreateDatabase(name);
    url_ = pg_->Url(name);
  }

  std::unique_ptr<Store> OpenOrDie() {
    absl::StatusOr<std::unique_ptr<Store>> store = OpenPostgresStore(url_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  void Exec(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    n.exec(sql);
  }

  static inline testing_pg::PrivatePostgres* pg_ = nullptr;
  static inline std::string why_not_;
  std::string url_;
};

StoredEvent Event(const std::string& subject) {
  StoredEvent e;
  e.time_us = 1'700'000'000'000'000;
  e.actor = "scheduler";
  e.type = "job.submitted";
  e.subject = subject;
  e.reason = "because the test says so";
  return e;
}

std::vector<std::string> Ids(const std::vector<StoredRecord>& records) {
  std::vector<std::string> ids;
  for (const StoredRecord& r : records) ids.push_back(r.id);
  return ids;
}

TEST_F(PostgresStoreTest, RecordsPageInByteOrderAndPutsComeBeforeDeletes) {
  std::unique_ptr<Store> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  StoreBatch batch;
  for (const char* id : {"b9", "a", "B", "b10"}) batch.puts.push_back({"job", id, "{}"});
  batch.puts.push_back({"job", "gone", "{}"});
  batch.deletes.push_back({"job", "gone"});
  batch.puts.push_back({"usage", "x", "{\"n\":1}"});
  ASSERT_TRUE(store->Commit(batch).ok());
  EXPECT_THAT(Ids(*store->Load("job")), ElementsAre("B", "a", "b10", "b9"));  // bytes, not locale
  EXPECT_THAT(Ids(*store->List("job", "a", 2)), ElementsAre("b10", "b9"));
  EXPECT_EQ(*store->LastId("job"), "b9");
  EXPECT_FALSE(store->LastId("nothing")->has_value());
  EXPECT_EQ((*store->Get("usage", "x"))->json, "{\"n\":1}");
  EXPECT_FALSE(store->Get("job", "gone")->has_value());
  // A put replaces.
  ASSERT_TRUE(store->Commit({{{"usage", "x", "{\"n\":2}"}}, {}, {}}).ok());
  EXPECT_EQ((*store->Get("usage", "x"))->json, "{\"n\":2}");
}

TEST_F(PostgresStoreTest, EventsChainAcrossReopenAndATamperedOneBreaksIt) {
  {
    std::unique_ptr<Store> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->Commit({{}, {}, {Event("job/1"), Event("job/2")}}), 2);
    EXPECT_EQ(*store->Commit({{{"job", "1", "{}"}}, {}, {}}), 2) << "no events: the last seq";
  }
  std::unique_ptr<Store> store = OpenOrDie();
  EXPECT_EQ(*store->Commit({{}, {}, {Event("job/3")}}), 3);
  std::vector<StoredEvent> events = *store->Events(0, 10);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].prev_hash, events[0].hash);
  EXPECT_EQ(events[2].prev_hash, events[1].hash);
  EXPECT_TRUE(store->VerifyEventChain().ok());
  EXPECT_EQ(store->Events(1, 1)->at(0).seq, 2);
  Exec("UPDATE carve_events SET reason = 'rewritten' WHERE seq = 2");
  absl::Status broken = store->VerifyEventChain();
  EXPECT_EQ(broken.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(broken.message()), HasSubstr("broken at seq 2: stored hash"));
}

// Writers in one process (threads) and in two (two stores, as two controllers on one database)
// append one chain: every seq once, every link right.
TEST_F(PostgresStoreTest, ConcurrentWritersAppendOneChain) {
  std::unique_ptr<Store> a = OpenOrDie();
  std::unique_ptr<Store> b = OpenOrDie();
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      Store& store = w % 2 == 0 ? *a : *b;
      for (int i = 0; i < 25; ++i) {
        const std::string id = absl::StrCat(w, "-", i);
        EXPECT_TRUE(store.Commit({{{"job", id, "{}"}}, {}, {Event("job/" + id)}}).ok());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(a->Load("job")->size(), 100u);
  std::vector<StoredEvent> events = *b->Events(0, 1000);
  ASSERT_EQ(events.size(), 100u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_TRUE(a->VerifyEventChain().ok());
}

TEST_F(PostgresStoreTest, AServerThatIsNotThereIsUnavailableAndThePasswordIsNotShown) {
  absl::StatusOr<std::unique_ptr<Store>> store = OpenPostgresStore(
      absl::StrCat("postgresql://carve:s3cret@127.0.0.1:", testing_pg::FreePort(), "/nothing"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("carve:***@127.0.0.1"));
  EXPECT_THAT(std::string(store.status().message()), ::testing::Not(HasSubstr("s3cret")));
  EXPECT_TRUE(IsPostgresUrl("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/carve"));
}

}  // namespace
}  // namespace carve
