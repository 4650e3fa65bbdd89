#include "adapters/store/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "adapters/store/event_hash.h"

namespace carve {
namespace {

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, DbCloser>;

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CANTOPEN:
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kInternal;
  }
}

// "sqlite: <what>: <sqlite's message>". Read the message before the statement is reset.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return absl::Status(CodeFor(rc), absl::StrCat("sqlite: ", what, ": ", message));
}

absl::Status Exec(sqlite3* db, const char* sql, absl::string_view what) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return absl::OkStatus();
  absl::Status status(CodeFor(rc), absl::StrCat("sqlite: ", what, ": ",
                                                error != nullptr ? error : sqlite3_errstr(rc)));
  sqlite3_free(error);
  return status;
}

absl::StatusOr<StmtPtr> Prepare(sqlite3* db, const char* sql, absl::string_view path) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  StmtPtr stmt(raw);
  if (rc != SQLITE_OK) {
    return SqliteError(db, rc, absl::StrCat("cannot prepare \"", sql, "\" on ", path));
  }
  return stmt;
}

// Resets a reused statement and drops its bindings when a use ends, so that no read snapshot
// outlives the call and the next use starts clean.
class StmtUse {
 public:
  explicit StmtUse(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StmtUse() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StmtUse(const StmtUse&) = delete;
  StmtUse& operator=(const StmtUse&) = delete;

  // Binds parameters left to right; the first failure sticks in rc().
  StmtUse& Text(const std::string& value) {
    if (rc_ == SQLITE_OK) {
      rc_ =
          sqlite3_bind_text64(stmt_, next_, value.data(), value.size(), SQLITE_STATIC, SQLITE_UTF8);
    }
    ++next_;
    return *this;
  }
  StmtUse& Int(int64_t value) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(stmt_, next_, value);
    ++next_;
    return *this;
  }
  int rc() const { return rc_; }
  sqlite3_stmt* get() const { return stmt_; }
  sqlite3* db() const { return sqlite3_db_handle(stmt_); }

  // Steps a statement that returns no rows.
  absl::Status Run(absl::string_view what) {
    if (rc_ != SQLITE_OK) return SqliteError(db(), rc_, what);
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_DONE) return SqliteError(db(), rc, what);
    return absl::OkStatus();
  }

 private:
  sqlite3_stmt* stmt_;
  int rc_ = SQLITE_OK;
  int next_ = 1;
};

std::string ColumnText(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
}

constexpr const char* kEventColumns =
    "seq, time_us, actor, type, subject, reason, details_json, prev_hash, hash";

StoredEvent ReadEvent(sqlite3_stmt* stmt) {
  StoredEvent event;
  event.seq = sqlite3_column_int64(stmt, 0);
  event.time_us = sqlite3_column_int64(stmt, 1);
  event.actor = ColumnText(stmt, 2);
  event.type = ColumnText(stmt, 3);
  event.subject = ColumnText(stmt, 4);
  event.reason = ColumnText(stmt, 5);
  event.details_json = ColumnText(stmt, 6);
  event.prev_hash = ColumnText(stmt, 7);
  event.hash = ColumnText(stmt, 8);
  return event;
}

}  // namespace

class SqliteStore::Impl {
 public:
  static absl::StatusOr<std::unique_ptr<Impl>> Open(const std::string& path,
                                                    const SqliteStoreOptions& options);
  explicit Impl(std::string path) : path_(std::move(path)) {}
  ~Impl();

  absl::StatusOr<int64_t> Commit(StoreBatch batch);
  absl::StatusOr<std::vector<StoredRecord>> Load(const std::string& kind);
  // The rows (id, value) a bound Load or List statement steps through, as `kind` records.
  static absl::StatusOr<std::vector<StoredRecord>> Rows(StmtUse& use, const std::string& kind,
                                                        const std::string& what);
  absl::StatusOr<std::optional<StoredRecord>> Get(const std::string& kind, const std::string& id);
  absl::StatusOr<std::vector<StoredRecord>> List(const std::string& kind,
                                                 const std::string& after_id, int64_t limit);
  absl::StatusOr<std::optional<std::string>> LastId(const std::string& kind);
  absl::StatusOr<std::vector<std::string>> Kinds();
  absl::StatusOr<std::vector<StoredEvent>> Events(int64_t after_seq, int64_t limit);
  absl::Status VerifyEventChain();
  int64_t transactions() const { return transactions_.load(std::memory_order_relaxed); }

