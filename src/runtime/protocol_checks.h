#ifndef CARVE_RUNTIME_PROTOCOL_CHECKS_H_
#define CARVE_RUNTIME_PROTOCOL_CHECKS_H_

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace carve {

// A heartbeat body has the shape the agent protocol uses (docs/platform.md): every field the
// control plane reads has its JSON type. Checked before any state changes, so a malformed body
// (found by fuzz/api_fuzz.cc) is a clear 400 instead of an exception half-way through a change.
absl::Status CheckHeartbeatBody(const nlohmann::json& body);

}  // namespace carve

#endif  // CARVE_RUNTIME_PROTOCOL_CHECKS_H_
