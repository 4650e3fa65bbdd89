#ifndef CARVE_RUNTIME_STORE_MIGRATE_H_
#define CARVE_RUNTIME_STORE_MIGRATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"

namespace carve {

// Whether `store` holds no record and no event (what an import or a migration writes into).
absl::Status CheckStoreEmpty(Store& store);

// `carve store migrate`: copies every record of every kind and the whole event log of `from`
// into `to`, which must be empty, `batch` records or events per commit. The events are appended
// in order with their own time, actor, type, subject, reason and details, so `to` numbers and
// hashes them exactly as `from` did: the copy fails (kDataLoss) unless every seq and the head hash
// come out the same and `to`'s chain verifies. `from`'s chain is verified first; nothing is
// copied when it does not. Nobody may write either store meanwhile (stop their servers).
// Returns {records: {kind: count}, events, head_hash}.
absl::StatusOr<nlohmann::json> MigrateStore(Store& from, Store& to, int64_t batch = 1000);

}  // namespace carve

#endif  // CARVE_RUNTIME_STORE_MIGRATE_H_