 private:
  struct Pending {
    StoreBatch batch;
    std::promise<absl::StatusOr<int64_t>> done;
  };

  absl::Status OpenWriter(const SqliteStoreOptions& options);
  absl::Status OpenReader(const SqliteStoreOptions& options);
  void RunCommitter();
  absl::Status ApplyGroup(const std::vector<Pending>& group, std::vector<int64_t>& results);
  absl::Status ApplyBatch(const StoreBatch& batch, int64_t& seq, std::string& hash);
  absl::Status ReadTail(int64_t& seq, std::string& hash);
  void RollbackIfOpen();

  const std::string path_;

  // The write connection: set up by Open, then used by one thread at a time, the one that set
  // committing_ (the committer thread, or a caller of Commit that found nothing queued and no
  // transaction on its way), which also owns the chain tail. `tail_stale_` makes the next
  // transaction re-read the tail from the file after a failed one (a failed COMMIT may still have
  // reached the disk).
  DbPtr writer_;
  StmtPtr begin_, commit_, rollback_, put_, delete_, append_, tail_;
  int64_t last_seq_ = 0;
  std::string last_hash_;
  bool tail_stale_ = false;
  std::atomic<int64_t> transactions_{0};

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::vector<Pending> queue_;  // guarded by queue_mu_
  bool stopping_ = false;       // guarded by queue_mu_
  bool committing_ = false;     // guarded by queue_mu_: a thread holds the write connection
  std::thread committer_;

  std::mutex reader_mu_;  // guards the read connection and its statements
  DbPtr reader_;
  StmtPtr load_, get_, list_, last_, kinds_, events_, chain_;
};

absl::StatusOr<std::unique_ptr<SqliteStore::Impl>> SqliteStore::Impl::Open(
    const std::string& path, const SqliteStoreOptions& options) {
  auto impl = std::make_unique<Impl>(path);
  if (absl::Status status = impl->OpenWriter(options); !status.ok()) return status;
  if (absl::Status status = impl->OpenReader(options); !status.ok()) return status;
  if (absl::Status status = impl->ReadTail(impl->last_seq_, impl->last_hash_); !status.ok()) {
    return status;
  }
  impl->committer_ = std::thread([raw = impl.get()] { raw->RunCommitter(); });
  return impl;
}

absl::Status SqliteStore::Impl::OpenWriter(const SqliteStoreOptions& options) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path_.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  writer_.reset(raw);
  if (rc != SQLITE_OK) return SqliteError(raw, rc, absl::StrCat("cannot open ", path_));
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);

  {
    absl::StatusOr<StmtPtr> wal = Prepare(raw, "PRAGMA journal_mode=WAL", path_);
    if (!wal.ok()) return wal.status();
    StmtUse use(wal->get());
    const int step = sqlite3_step(use.get());
    if (step != SQLITE_ROW) {
      return SqliteError(raw, step, absl::StrCat("cannot enable WAL on ", path_));
    }
    const std::string mode = ColumnText(use.get(), 0);
    if (mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("sqlite: cannot enable WAL on ", path_, ": journal mode stays ", mode));
    }
  }
  if (absl::Status status = Exec(raw, "PRAGMA synchronous=FULL",
                                 absl::StrCat("cannot set synchronous=FULL on ", path_));
      !status.ok()) {
    return status;
  }
  if (absl::Status status = Exec(raw,
                                 "CREATE TABLE IF NOT EXISTS records("
                                 "  kind TEXT NOT NULL, id TEXT NOT NULL, json TEXT NOT NULL,"
                                 "  PRIMARY KEY (kind, id)) WITHOUT ROWID;"
                                 "CREATE TABLE IF NOT EXISTS events("
                                 "  seq INTEGER PRIMARY KEY, time_us INTEGER NOT NULL,"
                                 "  actor TEXT NOT NULL, type TEXT NOT NULL,"
                                 "  subject TEXT NOT NULL, reason TEXT NOT NULL,"
                                 "  details_json TEXT NOT NULL, prev_hash TEXT NOT NULL,"
                                 "  hash TEXT NOT NULL);",
                                 absl::StrCat("cannot create the schema in ", path_));
      !status.ok()) {
    return status;
  }

  const std::string append_sql = absl::StrCat("INSERT INTO events (", kEventColumns,
                                              ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  const std::pair<StmtPtr*, const char*> statements[] = {
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&put_, "INSERT OR REPLACE INTO records (kind, id, json) VALUES (?1, ?2, ?3)"},
      {&delete_, "DELETE FROM records WHERE kind = ?1 AND id = ?2"},
      {&append_, append_sql.c_str()},
      {&tail_, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"},
  };
  for (const auto& [stmt, sql] : statements) {
    absl::StatusOr<StmtPtr> prepared = Prepare(raw, sql, path_);
    if (!prepared.ok()) return prepared.status();
    *stmt = *std::move(prepared);
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Impl::OpenReader(const SqliteStoreOptions& options) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  reader_.reset(raw);
  if (rc != SQLITE_OK) {
    return SqliteError(raw, rc, absl::StrCat("cannot open ", path_, " for reading"));
  }
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  if (absl::Status status =
          Exec(raw, "PRAGMA query_only=ON", absl::StrCat("cannot make a reader on ", path_));
      !status.ok()) {
    return status;
  }
  const std::string events_sql =
      absl::StrCat("SELECT ", kEventColumns, " FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2");
  const std::string chain_sql = absl::StrCat("SELECT ", kEventColumns, " FROM events ORDER BY seq");
  const std::pair<StmtPtr*, const char*> statements[] = {
      {&load_, "SELECT id, json FROM records WHERE kind = ?1 ORDER BY id"},
      {&get_, "SELECT json FROM records WHERE kind = ?1 AND id = ?2"},
      {&list_, "SELECT id, json FROM records WHERE kind = ?1 AND id > ?2 ORDER BY id LIMIT ?3"},
      {&last_, "SELECT id FROM records WHERE kind = ?1 ORDER BY id DESC LIMIT 1"},
      {&kinds_, "SELECT DISTINCT kind FROM records ORDER BY kind"},
      {&events_, events_sql.c_str()},
      {&chain_, chain_sql.c_str()},
  };
  for (const auto& [stmt, sql] : statements) {
    absl::StatusOr<StmtPtr> prepared = Prepare(raw, sql, path_);
    if (!prepared.ok()) return prepared.status();
    *stmt = *std::move(prepared);
  }
  return absl::OkStatus();
}

SqliteStore::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
}

