#include "runtime/reclaim_evidence.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace carve {

using json = nlohmann::json;

namespace {

enum class Evidence { kAbsent, kFailed, kPassed };

constexpr const char* kDeviceChecks[] = {"device-processes", "device-memory"};

// What `checks` say of check `name` on `device` (-1: a check of no device).
Evidence Of(const json& checks, const std::string& name, int device) {
  Evidence seen = Evidence::kAbsent;
  for (const json& c : checks) {
    if (!c.is_object() || c.value("name", "") != name) continue;
    const bool here = device < 0 ? !c.contains("device") : c.value("device", -1) == device;
    if (!here) continue;
    if (c.value("ok", false)) return Evidence::kPassed;
    seen = Evidence::kFailed;
  }
  return seen;
}

// Adds `what` to `missing` unless `checks` passed it.
void Require(const json& checks, const std::string& name, int device, const std::string& what,
             std::vector<std::string>& missing) {
  const Evidence e = Of(checks, name, device);
  if (e != Evidence::kPassed)
    missing.push_back(e == Evidence::kFailed ? what + " (it failed)" : what);
}

}  // namespace

json AuditReclaim(const ReplicaRecord& rep, json reclaim, int64_t now) {
  if (!reclaim.is_object() || reclaim.value("status", "") != "verified") return reclaim;
  const json checks = reclaim.value("checks", json::array());
  std::vector<std::string> missing;
  if (rep.pid > 0) Require(checks, "processes-gone", -1, "processes-gone", missing);
  std::set<int> devices;
  for (const GrantRecord& g : rep.grants) {
    if (g.device >= 0) devices.insert(g.device);
  }
  for (int d : devices) {
    for (const char* name : kDeviceChecks) {
      Require(checks, name, d, absl::StrCat(name, " on GPU ", d), missing);
    }
  }
  // Any other check that failed (a partition not destroyed, say) belies "verified" too.
  for (const json& c : checks) {
    const std::string name = c.is_object() ? c.value("name", "") : "";
    const bool required =
        name == "processes-gone" || name == kDeviceChecks[0] || name == kDeviceChecks[1];
    if (c.is_object() && !required && !c.value("ok", true))
      missing.push_back(name + " (it failed)");
  }
  if (missing.empty()) return reclaim;
  const std::string why =
      absl::StrCat("the node reported its reclaim verified without passed checks for: ",
                   absl::StrJoin(missing, "; "));
  reclaim["reported_status"] = "verified";
  reclaim["status"] = "unverified";
  reclaim["reason"] = why;
  json quarantine = json::array();
  for (int d : devices) {
    reclaim["checks"].push_back({{"name", "reclaim-evidence"},
                                 {"ok", false},
                                 {"device", d},
                                 {"observed", why},
                                 {"time_us", now}});
    quarantine.push_back(d);
  }
  reclaim["quarantine"] = quarantine;
  return reclaim;
}

}  // namespace carve
