#include "adapters/store/sqlite_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StoredEvent MakeEvent(std::string type, std::string subject, std::string details = "{}") {
  StoredEvent event;
  event.time_us = 1'700'000'000'000'000;
  event.actor = "scheduler";
  event.type = std::move(type);
  event.subject = std::move(subject);
  event.reason = "because the test says so";
  event.details_json = std::move(details);
  return event;
}

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr), 1);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

// Runs SQL on the file through a connection of its own, as a tamperer or a rival writer would.
void ExecRaw(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &error), SQLITE_OK) << error;
  sqlite3_free(error);
  sqlite3_close(db);
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "carve-store-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    path_ = dir_ + "/carve.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteStore> OpenOrDie(const SqliteStoreOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::string dir_;
  std::string path_;
};

std::vector<std::string> Ids(const std::vector<StoredRecord>& records) {
  std::vector<std::string> ids;
  for (const StoredRecord& record : records) ids.push_back(record.id);
  return ids;
}

std::vector<int64_t> Seqs(const std::vector<StoredEvent>& events) {
  std::vector<int64_t> seqs;
  for (const StoredEvent& event : events) seqs.push_back(event.seq);
  return seqs;
}

// Pages of one kind in id order, and its greatest id: what the control plane reads finished jobs
// and usage rows with.
TEST_F(SqliteStoreTest, ListPagesAKindInIdOrderAndLastIdIsTheGreatest) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->LastId("job.done").value().has_value());
  StoreBatch batch;
  for (const char* id : {"000000000003", "000000000001", "000000000010", "000000000002"}) {
    batch.puts.push_back({"job.done", id, "{}"});
  }
  batch.puts.push_back({"job", "000000000099", "{}"});
  ASSERT_TRUE(store->Commit(batch).ok());
  EXPECT_THAT(Ids(store->List("job.done", "", 2).value()),
              ElementsAre("000000000001", "000000000002"));
  EXPECT_THAT(Ids(store->List("job.done", "000000000002", 10).value()),
              ElementsAre("000000000003", "000000000010"));
  EXPECT_TRUE(store->List("job.done", "000000000010", 10).value().empty());
  EXPECT_EQ(store->LastId("job.done").value(), "000000000010");
  EXPECT_EQ(store->LastId("job").value(), "000000000099");
  EXPECT_FALSE(store->List("job.done", "", -1).ok());
}

