#ifndef CARVE_ADAPTERS_STORE_EVENT_HASH_H_
#define CARVE_ADAPTERS_STORE_EVENT_HASH_H_

#include <string>

#include "absl/status/statusor.h"
#include "ports/store.h"

namespace carve {

// An event's hash as every store computes it (ports/store.h): hex(SHA-256(prev_hash "\n" seq
// "\n" time_us "\n" actor "\n" type "\n" subject "\n" reason "\n" details_json)).
absl::StatusOr<std::string> EventHash(const StoredEvent& event, const std::string& prev_hash);
// prev_hash of the first event: 64 '0's.
std::string GenesisHash();

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_EVENT_HASH_H_
