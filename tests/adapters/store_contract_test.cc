// The Store port's contract (ports/store.h), one suite run against every adapter: SQLite in a
// temporary directory, and PostgreSQL on a private server the suite starts from Debian's packages
// (initdb and pg_ctl, a free port on 127.0.0.1) and stops. What only one adapter has (a locked
// SQLite file, a killed writer, a second controller on one database, tampering through each
// engine's own SQL) stays in sqlite_store_test.cc and postgres_store_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "adapters/private_postgres.h"
#include "adapters/store/postgres_store.h"
#include "adapters/stored_event.h"
#include "ports/store.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { testing_pg::SuitePostgres::Start("carve-pg-contract"); }
  static void TearDownTestSuite() { testing_pg::SuitePostgres::Stop(); }

  void SetUp() override {
    if (GetParam() == "postgresql") {
      where_ = testing_pg::SuitePostgres::NewDatabase("contract_");
      ASSERT_NE(where_, "");
      return;
    }
    std::string pattern = ::testing::TempDir() + "carve-contract-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    where_ = dir_ + "/carve.db";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<Store> Open() {
    auto store = GetParam() == "postgresql" ? OpenPostgresStore(where_) : OpenSqliteStore(where_);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string dir_;
  std::string where_;
};

using testing_store::Event;

std::vector<std::string> Ids(const std::vector<StoredRecord>& records) {
  std::vector<std::string> ids;
  for (const StoredRecord& r : records) ids.push_back(r.id);
  return ids;
}

TEST_P(StoreContractTest, RecordsPageInByteOrderPutsReplaceAndComeBeforeDeletes) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(*store->Kinds(), IsEmpty());
  StoreBatch batch;
  for (const char* id : {"b9", "a", "B", "b10"}) batch.puts.push_back({"job", id, "{}"});
  batch.puts.push_back({"job", "gone", "{}"});
  batch.deletes.push_back({"job", "gone"});
  batch.puts.push_back({"usage", "x", R"({"n":1})"});
  batch.puts.push_back({"job.done", "7", "{}"});
  ASSERT_TRUE(store->Commit(batch).ok());
  EXPECT_THAT(Ids(*store->Load("job")), ElementsAre("B", "a", "b10", "b9"));  // bytes, not locale
  EXPECT_THAT(Ids(*store->List("job", "a", 2)), ElementsAre("b10", "b9"));
  EXPECT_THAT(Ids(*store->List("job", "b9", 10)), IsEmpty());
  EXPECT_EQ(*store->LastId("job"), "b9");
  EXPECT_FALSE(store->LastId("nothing")->has_value());
  EXPECT_EQ((*store->Get("usage", "x"))->json, R"({"n":1})");
  EXPECT_FALSE(store->Get("job", "gone")->has_value());
  EXPECT_THAT(*store->Kinds(), ElementsAre("job", "job.done", "usage"));
  ASSERT_TRUE(store->Commit({{{"usage", "x", R"({"n":2})"}}, {}, {}}).ok());
  EXPECT_EQ((*store->Get("usage", "x"))->json, R"({"n":2})");
  ASSERT_TRUE(store->Commit({{}, {{"usage", "x"}}, {}}).ok());
  EXPECT_THAT(*store->Kinds(), ElementsAre("job", "job.done")) << "an emptied kind is gone";
}

TEST_P(StoreContractTest, EventsChainAcrossReopenAndPage) {
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->Commit({{}, {}, {Event("job/1"), Event("job/2")}}), 2);
    EXPECT_EQ(*store->Commit({{{"job", "1", "{}"}}, {}, {}}), 2) << "no events: the last seq";
  }
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->Commit({{}, {}, {Event("job/3")}}), 3);
  std::vector<StoredEvent> events = *store->Events(0, 10);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].prev_hash, std::string(64, '0'));
  EXPECT_EQ(events[1].prev_hash, events[0].hash);
  EXPECT_EQ(events[2].prev_hash, events[1].hash);
  EXPECT_EQ(events[2].subject, "job/3");
  EXPECT_EQ(events[2].details_json, R"({"n":1})");
  EXPECT_TRUE(store->VerifyEventChain().ok());
  ASSERT_EQ(store->Events(1, 1)->size(), 1u);
  EXPECT_EQ(store->Events(1, 1)->at(0).seq, 2);
  EXPECT_THAT(*store->Events(3, 10), IsEmpty());
}

// The same events in the same order hash the same in every adapter: what `carve store migrate`
// relies on to move a chain between them.
TEST_P(StoreContractTest, TheSameEventsHashTheSameInEveryAdapter) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit({{}, {}, {Event("job/1"), Event("job/2")}}).ok());
  // hex(SHA-256(64 '0's "\n1\n1700000000000000\nscheduler\njob.submitted\njob/1\nbecause the
  // test says so\n{"n":1}")), as printf ... | sha256sum gives it.
  std::vector<StoredEvent> events = *store->Events(0, 10);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].hash, "d85092e34c0e52cc64573eb3e93b51f8c66753b8f34b87af150b6b20a314bc3e");
  EXPECT_EQ(events[1].prev_hash, events[0].hash);
}

// Threads of one process commit at once: every batch lands whole, every seq once, one chain.
TEST_P(StoreContractTest, ConcurrentCommitsAppendOneChain) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 25; ++i) {
        const std::string id = absl::StrCat(w, "-", i);
        EXPECT_TRUE(store->Commit({{{"job", id, "{}"}}, {}, {Event("job/" + id)}}).ok());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(store->Load("job")->size(), 100u);
  std::vector<StoredEvent> events = *store->Events(0, 1000);
  ASSERT_EQ(events.size(), 100u);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq, static_cast<int64_t>(i + 1));
  EXPECT_TRUE(store->VerifyEventChain().ok());
}

INSTANTIATE_TEST_SUITE_P(Adapters, StoreContractTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace carve