absl::StatusOr<int64_t> SqliteStore::Impl::Commit(StoreBatch batch) {
  std::future<absl::StatusOr<int64_t>> done;
  {
    std::unique_lock<std::mutex> lock(queue_mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(absl::StrCat("sqlite: ", path_, " is closing"));
    }
    if (!committing_ && queue_.empty()) {
      // Nothing queued and no transaction on its way: the caller commits on its own thread.
      // Handing the batch to the committer and the result back cost two thread wake-ups per
      // transaction, each a wait for a core when the machine is busy. Batches that come
      // meanwhile queue for the committer, behind this one.
      committing_ = true;
      lock.unlock();
      std::vector<Pending> group(1);
      group[0].batch = std::move(batch);
      std::vector<int64_t> results;
      const absl::Status status = ApplyGroup(group, results);
      lock.lock();
      committing_ = false;
      lock.unlock();
      queue_cv_.notify_one();
      if (!status.ok()) return status;
      return results[0];
    }
    Pending& pending = queue_.emplace_back();
    pending.batch = std::move(batch);
    done = pending.done.get_future();
  }
  queue_cv_.notify_one();
  return done.get();
}

void SqliteStore::Impl::RunCommitter() {
  std::vector<Pending> group;
  std::vector<int64_t> results;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return !committing_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and every queued batch is answered
      group.swap(queue_);
      committing_ = true;
    }
    const absl::Status status = ApplyGroup(group, results);
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      committing_ = false;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      if (status.ok()) {
        group[i].done.set_value(results[i]);
      } else {
        group[i].done.set_value(status);
      }
    }
    group.clear();
  }
}

absl::Status SqliteStore::Impl::ReadTail(int64_t& seq, std::string& hash) {
  StmtUse use(tail_.get());
  const int rc = sqlite3_step(use.get());
  if (rc == SQLITE_ROW) {
    seq = sqlite3_column_int64(use.get(), 0);
    hash = ColumnText(use.get(), 1);
    return absl::OkStatus();
  }
  if (rc == SQLITE_DONE) {
    seq = 0;
    hash = GenesisHash();
    return absl::OkStatus();
  }
  return SqliteError(use.db(), rc, absl::StrCat("cannot read the last event of ", path_));
}

void SqliteStore::Impl::RollbackIfOpen() {
  if (sqlite3_get_autocommit(writer_.get()) == 0) {
    StmtUse use(rollback_.get());
    // A failed ROLLBACK leaves SQLite to roll back on the next BEGIN or on close; the caller
    // already reports the error that led here.
    (void)use.Run("ROLLBACK");
  }
}

