#include "adapters/store/faulty_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace carve {
namespace {

class FaultyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = std::filesystem::path(::testing::TempDir()) / absl::StrCat("faulty-", getpid());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto store = OpenSqliteStore((dir / "carve.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    inner_ = *std::move(store);
  }

  absl::Status Put(FaultyStore& store, const std::string& id) {
    StoreBatch b;
    b.puts.push_back({"job", id, "{}"});
    return store.Commit(std::move(b)).status();
  }

  bool Stored(const std::string& id) {
    auto r = inner_->Get("job", id);
    return r.ok() && r->has_value();
  }

  std::unique_ptr<Store> inner_;
};

TEST_F(FaultyStoreTest, FailsTheNthCommitOnlyAndWritesNothing) {
  FaultyStore store(inner_.get());
  store.FailNthCommit(2);
  EXPECT_TRUE(Put(store, "1").ok());
  absl::Status failed = Put(store, "2");
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("commit 2 failed"), std::string::npos) << failed;
  EXPECT_TRUE(Put(store, "3").ok());
  EXPECT_TRUE(Stored("1"));
  EXPECT_FALSE(Stored("2"));
  EXPECT_TRUE(Stored("3"));
  EXPECT_EQ(store.commits(), 3);
  EXPECT_EQ(store.failures(), 1);
}

TEST_F(FaultyStoreTest, FailAfterWriteWritesAndReportsFailure) {
  FaultyStore store(inner_.get());
  store.FailNthCommitAfterWrite(1);
  EXPECT_FALSE(Put(store, "1").ok());
  EXPECT_TRUE(Stored("1"));
}

TEST_F(FaultyStoreTest, FailsEveryCommitUntilHealed) {
  FaultyStore store(inner_.get());
  store.FailAllCommits();
  EXPECT_FALSE(Put(store, "1").ok());
  EXPECT_FALSE(Put(store, "2").ok());
  store.Heal();
  EXPECT_TRUE(Put(store, "3").ok());
  EXPECT_FALSE(Stored("1"));
  EXPECT_TRUE(Stored("3"));
}

}  // namespace
}  // namespace carve
