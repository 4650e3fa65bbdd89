#ifndef CARVE_RUNTIME_STATES_H_
#define CARVE_RUNTIME_STATES_H_

// The states of the control plane's records (records.h), typed. Each has one name, the string
// the store, the REST API, events and metrics carry; Parse* takes exactly those names back and
// nothing else (nullopt), so a record with a state this server does not know is refused, never
// mapped to a guess.

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace carve {

// A job: queued -> scheduled -> running -> reclaiming -> succeeded | failed | cancelled |
// timed-out | lost | preempted (preempted with recovery policy none). `reclaiming` holds the job's
// devices until every replica's reclaim record is in.
enum class JobState : uint8_t {
  kQueued,
  kScheduled,
  kRunning,
  kReclaiming,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut,
  kLost,
  kPreempted,
};

// A replica: pending -> running -> exited; for a replaced service replica also retired (its
// reclaim is in) or lost (its node went silent; its devices stay fenced).
enum class ReplicaState : uint8_t { kPending, kRunning, kExited, kRetired, kLost };

// A node's record: ready, not-ready (silent past the node timeout) or dead (declared by an
// admin). Not the core's NodeState, which is the node as one scheduling cycle sees it.
enum class NodeRecordState : uint8_t { kReady, kNotReady, kDead };

// A device process no live replica explains (reclaim_check.h), as /proc shows it: running,
// defunct (a zombie the device still lists) or gone.
enum class ProcessState : uint8_t { kRunning, kDefunct, kGone };

// Who a credential is (tenancy.h, Principal): a person's role (admin, tenant-admin, member,
// viewer), the join token's (agent) or one node's credential (node).
enum class Role : uint8_t { kAdmin, kTenantAdmin, kMember, kViewer, kAgent, kNode };

// A planned MIG re-layout of one GPU (node_records.h, RelayoutRecord): draining (its jobs are moved
// off and reclaimed) -> reconfiguring (the agent applies the layout) -> done (verified; the record
// goes) or failed (kept, with why, until an admin asks again).
enum class RelayoutPhase : uint8_t { kDraining, kReconfiguring, kFailed, kDone };

absl::string_view Name(JobState state);
absl::string_view Name(ReplicaState state);
absl::string_view Name(NodeRecordState state);
absl::string_view Name(ProcessState state);
absl::string_view Name(Role role);
absl::string_view Name(RelayoutPhase phase);

std::optional<JobState> ParseJobState(absl::string_view name);
std::optional<ReplicaState> ParseReplicaState(absl::string_view name);
std::optional<NodeRecordState> ParseNodeRecordState(absl::string_view name);
std::optional<ProcessState> ParseProcessState(absl::string_view name);
std::optional<Role> ParseRole(absl::string_view name);
std::optional<RelayoutPhase> ParseRelayoutPhase(absl::string_view name);

// succeeded, failed, cancelled, timed-out, lost or preempted.
bool IsFinal(JobState state);

// No implicit conversions that would write the number: codecs write Name() and read through
// Parse* (nlohmann would store the enum's value; absl::StrCat, which this absl formats as an
// integer, takes Name() too).
void to_json(nlohmann::json& j, JobState state) = delete;
void to_json(nlohmann::json& j, ReplicaState state) = delete;
void to_json(nlohmann::json& j, NodeRecordState state) = delete;
void from_json(const nlohmann::json& j, JobState& state) = delete;
void from_json(const nlohmann::json& j, ReplicaState& state) = delete;
void from_json(const nlohmann::json& j, NodeRecordState& state) = delete;
void to_json(nlohmann::json& j, ProcessState state) = delete;
void from_json(const nlohmann::json& j, ProcessState& state) = delete;
void to_json(nlohmann::json& j, Role role) = delete;
void from_json(const nlohmann::json& j, Role& role) = delete;
void to_json(nlohmann::json& j, RelayoutPhase phase) = delete;
void from_json(const nlohmann::json& j, RelayoutPhase& phase) = delete;

}  // namespace carve

#endif  // CARVE_RUNTIME_STATES_H_