TEST_F(SqliteStoreTest, CommittedStateSurvivesReopen) {
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    StoreBatch first;
    first.puts = {{"job", "b", R"({"n":2})"}, {"job", "a", R"({"n":1})"}, {"node", "gpu-a", "{}"}};
    first.events = {MakeEvent("job.submitted", "job/a"), MakeEvent("job.submitted", "job/b")};
    EXPECT_EQ(store->Commit(first).value(), 2);

    StoreBatch second;
    second.deletes = {{"job", "a"}};
    second.puts = {{"job", "c", R"({"n":3})"}, {"job", "b", R"({"n":22})"}};
    second.events = {MakeEvent("job.deleted", "job/a", R"({"why":"done"})")};
    EXPECT_EQ(store->Commit(second).value(), 3);

    StoreBatch no_events;
    no_events.puts = {{"tenant", "t1", "{}"}};
    EXPECT_EQ(store->Commit(no_events).value(), 3);
    EXPECT_EQ(store->Commit(StoreBatch{}).value(), 3);
  }

  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<StoredRecord>> jobs = store->Load("job");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_THAT(Ids(*jobs), ElementsAre("b", "c"));
  EXPECT_EQ((*jobs)[0].json, R"({"n":22})");
  EXPECT_EQ((*jobs)[0].kind, "job");
  EXPECT_FALSE(store->Get("job", "a").value().has_value());
  std::optional<StoredRecord> node = store->Get("node", "gpu-a").value();
  ASSERT_TRUE(node.has_value());
  EXPECT_EQ(node->json, "{}");
  EXPECT_THAT(Ids(store->Load("tenant").value()), ElementsAre("t1"));
  EXPECT_TRUE(store->Load("queue").value().empty());

  std::vector<StoredEvent> events = store->Events(0, 100).value();
  ASSERT_THAT(Seqs(events), ElementsAre(1, 2, 3));
  EXPECT_EQ(events[0].prev_hash, std::string(64, '0'));
  EXPECT_EQ(events[1].prev_hash, events[0].hash);
  EXPECT_EQ(events[2].prev_hash, events[1].hash);
  EXPECT_EQ(events[2].type, "job.deleted");
  EXPECT_EQ(events[2].subject, "job/a");
  EXPECT_EQ(events[2].actor, "scheduler");
  EXPECT_EQ(events[2].time_us, 1'700'000'000'000'000);
  EXPECT_EQ(events[2].details_json, R"({"why":"done"})");
  // The documented formula, computed independently.
  EXPECT_EQ(events[0].hash,
            Sha256Hex(absl::StrCat(std::string(64, '0'), "\n1\n1700000000000000\nscheduler\n",
                                   "job.submitted\njob/a\nbecause the test says so\n{}")));
  EXPECT_THAT(Seqs(store->Events(1, 1).value()), ElementsAre(2));
  EXPECT_TRUE(store->Events(3, 10).value().empty());
  EXPECT_TRUE(store->Events(0, 0).value().empty());
  EXPECT_EQ(store->Events(0, -1).status().code(), absl::StatusCode::kInvalidArgument);

  StoreBatch after_reopen;
  after_reopen.events = {MakeEvent("node.registered", "node/gpu-a")};
  EXPECT_EQ(store->Commit(after_reopen).value(), 4);
  EXPECT_EQ(store->Events(3, 10).value().at(0).prev_hash, events[2].hash);
  EXPECT_TRUE(store->VerifyEventChain().ok());
}

TEST_F(SqliteStoreTest, TamperedEventBreaksTheChainAtItsSeq) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  for (int i = 1; i <= 5; ++i) {
    StoreBatch batch;
    batch.events = {MakeEvent("job.submitted", absl::StrCat("job/", i))};
    ASSERT_EQ(store->Commit(std::move(batch)).value(), i);
  }
  EXPECT_TRUE(store->VerifyEventChain().ok());

  ExecRaw(path_, "UPDATE events SET reason = 'x' WHERE seq = 3");
  absl::Status status = store->VerifyEventChain();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("broken at seq 3:"));
}

TEST_F(SqliteStoreTest, RewrittenHashBreaksTheLinkOfTheNextEvent) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  StoreBatch batch;
  batch.events = {MakeEvent("a", "x/1"), MakeEvent("b", "x/2"), MakeEvent("c", "x/3")};
  ASSERT_EQ(store->Commit(std::move(batch)).value(), 3);
  // A tamperer who also recomputes seq 2's hash is caught at seq 3's prev_hash.
  StoredEvent second = store->Events(1, 1).value().at(0);
  second.reason = "x";
  const std::string rehashed = Sha256Hex(absl::StrCat(
      second.prev_hash, "\n", second.seq, "\n", second.time_us, "\n", second.actor, "\n",
      second.type, "\n", second.subject, "\n", second.reason, "\n", second.details_json));
  ExecRaw(path_,
          absl::StrCat("UPDATE events SET reason = 'x', hash = '", rehashed, "' WHERE seq = 2")
              .c_str());
  EXPECT_THAT(store->VerifyEventChain().message(), HasSubstr("broken at seq 3: prev_hash"));

  ExecRaw(path_, "DELETE FROM events WHERE seq = 2");
  EXPECT_THAT(store->VerifyEventChain().message(), HasSubstr("broken at seq 3: expected seq 2"));
}