absl::Status SqliteStore::Impl::ApplyGroup(const std::vector<Pending>& group,
                                           std::vector<int64_t>& results) {
  results.assign(group.size(), last_seq_);
  const bool writes = std::any_of(group.begin(), group.end(),
                                  [](const Pending& pending) { return !pending.batch.empty(); });
  if (!writes && !tail_stale_) return absl::OkStatus();

  const std::string where = absl::StrCat("commit to ", path_, " failed");
  {
    StmtUse use(begin_.get());
    if (absl::Status status = use.Run(absl::StrCat(where, " at BEGIN IMMEDIATE")); !status.ok()) {
      RollbackIfOpen();
      return status;
    }
  }
  int64_t seq = last_seq_;
  std::string hash = last_hash_;
  absl::Status status;
  if (tail_stale_) status = ReadTail(seq, hash);
  for (size_t i = 0; status.ok() && i < group.size(); ++i) {
    status = ApplyBatch(group[i].batch, seq, hash);
    results[i] = seq;
  }
  if (status.ok()) {
    StmtUse use(commit_.get());
    status = use.Run(absl::StrCat(where, " at COMMIT"));
  }
  if (!status.ok()) {
    RollbackIfOpen();
    tail_stale_ = true;
    return status;
  }
  last_seq_ = seq;
  last_hash_ = std::move(hash);
  tail_stale_ = false;
  transactions_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status SqliteStore::Impl::ApplyBatch(const StoreBatch& batch, int64_t& seq,
                                           std::string& hash) {
  for (const StoredRecord& record : batch.puts) {
    StmtUse use(put_.get());
    use.Text(record.kind).Text(record.id).Text(record.json);
    if (absl::Status status = use.Run(absl::StrCat("commit to ", path_, " failed writing record ",
                                                   record.kind, "/", record.id));
        !status.ok()) {
      return status;
    }
  }
  for (const auto& [kind, id] : batch.deletes) {
    StmtUse use(delete_.get());
    use.Text(kind).Text(id);
    if (absl::Status status =
            use.Run(absl::StrCat("commit to ", path_, " failed deleting record ", kind, "/", id));
        !status.ok()) {
      return status;
    }
  }
  for (StoredEvent event : batch.events) {
    event.seq = seq + 1;
    event.prev_hash = hash;
    absl::StatusOr<std::string> event_hash = EventHash(event, event.prev_hash);
    if (!event_hash.ok()) return event_hash.status();
    event.hash = *std::move(event_hash);
    StmtUse use(append_.get());
    use.Int(event.seq)
        .Int(event.time_us)
        .Text(event.actor)
        .Text(event.type)
        .Text(event.subject)
        .Text(event.reason)
        .Text(event.details_json)
        .Text(event.prev_hash)
        .Text(event.hash);
    if (absl::Status status = use.Run(absl::StrCat("commit to ", path_, " failed appending event ",
                                                   event.seq, " (", event.type, ")"));
        !status.ok()) {
      return status;
    }
    seq = event.seq;
    hash = std::move(event.hash);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredRecord>> SqliteStore::Impl::Rows(StmtUse& use,
                                                                  const std::string& kind,
                                                                  const std::string& what) {
  std::vector<StoredRecord> records;
  for (;;) {
    const int rc = sqlite3_step(use.get());
    if (rc == SQLITE_DONE) return records;
    if (rc != SQLITE_ROW) return SqliteError(use.db(), rc, what);
    records.push_back({kind, ColumnText(use.get(), 0), ColumnText(use.get(), 1)});
  }
}

absl::StatusOr<std::vector<StoredRecord>> SqliteStore::Impl::Load(const std::string& kind) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(load_.get());
  use.Text(kind);
  const std::string what = absl::StrCat("cannot load ", kind, " records from ", path_);
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what);
  return Rows(use, kind, what);
}

absl::StatusOr<std::optional<StoredRecord>> SqliteStore::Impl::Get(const std::string& kind,
                                                                   const std::string& id) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(get_.get());
  use.Text(kind).Text(id);
  const auto what = [&] { return absl::StrCat("cannot get ", kind, "/", id, " from ", path_); };
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what());
  const int rc = sqlite3_step(use.get());
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return SqliteError(use.db(), rc, what());
  return StoredRecord{kind, id, ColumnText(use.get(), 0)};
}

