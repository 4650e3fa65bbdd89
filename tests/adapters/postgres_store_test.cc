// The PostgreSQL store (adapters/store/postgres_store.h) against a private PostgreSQL server the
// suite starts from Debian's packages (initdb and pg_ctl in a temporary directory, a free port on
// 127.0.0.1) and stops: the Store port's contract — ids in byte order, puts before deletes, the
// hash chain and its check, concurrent writers in one process and in two, state across reopen.
// What every adapter must do is in store_contract_test.cc; this suite keeps what is PostgreSQL's.
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
#include "adapters/stored_event.h"

namespace carve {
namespace {

using ::testing::HasSubstr;

// One private server for the suite; each test gets a database of its own.
class PostgresStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing_pg::SuitePostgres::Start("carve-pg"); }
  static void TearDownTestSuite() { testing_pg::SuitePostgres::Stop(); }

  void SetUp() override {
    url_ = testing_pg::SuitePostgres::NewDatabase("t_");
    ASSERT_NE(url_, "");
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

  std::string url_;
};

using testing_store::Event;

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
