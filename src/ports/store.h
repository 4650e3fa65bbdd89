#ifndef CARVE_PORTS_STORE_H_
#define CARVE_PORTS_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace carve {

// One stored document: `kind` is a table-like namespace ("job" for live jobs, "job.done" for
// finished ones, "usage", "node", "tenant", "project", "queue", "token", "idempotency",
// "counter"), `id` is unique within its kind, `json` the document.
struct StoredRecord {
  std::string kind;
  std::string id;
  std::string json;
};

// One entry of the append-only event log. The store assigns `seq` (1, 2, ...), `prev_hash` and
// `hash` at commit: hash = hex(SHA-256(prev_hash "\n" seq "\n" time_us "\n" actor "\n" type "\n"
// subject "\n" reason "\n" details_json)), prev_hash of the first event is 64 '0's. Any change to
// a stored event breaks the chain from there on.
struct StoredEvent {
  int64_t seq = 0;
  int64_t time_us = 0;  // microseconds since the Unix epoch
  std::string actor;    // "user:alice", "scheduler", "agent:node-1"
  std::string type;     // "job.submitted", "job.scheduled", "node.registered", ...
  std::string subject;  // "job/17", "node/gpu-a"
  std::string reason;   // human-readable why
  std::string details_json = "{}";
  std::string prev_hash;
  std::string hash;
};

// What one commit changes, atomically: records written (insert or replace by kind+id), records
// deleted, and events appended in order.
struct StoreBatch {
  std::vector<StoredRecord> puts;
  std::vector<std::pair<std::string, std::string>> deletes;  // (kind, id)
  std::vector<StoredEvent> events;  // seq/prev_hash/hash are filled in by the store
  bool empty() const { return puts.empty() && deletes.empty() && events.empty(); }
};

// Durable state. Thread-safe. Commit returns only once the batch is on disk (fsync'd); batches
// from concurrent callers may share one transaction (group commit), and are applied in the order
// their Commit calls began. A process killed at any point loses no batch whose Commit returned OK
// and applies no batch partially.
class Store {
 public:
  virtual ~Store() = default;
  // Returns the seq of the batch's last event (or of the last event in the store if it had none).
  virtual absl::StatusOr<int64_t> Commit(StoreBatch batch) = 0;
  // Every record of `kind`, ordered by id (ids compare as strings).
  virtual absl::StatusOr<std::vector<StoredRecord>> Load(const std::string& kind) = 0;
  virtual absl::StatusOr<std::optional<StoredRecord>> Get(const std::string& kind,
                                                          const std::string& id) = 0;
  // Up to `limit` records of `kind` with id > `after_id`, ordered by id (a page: the next one
  // starts after the last id of this one).
  virtual absl::StatusOr<std::vector<StoredRecord>> List(const std::string& kind,
                                                         const std::string& after_id,
                                                         int64_t limit) = 0;
  // The greatest id of `kind` (ids compare as strings); nullopt when it has no record.
  virtual absl::StatusOr<std::optional<std::string>> LastId(const std::string& kind) = 0;
  // Every kind that holds a record, in byte order (what a whole-store copy must read).
  virtual absl::StatusOr<std::vector<std::string>> Kinds() = 0;
  // Events with seq > after_seq, in order, at most `limit`.
  virtual absl::StatusOr<std::vector<StoredEvent>> Events(int64_t after_seq, int64_t limit) = 0;
  // Recomputes every event's hash from its fields and its predecessor's hash; the error names
  // the first event whose hash or link does not match.
  virtual absl::Status VerifyEventChain() = 0;
};

// SQLite in WAL mode with synchronous=FULL; creates the file and schema when missing.
absl::StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace carve

#endif  // CARVE_PORTS_STORE_H_
