#include "runtime/journal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "adapters/store/faulty_store.h"
#include "adapters/store/sqlite_store.h"

namespace carve {
namespace {

// A store whose commits wait until the test lets them through, or fail.
class GatedStore : public Store {
 public:
  absl::StatusOr<int64_t> Commit(StoreBatch batch) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++started_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
    if (!fail_.ok()) return fail_;
    committed_ += static_cast<int64_t>(batch.puts.size());
    return committed_;
  }
  absl::StatusOr<std::vector<StoredRecord>> Load(const std::string&) override {
    return std::vector<StoredRecord>{};
  }
  absl::StatusOr<std::optional<StoredRecord>> Get(const std::string&, const std::string&) override {
    return std::nullopt;
  }
  absl::StatusOr<std::vector<StoredRecord>> List(const std::string&, const std::string&,
                                                 int64_t) override {
    return std::vector<StoredRecord>{};
  }
  absl::StatusOr<std::optional<std::string>> LastId(const std::string&) override {
    return std::nullopt;
  }
  absl::StatusOr<std::vector<std::string>> Kinds() override { return std::vector<std::string>{}; }
  absl::StatusOr<std::vector<StoredEvent>> Events(int64_t, int64_t) override {
    return std::vector<StoredEvent>{};
  }
  absl::Status VerifyEventChain() override { return absl::OkStatus(); }

  void WaitStarted(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return started_ >= n; });
  }
  void Open(absl::Status fail = absl::OkStatus()) {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    fail_ = std::move(fail);
    cv_.notify_all();
  }
  int started() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  absl::Status fail_;
  int started_ = 0;
  int64_t committed_ = 0;
};

StoreBatch OnePut() {
  StoreBatch batch;
  batch.puts.push_back({"job", "000000000001", "{}"});
  return batch;
}

// Issue 12: a heartbeat with nothing to write returned at once, so it could hand an agent an
// assignment whose bind was still on its way to disk. An empty batch now waits for the batches
// appended before it.
TEST(JournalTest, AnEmptyBatchWaitsForTheCommitBeforeIt) {
  GatedStore store;
  Journal journal(&store);
  std::future<absl::Status> bind = journal.Append(OnePut());
  store.WaitStarted(1);
  std::future<absl::Status> barrier = journal.Append(StoreBatch{});
  EXPECT_EQ(barrier.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  store.Open();
  EXPECT_TRUE(bind.get().ok());
  EXPECT_TRUE(barrier.get().ok());
  EXPECT_EQ(store.started(), 1);  // the barrier itself wrote nothing
}

TEST(JournalTest, AfterAFailedCommitNothingLaterIsConfirmed) {
  GatedStore store;
  Journal journal(&store);
  std::future<absl::Status> first = journal.Append(OnePut());
  store.WaitStarted(1);
  store.Open(absl::UnavailableError("disk full"));
  EXPECT_EQ(first.get().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(journal.Append(OnePut()).get().message(), "disk full");
  EXPECT_EQ(journal.Append(StoreBatch{}).get().message(), "disk full");
  EXPECT_EQ(store.started(), 1);
}

TEST(JournalTest, AnEmptyBatchOnAnIdleJournalResolves) {
  GatedStore store;
  Journal journal(&store);
  EXPECT_TRUE(journal.Append(StoreBatch{}).get().ok());
  EXPECT_EQ(store.started(), 0);
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
  ASSERT_TRUE(journal.Append(OnePut()).get().ok());
  store.FailNthCommit(1);
  StoreBatch second;
  second.puts.push_back({"job", "2", "{}"});
  absl::Status failed = journal.Append(std::move(second)).get();
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(journal.failure(), failed);
  EXPECT_EQ(journal.Append(OnePut()).get(), failed);
  EXPECT_EQ(store.commits(), 2) << "the batch after the failure reached the store";
  auto jobs = (*sqlite)->Load("job");
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id, "000000000001");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace carve