absl::StatusOr<std::vector<StoredRecord>> SqliteStore::Impl::List(const std::string& kind,
                                                                  const std::string& after_id,
                                                                  int64_t limit) {
  if (limit < 0) return absl::InvalidArgumentError(absl::StrCat("list: negative limit ", limit));
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(list_.get());
  use.Text(kind).Text(after_id).Int(limit);
  const std::string what = absl::StrCat("cannot list ", kind, " records from ", path_);
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what);
  return Rows(use, kind, what);
}

absl::StatusOr<std::optional<std::string>> SqliteStore::Impl::LastId(const std::string& kind) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(last_.get());
  use.Text(kind);
  const std::string what = absl::StrCat("cannot read the last ", kind, " id from ", path_);
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what);
  const int rc = sqlite3_step(use.get());
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return SqliteError(use.db(), rc, what);
  return ColumnText(use.get(), 0);
}

absl::StatusOr<std::vector<std::string>> SqliteStore::Impl::Kinds() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(kinds_.get());
  const std::string what = absl::StrCat("cannot list the record kinds of ", path_);
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what);
  std::vector<std::string> kinds;
  int rc;
  while ((rc = sqlite3_step(use.get())) == SQLITE_ROW) kinds.push_back(ColumnText(use.get(), 0));
  if (rc != SQLITE_DONE) return SqliteError(use.db(), rc, what);
  return kinds;
}

absl::StatusOr<std::vector<StoredEvent>> SqliteStore::Impl::Events(int64_t after_seq,
                                                                   int64_t limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("events: negative limit ", limit));
  }
  std::vector<StoredEvent> events;
  if (limit == 0) return events;
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(events_.get());
  use.Int(after_seq).Int(limit);
  const std::string what = absl::StrCat("cannot read events after ", after_seq, " from ", path_);
  if (use.rc() != SQLITE_OK) return SqliteError(use.db(), use.rc(), what);
  for (;;) {
    const int rc = sqlite3_step(use.get());
    if (rc == SQLITE_DONE) return events;
    if (rc != SQLITE_ROW) return SqliteError(use.db(), rc, what);
    events.push_back(ReadEvent(use.get()));
  }
}

absl::Status SqliteStore::Impl::VerifyEventChain() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  StmtUse use(chain_.get());
  int64_t expected_seq = 1;
  std::string prev_hash = GenesisHash();
  for (;;) {
    const int rc = sqlite3_step(use.get());
    if (rc == SQLITE_DONE) return absl::OkStatus();
    if (rc != SQLITE_ROW) {
      return SqliteError(use.db(), rc, absl::StrCat("cannot read the event chain of ", path_));
    }
    const StoredEvent event = ReadEvent(use.get());
    if (absl::Status s = CheckChainLink(event, expected_seq, prev_hash, path_); !s.ok()) return s;
    ++expected_seq;
    prev_hash = event.hash;
  }
}

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SqliteStore::~SqliteStore() = default;

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               const SqliteStoreOptions& options) {
  absl::StatusOr<std::unique_ptr<Impl>> impl = Impl::Open(path, options);
  if (!impl.ok()) return impl.status();
  return absl::WrapUnique(new SqliteStore(*std::move(impl)));
}

absl::StatusOr<int64_t> SqliteStore::Commit(StoreBatch batch) {
  return impl_->Commit(std::move(batch));
}
absl::StatusOr<std::vector<StoredRecord>> SqliteStore::Load(const std::string& kind) {
  return impl_->Load(kind);
}
absl::StatusOr<std::optional<StoredRecord>> SqliteStore::Get(const std::string& kind,
                                                             const std::string& id) {
  return impl_->Get(kind, id);
}
absl::StatusOr<std::vector<StoredRecord>> SqliteStore::List(const std::string& kind,
                                                            const std::string& after_id,
                                                            int64_t limit) {
  return impl_->List(kind, after_id, limit);
}
absl::StatusOr<std::optional<std::string>> SqliteStore::LastId(const std::string& kind) {
  return impl_->LastId(kind);
}
absl::StatusOr<std::vector<std::string>> SqliteStore::Kinds() { return impl_->Kinds(); }
absl::StatusOr<std::vector<StoredEvent>> SqliteStore::Events(int64_t after_seq, int64_t limit) {
  return impl_->Events(after_seq, limit);
}
absl::Status SqliteStore::VerifyEventChain() { return impl_->VerifyEventChain(); }
int64_t SqliteStore::transactions() const { return impl_->transactions(); }

absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path) {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(*std::move(store));
}

}  // namespace carve
