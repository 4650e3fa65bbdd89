#include "runtime/journal.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "adapters/store/faulty_store.h"

namespace carve {
namespace {

StoreBatch Put(const std::string& id) {
  StoreBatch b;
  b.puts.push_back({"job", id, "{}"});
  return b;
}

// A failed commit poisons the journal: later batches were made on top of the lost one, so none
// reaches the store, even once the store works again (they used to be committed).
TEST(JournalTest, NothingIsCommittedAfterAFailedCommit) {
  auto dir = std::filesystem::path(::testing::TempDir()) / absl::StrCat("journal-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto sqlite = OpenSqliteStore((dir / "carve.db").string());
  ASSERT_TRUE(sqlite.ok()) << sqlite.status();
  FaultyStore store(sqlite->get());
  Journal journal(&store);
  ASSERT_TRUE(journal.Append(Put("1")).get().ok());
  store.FailNthCommit(1);
  absl::Status failed = journal.Append(Put("2")).get();
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(journal.failure(), failed);
  EXPECT_EQ(journal.Append(Put("3")).get(), failed);
  EXPECT_EQ(store.commits(), 2) << "the batch after the failure reached the store";
  auto jobs = (*sqlite)->Load("job");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, "1");
}

}  // namespace
}  // namespace carve