TEST_F(SqliteStoreTest, ConcurrentCommitsShareTransactions) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kCommitsPerThread = 250;
  std::vector<std::vector<int64_t>> seqs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommitsPerThread; ++i) {
        StoreBatch batch;
        const std::string id = absl::StrCat(t, "-", i);
        batch.puts = {{"job", id, "{}"}};
        batch.events = {MakeEvent("job.submitted", absl::StrCat("job/", id))};
        absl::StatusOr<int64_t> seq = store->Commit(std::move(batch));
        seqs[t].push_back(seq.ok() ? *seq : -1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  std::vector<int64_t> all;
  for (const std::vector<int64_t>& mine : seqs) {
    // One caller's commits are applied in the order it made them.
    EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  constexpr int kTotal = kThreads * kCommitsPerThread;
  ASSERT_EQ(all.size(), kTotal);
  for (int i = 0; i < kTotal; ++i) ASSERT_EQ(all[i], i + 1);

  EXPECT_EQ(store->Load("job").value().size(), kTotal);
  EXPECT_EQ(store->Events(0, 10 * kTotal).value().size(), kTotal);
  EXPECT_TRUE(store->VerifyEventChain().ok());
  EXPECT_GT(store->transactions(), 0);
  EXPECT_LT(store->transactions(), kTotal);
}

TEST_F(SqliteStoreTest, FailedTransactionAppliesNothingAndKeepsTheSeq) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  StoreBatch first;
  first.events = {MakeEvent("job.submitted", "job/1")};
  ASSERT_EQ(store->Commit(std::move(first)).value(), 1);

  ExecRaw(path_,
          "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.type = 'poison' "
          "BEGIN SELECT RAISE(ABORT, 'poisoned event'); END;");
  StoreBatch poisoned;
  poisoned.puts = {{"job", "2", "{}"}};
  poisoned.events = {MakeEvent("job.submitted", "job/2"), MakeEvent("poison", "job/2")};
  absl::StatusOr<int64_t> failed = store->Commit(std::move(poisoned));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("appending event 3 (poison)"));
  EXPECT_THAT(failed.status().message(), HasSubstr("poisoned event"));
  EXPECT_FALSE(store->Get("job", "2").value().has_value());
  EXPECT_THAT(Seqs(store->Events(0, 10).value()), ElementsAre(1));

  StoreBatch next;
  next.events = {MakeEvent("job.submitted", "job/3")};
  EXPECT_EQ(store->Commit(std::move(next)).value(), 2);
  EXPECT_TRUE(store->VerifyEventChain().ok());
}

TEST_F(SqliteStoreTest, LockedFileFailsEveryWaitingCommit) {
  std::unique_ptr<SqliteStore> store = OpenOrDie({.busy_timeout_ms = 50});
  ASSERT_NE(store, nullptr);
  StoreBatch first;
  first.events = {MakeEvent("job.submitted", "job/1")};
  ASSERT_EQ(store->Commit(std::move(first)).value(), 1);

  sqlite3* rival = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &rival), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(rival, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      StoreBatch batch;
      batch.events = {MakeEvent("job.submitted", "job/x")};
      results[i] = store->Commit(std::move(batch)).status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(sqlite3_exec(rival, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(rival);

  for (const absl::Status& status : results) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("BEGIN IMMEDIATE: database is locked"));
  }
  StoreBatch next;
  next.events = {MakeEvent("job.submitted", "job/2")};
  EXPECT_EQ(store->Commit(std::move(next)).value(), 2);
  EXPECT_TRUE(store->VerifyEventChain().ok());
}

TEST_F(SqliteStoreTest, OpenInMissingDirectorySaysWhatFailed) {
  const std::string path = dir_ + "/missing/carve.db";
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            absl::StrCat("sqlite: cannot open ", path, ": unable to open database file"));
}

TEST_F(SqliteStoreTest, OpenOfAFileThatIsNotADatabaseFails) {
  std::ofstream(path_) << std::string(4096, 'x');
  absl::StatusOr<std::unique_ptr<Store>> store = OpenSqliteStore(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("file is not a database"));
}

// What the killed writer reports for each batch whose Commit returned OK. 32 bytes, below
// PIPE_BUF, so each write() from any thread reaches the pipe whole.
struct Ack {
  int64_t seq;
  char id[24];
};
static_assert(sizeof(Ack) == 32);

