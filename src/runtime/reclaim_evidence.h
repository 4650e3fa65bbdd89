#ifndef CARVE_RUNTIME_RECLAIM_EVIDENCE_H_
#define CARVE_RUNTIME_RECLAIM_EVIDENCE_H_

// The server's side of a reclaim: the agent runs the checks (Agent::Reclaim, reclaim_check.h)
// and the server holds its record to them. A record that says "verified" must carry, as passed
// (or skipped, with why), every check the replica's placement calls for: `processes-gone` when
// a process was started, and `device-processes` and `device-memory` for each GPU it held. A
// "verified" record without them, or with a failed check, is kept as "unverified", naming what
// is missing, and every GPU of the replica gets a failed `reclaim-evidence` check, which
// quarantines it: an agent with a bug in its checks, or one that lies, cannot hand a GPU back
// unchecked.

#include <cstdint>

#include "nlohmann/json.hpp"
#include "runtime/records.h"

namespace carve {

// `reclaim` as sent by the node for replica `rep`, audited at `now`.
nlohmann::json AuditReclaim(const ReplicaRecord& rep, nlohmann::json reclaim, int64_t now);

}  // namespace carve

#endif  // CARVE_RUNTIME_RECLAIM_EVIDENCE_H_
