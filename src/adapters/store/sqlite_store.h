#ifndef CARVE_ADAPTERS_STORE_SQLITE_STORE_H_
#define CARVE_ADAPTERS_STORE_SQLITE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ports/store.h"

namespace carve {

struct SqliteStoreOptions {
  // How long a statement waits for a lock held by another connection (another process writing
  // the same file) before it fails with kUnavailable.
  int busy_timeout_ms = 5000;
};

// The Store port on one SQLite file (WAL, synchronous=FULL). A Commit that finds the write
// connection idle and nothing queued runs its transaction on the caller's thread; batches that
// come while one is on its way queue, and a committer thread applies all of them in one
// transaction (group commit). Reads go through a second connection behind a mutex. Thread-safe.
// See docs/store.md for the schema.
//
// Errors name the file and the step that failed. Codes: kUnavailable (locked, I/O error),
// kDataLoss (corrupt file, broken event chain), kFailedPrecondition (cannot open), kInternal.
class SqliteStore final : public Store {
 public:
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           const SqliteStoreOptions& options = {});
  // Waits for the batches already queued to be committed, then stops the committer.
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  absl::StatusOr<int64_t> Commit(StoreBatch batch) override;
  absl::StatusOr<std::vector<StoredRecord>> Load(const std::string& kind) override;
  absl::StatusOr<std::optional<StoredRecord>> Get(const std::string& kind,
                                                  const std::string& id) override;
  absl::StatusOr<std::vector<StoredRecord>> List(const std::string& kind,
                                                 const std::string& after_id,
                                                 int64_t limit) override;
  absl::StatusOr<std::optional<std::string>> LastId(const std::string& kind) override;
  absl::StatusOr<std::vector<std::string>> Kinds() override;
  absl::StatusOr<std::vector<StoredEvent>> Events(int64_t after_seq, int64_t limit) override;
  absl::Status VerifyEventChain() override;

  // Write transactions committed so far by this instance (one per group of batches).
  int64_t transactions() const;

 private:
  class Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_SQLITE_STORE_H_
