#ifndef CARVE_RUNTIME_AUDIT_LOG_H_
#define CARVE_RUNTIME_AUDIT_LOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"
#include "runtime/tenancy.h"

namespace carve {

// The tenant an event is about (its details' tenant); "" for platform events (nodes, devices,
// queues).
std::string EventTenant(const std::string& type, const nlohmann::json& details);

// The reading side of the event log (reporting): events as the API lists them, audit records
// exported per tenant and time range, and the hash chain verified link by link. It reads only
// the store, never the controller's memory, so no reader waits for a scheduling cycle; before
// each read it waits for the journal to commit what was changed before the call (`barrier`), so
// that a reader of the log sees whatever a reader of memory saw. Thread-safe.
class AuditLog {
 public:
  struct Query {
    std::string tenant;  // "": every tenant (admins only)
    int64_t since_us = 0;
    int64_t until_us = 0;  // 0: no end
  };

  // `store` outlives the log; `barrier` returns once every change made before it is committed.
  AuditLog(Store* store, std::function<void()> barrier)
      : store_(store), barrier_(std::move(barrier)) {}

  // Up to `limit` events with seq > `after`, oldest first (the caller filters what `who` sees).
  absl::StatusOr<nlohmann::json> Events(int64_t after, int64_t limit) const;
  // One event; NotFound when there is none.
  absl::StatusOr<nlohmann::json> Event(int64_t seq) const;
  // Up to `limit` audit records with seq > `after` that `who` may export; `*next` gets the seq
  // to continue after (0 when the log is done).
  absl::StatusOr<nlohmann::json> AuditPage(const Query& query, const Principal& who, int64_t after,
                                           int64_t limit, int64_t* next) const;
  // Checks the whole hash chain: {ok, events, head_seq, head_hash} or the first broken link.
  absl::StatusOr<nlohmann::json> Verify() const;

 private:
  Store* store_;
  std::function<void()> barrier_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_AUDIT_LOG_H_
