// Reclaims that never report: a replica whose reclaim evidence does not come within the reclaim
// timeout gets an `unverified` record saying why, its devices are quarantined until an admin
// clears them, and its job ends (docs/reliability.md).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

std::string Millis(int64_t us) {
  int64_t ms = us / 1000;
  if (ms >= 60'000 && ms % 60'000 == 0) return absl::StrCat(ms / 60'000, "m");
  if (ms >= 1000 && ms % 1000 == 0) return absl::StrCat(ms / 1000, "s");
  return absl::StrCat(ms, "ms");
}

// Still owes its reclaim record: ended (or being replaced) and no evidence yet.
bool AwaitsEvidence(const ReplicaRecord& rep) {
  return rep.state == ReplicaState::kExited && rep.reclaim.is_null();
}

std::string Devices(const ReplicaRecord& rep) {
  std::vector<int> devices;
  for (const GrantRecord& g : rep.grants) devices.push_back(g.device);
  return devices.empty() ? "no devices" : absl::StrCat("devices ", absl::StrJoin(devices, ", "));
}

// The record a silent replica gets instead of the agent's: every device it held failed the
// `reclaim-report` check, so QuarantineFailedChecks takes them out of the pool.
json TimedOutReclaim(const ReplicaRecord& rep, const std::string& why, int64_t now) {
  json checks = json::array();
  json quarantine = json::array();
  for (const GrantRecord& g : rep.grants) {
    if (std::find(quarantine.begin(), quarantine.end(), json(g.device)) != quarantine.end()) {
      continue;
    }
    quarantine.push_back(g.device);
    checks.push_back({{"name", "reclaim-report"},
                      {"ok", false},
                      {"device", g.device},
                      {"observed", why},
                      {"time_us", now}});
  }
  return {{"status", "unverified"}, {"timed_out", true},        {"reason", why},
          {"checks", checks},       {"quarantine", quarantine}, {"time_us", now}};
}

}  // namespace

void ControlPlane::ReclaimTimeouts(int64_t now, StoreBatch& batch) {
  int64_t timeout = options_.reclaim_timeout_us;
  for (JobRecord* placed : jobs_.Placed()) {
    JobRecord& job = *placed;
    const int64_t id = job.id;
    if (IsFinal(job.state)) continue;
    bool reclaiming = job.state == JobState::kReclaiming;
    json silent = json::array();
    for (size_t r = 0; r < job.replicas.size(); ++r) {
      ReplicaRecord& rep = job.replicas[r];
      // A reclaiming job waits for every replica; a running service for the ones it replaces.
      if (!AwaitsEvidence(rep) || (!reclaiming && rep.retire.empty())) continue;
      int64_t since = std::max({reclaiming ? job.ended_us : rep.ended_us, loaded_us_});
      if (now - since < timeout) continue;
      std::string why =
          absl::StrCat("no reclaim evidence from node ", rep.node, " within ", Millis(timeout));
      rep.reclaim = TimedOutReclaim(rep, why, now);
      silent.push_back({{"replica", r}, {"node", rep.node}, {"reason", why}});
      if (!rep.retire.empty()) Retire(job, static_cast<int>(r), batch);
    }
    if (silent.empty()) continue;
    Event(batch, "scheduler", "job.reclaim-timed-out", absl::StrCat("job/", id),
          silent[0]["reason"].get<std::string>() + "; its devices are quarantined",
          {{"replicas", silent}, {"timeout_ms", timeout / 1000}});
    if (reclaiming) FinishIfDone(job, batch);
    Touch(job, batch);
  }
}

std::string ControlPlane::PendingReclaims(const JobRecord& job, int64_t now) const {
  std::vector<std::string> waiting;
  for (size_t r = 0; r < job.replicas.size(); ++r) {
    const ReplicaRecord& rep = job.replicas[r];
    if (!rep.retire.empty() || !AwaitsEvidence(rep)) continue;
    waiting.push_back(
        absl::StrCat("replica ", r, " from node ", rep.node, " (", Devices(rep), ")"));
  }
  int64_t since = std::max(job.ended_us, loaded_us_);
  return absl::StrCat(
      absl::StrJoin(waiting, ", "), ", for ", Millis(std::max<int64_t>(now - since, 0)),
      " so far; without it within the reclaim timeout (", Millis(options_.reclaim_timeout_us),
      ") those devices are quarantined and the job ends");
}

std::string ControlPlane::UnverifiedNote(const JobRecord& job) {
  for (const ReplicaRecord& rep : job.replicas) {
    if (rep.retire.empty() && rep.reclaim.value("timed_out", false)) {
      return "; reclaim unverified: " + rep.reclaim.value("reason", "") + "; devices quarantined";
    }
  }
  return "; reclaim failed, devices quarantined";
}

}  // namespace carve
