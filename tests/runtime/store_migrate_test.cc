// `carve store migrate` (runtime/store_migrate.h) between two real SQLite stores: every kind and
// every event is copied, the destination hashes the chain to the same head, and a source whose
// chain is broken or a destination that is not empty is refused before anything is written.
// (SQLite to PostgreSQL through the real binary: tests/integration/postgres_test.cc.)
#include "runtime/store_migrate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

class StoreMigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "carve-migrate-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    from_ = Open("from.db");
    to_ = Open("to.db");
    ASSERT_TRUE(from_ != nullptr && to_ != nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> Open(const std::string& name) {
    auto store = OpenSqliteStore(dir_ + "/" + name);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // `n` events and one record per event, in batches of three events.
  void Fill(Store& store, int n) {
    for (int i = 0; i < n; i += 3) {
      StoreBatch b;
      for (int k = i; k < std::min(n, i + 3); ++k) {
        b.puts.push_back({k % 2 ? "job.done" : "usage", absl::StrCat(k), R"({"k":1})"});
        StoredEvent e;
        e.time_us = 1'700'000'000'000'000 + k;
        e.actor = "user:alice";
        e.type = "job.submitted";
        e.subject = absl::StrCat("job/", k);
        e.reason = absl::StrCat("event ", k, " with a newline\nand ünïcode");
        e.details_json = json{{"k", k}}.dump();
        b.events.push_back(e);
      }
      ASSERT_TRUE(store.Commit(std::move(b)).ok());
    }
  }

  std::string dir_;
  std::unique_ptr<Store> from_, to_;
};

TEST_F(StoreMigrateTest, EveryRecordAndEventMovesWithTheSameHeadHash) {
  Fill(*from_, 25);
  auto report = MigrateStore(*from_, *to_, 4);  // pages of 4: many commits
  ASSERT_TRUE(report.ok()) << report.status();
  std::vector<StoredEvent> source = *from_->Events(0, 100);
  std::vector<StoredEvent> copy = *to_->Events(0, 100);
  ASSERT_EQ(copy.size(), 25u);
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(copy[i].seq, source[i].seq);
    EXPECT_EQ(copy[i].hash, source[i].hash) << "event " << i + 1;
    EXPECT_EQ(copy[i].reason, source[i].reason);
  }
  EXPECT_EQ((*report)["events"], 25);
  EXPECT_EQ((*report)["head_hash"], source.back().hash);
  EXPECT_EQ((*report)["records"], json({{"job.done", 12}, {"usage", 13}}));
  EXPECT_THAT(*to_->Kinds(), ElementsAre("job.done", "usage"));
  EXPECT_EQ((*to_->Get("usage", "24"))->json, R"({"k":1})");
  EXPECT_TRUE(to_->VerifyEventChain().ok());
}

TEST_F(StoreMigrateTest, ADestinationThatIsNotEmptyIsRefusedAndKeptAsItWas) {
  Fill(*from_, 3);
  ASSERT_TRUE(to_->Commit({{{"node", "n1", "{}"}}, {}, {}}).ok());
  auto report = MigrateStore(*from_, *to_);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(report.status().message()),
              HasSubstr("the destination is not empty; migrate into a new database: the store "
                        "holds records already"));
  EXPECT_THAT(*to_->Kinds(), ElementsAre("node"));
  EXPECT_TRUE(to_->Events(0, 10)->empty());
}

TEST_F(StoreMigrateTest, ABrokenSourceChainCopiesNothing) {
  Fill(*from_, 6);
  from_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/from.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE events SET reason = 'rewritten' WHERE seq = 4", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  from_ = Open("from.db");
  auto report = MigrateStore(*from_, *to_);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(report.status().message()),
              HasSubstr("the source's event chain does not verify; nothing was copied"));
  EXPECT_TRUE(to_->Kinds()->empty());
  EXPECT_TRUE(to_->Events(0, 10)->empty());
}

}  // namespace
}  // namespace carve
