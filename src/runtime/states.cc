#include "runtime/states.h"

#include <array>
#include <cstddef>

namespace carve {

namespace {

constexpr std::array<absl::string_view, 10> kJobStates = {
    "queued", "scheduled", "running",   "reclaiming", "succeeded",
    "failed", "cancelled", "timed-out", "lost",       "preempted"};
constexpr std::array<absl::string_view, 5> kReplicaStates = {"pending", "running", "exited",
                                                             "retired", "lost"};
constexpr std::array<absl::string_view, 3> kNodeRecordStates = {"ready", "not-ready", "dead"};
constexpr std::array<absl::string_view, 3> kProcessStates = {"running", "defunct", "gone"};
constexpr std::array<absl::string_view, 6> kRoles = {"admin",  "tenant-admin", "member",
                                                     "viewer", "agent",        "node"};
constexpr std::array<absl::string_view, 4> kRelayoutPhases = {"draining", "reconfiguring", "failed",
                                                              "done"};
static_assert(kRelayoutPhases.size() == static_cast<size_t>(RelayoutPhase::kDone) + 1);
static_assert(kRoles.size() == static_cast<size_t>(Role::kNode) + 1);
static_assert(kJobStates.size() == static_cast<size_t>(JobState::kPreempted) + 1);
static_assert(kReplicaStates.size() == static_cast<size_t>(ReplicaState::kLost) + 1);
static_assert(kNodeRecordStates.size() == static_cast<size_t>(NodeRecordState::kDead) + 1);
static_assert(kProcessStates.size() == static_cast<size_t>(ProcessState::kGone) + 1);

template <typename State, size_t N>
std::optional<State> Parse(const std::array<absl::string_view, N>& names, absl::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<State>(i);
  }
  return std::nullopt;
}

}  // namespace

absl::string_view Name(JobState state) { return kJobStates[static_cast<size_t>(state)]; }
absl::string_view Name(ReplicaState state) { return kReplicaStates[static_cast<size_t>(state)]; }
absl::string_view Name(NodeRecordState state) {
  return kNodeRecordStates[static_cast<size_t>(state)];
}
absl::string_view Name(ProcessState state) { return kProcessStates[static_cast<size_t>(state)]; }
absl::string_view Name(Role role) { return kRoles[static_cast<size_t>(role)]; }
absl::string_view Name(RelayoutPhase phase) { return kRelayoutPhases[static_cast<size_t>(phase)]; }

std::optional<JobState> ParseJobState(absl::string_view name) {
  return Parse<JobState>(kJobStates, name);
}
std::optional<ReplicaState> ParseReplicaState(absl::string_view name) {
  return Parse<ReplicaState>(kReplicaStates, name);
}
std::optional<NodeRecordState> ParseNodeRecordState(absl::string_view name) {
  return Parse<NodeRecordState>(kNodeRecordStates, name);
}
std::optional<ProcessState> ParseProcessState(absl::string_view name) {
  return Parse<ProcessState>(kProcessStates, name);
}
std::optional<Role> ParseRole(absl::string_view name) { return Parse<Role>(kRoles, name); }
std::optional<RelayoutPhase> ParseRelayoutPhase(absl::string_view name) {
  return Parse<RelayoutPhase>(kRelayoutPhases, name);
}

bool IsFinal(JobState state) {
  switch (state) {
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
    case JobState::kTimedOut:
    case JobState::kLost:
    case JobState::kPreempted:
      return true;
    case JobState::kQueued:
    case JobState::kScheduled:
    case JobState::kRunning:
    case JobState::kReclaiming:
      return false;
  }
  return false;
}

}  // namespace carve
