#ifndef CARVE_ADAPTERS_STORE_EVENT_HASH_H_
#define CARVE_ADAPTERS_STORE_EVENT_HASH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ports/store.h"

namespace carve {

// An event's hash as every store computes it (ports/store.h): hex(SHA-256(prev_hash "\n" seq
// "\n" time_us "\n" actor "\n" type "\n" subject "\n" reason "\n" details_json)).
absl::StatusOr<std::string> EventHash(const StoredEvent& event, const std::string& prev_hash);
// prev_hash of the first event: 64 '0's.
std::string GenesisHash();
// Checks `event`, read back from `store` (named in the error), as the chain's next link: seq
// `expected_seq`, linked to `prev_hash`, its hash that of its fields. DataLoss naming the seq.
absl::Status CheckChainLink(const StoredEvent& event, int64_t expected_seq,
                            const std::string& prev_hash, const std::string& store);

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_EVENT_HASH_H_
