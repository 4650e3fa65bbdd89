#include "runtime/poc_reports.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/poc/poc.h"

namespace carve {

using json = nlohmann::json;

namespace {

json Claim(const std::string& name, bool ok, const std::string& expected,
           const std::string& observed) {
  return {{"name", name}, {"ok", ok}, {"expected", expected}, {"observed", observed}};
}

json HeadClaim(const std::string& name, const poc::ChainHead& head, const PocLookups& look) {
  const std::string expected = absl::StrCat("event ", head.seq, " with hash ", head.hash);
  if (head.seq == 0) return Claim(name, head.hash.empty(), "an empty chain", expected);
  auto hash = look.event_hash(head.seq);
  if (!hash.ok()) return Claim(name, false, expected, std::string(hash.status().message()));
  return Claim(name, *hash == head.hash, expected,
               absl::StrCat("event ", head.seq, " with hash ", *hash));
}

// The kit's own claims, as sent: [{name, ok, expected?, observed?}].
absl::Status CheckVerify(const json& verify) {
  if (!verify.is_array()) return absl::InvalidArgumentError("verify: must be a list of claims");
  for (size_t i = 0; i < verify.size(); ++i) {
    const json& c = verify[i];
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("ok") ||
        !c["ok"].is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat("verify[", i, "]: a claim is {name: string, ok: boolean, ...}"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> CheckPocReport(const json& body, const PocLookups& look) {
  if (!body.is_object()) return absl::InvalidArgumentError("a report is {meta, records, verify}");
  const json meta = body.value("meta", json());
  if (!meta.is_object()) return absl::InvalidArgumentError("meta: must be an object");
  // What the summary and the report page read (poc_report.cc): a wrong type would fail them later.
  for (const char* key : {"server", "server_version", "owner", "submitted_by", "suite", "probe",
                          "profile_since", "profile_error"}) {
    if (meta.contains(key) && !meta[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("meta.", key, ": must be a string"));
    }
  }
  for (const char* key : {"tolerance", "seconds", "job_memory_mib", "written_us"}) {
    if (meta.contains(key) && !meta[key].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("meta.", key, ": must be a number"));
    }
  }
  if (meta.contains("profile") && !meta["profile"].is_object()) {
    return absl::InvalidArgumentError("meta.profile: must be an object");
  }
  const json records = body.value("records", json());
  if (!records.is_array() || records.empty()) {
    return absl::InvalidArgumentError("records: must be a non-empty list of acceptance records");
  }
  if (records.size() > kMaxPocRecords) {
    return absl::InvalidArgumentError(
        absl::StrCat("records: ", records.size(), " records; at most ", kMaxPocRecords));
  }
  json verify = body.value("verify", json::array());
  if (absl::Status st = CheckVerify(verify); !st.ok()) return st;
  json counts = json::object();
  json checks = json::array();
  std::set<std::string> ids;
  for (size_t i = 0; i < records.size(); ++i) {
    auto r = poc::RecordFromJson(records[i]);
    if (!r.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("records[", i, "]: ", r.status().message()));
    }
    if (!ids.insert(r->id).second) {
      return absl::InvalidArgumentError(absl::StrCat("records[", i, "]: test ", r->id, " twice"));
    }
    const std::string verdict = poc::VerdictName(r->verdict);
    counts[verdict] = counts.value(verdict, 0) + 1;
    for (int64_t job : r->jobs) {
      const bool here = look.job_exists(job);
      checks.push_back(Claim(absl::StrCat(r->id, ": job ", job, " exists on this server"), here,
                             "the job", here ? "found" : "no such job"));
    }
    checks.push_back(HeadClaim(r->id + ": the chain head before it", r->chain_start, look));
    checks.push_back(HeadClaim(r->id + ": the chain head after it", r->chain_end, look));
  }
  return json{{"meta", meta},
              {"records", records},
              {"verify", verify},
              {"counts", counts},
              {"sha256", Sha256Hex(records.dump())},
              {"server_checks", checks}};
}

json PocReportSummary(const json& kept) {
  auto held = [](const json& claims) {
    int ok = 0;
    for (const json& c : claims) ok += c.value("ok", false) ? 1 : 0;
    return json{{"held", ok}, {"of", claims.size()}};
  };
  const json meta = kept.value("meta", json::object());
  json tests = json::array();
  for (const json& r : kept.value("records", json::array())) {
    tests.push_back({{"id", r.value("id", "")},
                     {"title", r.value("title", "")},
                     {"verdict", r.value("verdict", "")},
                     {"reason", r.value("verdict_reason", "")}});
  }
  return {{"id", kept.value("id", int64_t{0})},
          {"kept_us", kept.value("kept_us", int64_t{0})},
          {"kept_by", kept.value("kept_by", "")},
          {"suite", meta.value("suite", "")},
          {"owner", meta.value("owner", "")},
          {"server_version", meta.value("server_version", "")},
          {"counts", kept.value("counts", json::object())},
          {"sha256", kept.value("sha256", "")},
          {"claims", held(kept.value("verify", json::array()))},
          {"server_checks", held(kept.value("server_checks", json::array()))},
          {"tests", tests}};
}

}  // namespace carve