// The child: commits batches from four threads until it is killed. Each batch puts one record
// and appends two events naming it, so a partly applied batch is visible after recovery.
[[noreturn]] void RunWriterUntilKilled(const std::string& path, int ack_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  if (!store.ok()) _exit(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, ack_fd, t] {
      for (int i = 0;; ++i) {
        const std::string id = absl::StrCat("w", t, "-", i);
        StoreBatch batch;
        batch.puts = {{"crash", id, absl::StrCat(R"({"payload":")", std::string(200, 'p'), "\"}")}};
        for (int part = 0; part < 2; ++part) {
          batch.events.push_back(MakeEvent("crash.put", absl::StrCat("crash/", id),
                                           nlohmann::json{{"id", id}, {"part", part}}.dump()));
        }
        absl::StatusOr<int64_t> seq = (*store)->Commit(std::move(batch));
        if (!seq.ok()) _exit(3);
        Ack ack{};
        ack.seq = *seq;
        std::memcpy(ack.id, id.data(), std::min(id.size(), sizeof(ack.id) - 1));
        if (write(ack_fd, &ack, sizeof(ack)) != static_cast<ssize_t>(sizeof(ack))) _exit(4);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  _exit(5);
}

TEST_F(SqliteStoreTest, KilledWriterLosesNoAcknowledgedBatchAndAppliesNoneInPart) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    RunWriterUntilKilled(path_, fds[1]);
  }
  close(fds[1]);

  std::string received;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  bool eof = false;
  while (!eof) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd readable{fds[0], POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) eof = true;
    if (n > 0) received.append(buffer, static_cast<size_t>(n));
  }
  kill(child, SIGKILL);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) {
    received.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "the writer stopped on its own, exit code " << WEXITSTATUS(wait_status);
  ASSERT_EQ(received.size() % sizeof(Ack), 0u);
  std::vector<Ack> acks(received.size() / sizeof(Ack));
  std::memcpy(acks.data(), received.data(), received.size());
  ASSERT_FALSE(acks.empty()) << "the writer acknowledged nothing in 300 ms";

  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->VerifyEventChain().ok()) << store->VerifyEventChain();
  std::set<std::string> records;
  const std::vector<StoredRecord> stored = store->Load("crash").value();
  for (const StoredRecord& record : stored) records.insert(record.id);
  // id -> seq of each part.
  std::map<std::string, std::map<int, std::vector<int64_t>>> events;
  const std::vector<StoredEvent> all = store->Events(0, 1'000'000).value();
  for (const StoredEvent& event : all) {
    const nlohmann::json details = nlohmann::json::parse(event.details_json);
    events[details.at("id").get<std::string>()][details.at("part").get<int>()].push_back(event.seq);
  }
  // Every batch on disk is whole: its record and both its events, once, one after the other.
  for (const auto& [id, parts] : events) {
    EXPECT_TRUE(records.contains(id)) << id << " has events but no record";
    ASSERT_EQ(parts.size(), 2u) << id;
    ASSERT_EQ(parts.at(0).size(), 1u) << id;
    ASSERT_EQ(parts.at(1).size(), 1u) << id;
    EXPECT_EQ(parts.at(1)[0], parts.at(0)[0] + 1) << id;
  }
  for (const std::string& id : records) {
    EXPECT_TRUE(events.contains(id)) << id << " has a record but no events";
  }
  // Every acknowledged batch is there, and its last event has the seq Commit returned.
  std::set<std::string> acked;
  for (const Ack& ack : acks) {
    const std::string id(ack.id);
    EXPECT_TRUE(acked.insert(id).second) << id << " acknowledged twice";
    ASSERT_TRUE(events.contains(id)) << "acknowledged batch " << id << " is lost";
    EXPECT_EQ(events[id][1][0], ack.seq) << id;
  }
  EXPECT_GE(all.size(), 2 * acks.size());
}

}  // namespace
}  // namespace carve
