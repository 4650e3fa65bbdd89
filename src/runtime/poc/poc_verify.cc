// `carve poc verify DIR`: a report's claims re-checked against the server that made them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_cluster.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

absl::StatusOr<std::vector<Record>> ReadRecords(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "records.jsonl").string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Record> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    auto r = RecordFromJson(j);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", n, ": ",
                       j.is_discarded() ? "not JSON" : std::string(r.status().message())));
    }
    out.push_back(*std::move(r));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no record"));
  return out;
}

// The suite meta.json names ("" when it is missing or unreadable).
std::string SuiteOf(const std::string& dir) {
  std::ifstream in((std::filesystem::path(dir) / "meta.json").string());
  json meta = json::parse(in, nullptr, false);
  return meta.is_object() ? meta.value("suite", "") : "";
}

// Every test of the suite once, and nothing else.
Check TestSet(const std::string& suite, const std::vector<Record>& records) {
  std::map<std::string, int> want;
  for (const Suite& s : Suites()) {
    if (suite != "all" && suite != s.name) continue;
    for (const TestCase& t : s.tests) want[absl::StrCat(s.name, ".", t.id)] = 0;
  }
  std::string odd;
  for (const Record& r : records) {
    auto it = want.find(r.id);
    if (it == want.end() || ++it->second > 1) absl::StrAppend(&odd, odd.empty() ? "" : ", ", r.id);
  }
  for (const auto& [id, n] : want) {
    if (n == 0) absl::StrAppend(&odd, odd.empty() ? "" : ", ", "missing ", id);
  }
  return {absl::StrCat("the records are suite \"", suite, "\"'s tests, each once"),
          !want.empty() && odd.empty(), "every test of the suite once", odd.empty() ? "so" : odd};
}

// The verdict a record states follows from its own checks.
Check Consistent(const Record& r) {
  bool all_ok = true;
  for (const Check& c : r.checks) all_ok = all_ok && c.ok;
  bool ok = false;
  switch (r.verdict) {
    case Verdict::kPass:
      ok = !r.checks.empty() && all_ok && !r.jobs.empty();
      break;
    case Verdict::kFail:
      ok = !all_ok || !r.verdict_reason.empty();
      break;
    case Verdict::kInconclusive:
      ok = !r.verdict_reason.empty();
      break;
    case Verdict::kNotRun:
      ok = r.checks.empty() && r.jobs.empty();
      break;
  }
  return {r.id + ": the verdict follows from its checks", ok,
          "pass: checks, all ok, and jobs; fail: a failed check or a reason",
          absl::StrCat(VerdictName(r.verdict), " with ", r.checks.size(), " check(s)",
                       all_ok ? ", all ok" : ", some failed", ", ", r.jobs.size(), " job(s)")};
}

// The event at `head` still carries the recorded hash (an empty chain: seq 0, no hash).
Check HeadCheck(ApiClient& api, const std::string& name, const ChainHead& head) {
  const std::string expected = absl::StrCat("event ", head.seq, " with hash ", head.hash);
  if (head.seq == 0) return {name, head.hash.empty(), "an empty chain", expected};
  auto event = api.Get(absl::StrCat("/api/v1/events/", head.seq));
  if (!event.ok()) return {name, false, expected, std::string(event.status().message())};
  const std::string hash = event->value("hash", "");
  return {name, hash == head.hash, expected, absl::StrCat("event ", head.seq, " with hash ", hash)};
}

// job id -> the seq of its job.submitted event, for events after `after` through `through`.
absl::StatusOr<std::map<int64_t, int64_t>> Submissions(ApiClient& api, int64_t after,
                                                       int64_t through) {
  std::map<int64_t, int64_t> out;
  absl::Status st = ForEachEvent(api, after, [&](const json& e) {
    const int64_t seq = e.value("seq", int64_t{0});
    if (seq > through) return false;
    const std::string subject = e.value("subject", "");
    int64_t id = 0;
    if (e.value("type", "") == "job.submitted" && subject.rfind("job/", 0) == 0 &&
        absl::SimpleAtoi(subject.substr(4), &id)) {
      out[id] = seq;
    }
    return true;
  });
  if (!st.ok()) return st;
  return out;
}

// `by` is the kit's user, or a user the record says the test made, made by the kit's user.
bool ByTheKit(ApiClient& api, const Record& r, const std::string& by) {
  if (by == r.submitted_by) return true;
  const json made = r.observed.value("users", json::array());
  if (std::find(made.begin(), made.end(), json(by)) == made.end()) return false;
  auto users = api.Get("/api/v1/users");
  if (!users.ok() || !users->is_array()) return false;
  for (const json& u : *users) {
    if (u.value("name", "") == by) return u.value("created_by", "") == r.submitted_by;
  }
  return false;
}

// Each job: it exists, the recorded user (or one its test made) submitted it, inside the record's
// events, as recorded.
void JobChecks(ApiClient& api, const Record& r, const std::map<int64_t, int64_t>& submitted,
               std::vector<Check>& out) {
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    const int64_t id = r.jobs[i];
    const std::string name = absl::StrCat(r.id, ": job ", id);
    auto job = api.Get(absl::StrCat("/api/v1/jobs/", id));
    if (!job.ok()) {
      out.push_back({name, false, "exists", std::string(job.status().message())});
      continue;
    }
    const json input = i < r.input.size() ? r.input[i] : json::object();
    const json spec = job->value("spec", json::object());
    const bool same = input.is_object() &&
                      spec.value("command", json()) == input.value("command", json()) &&
                      spec.value("name", json()) == input.value("name", json());
    auto at = submitted.find(id);
    const bool inside = at != submitted.end();
    const std::string by = job->value("submitted_by", "");
    out.push_back({name, same && inside && ByTheKit(api, r, by),
                   absl::StrCat("submitted by ", r.submitted_by, " between events ",
                                r.chain_start.seq, " and ", r.chain_end.seq, " as its input"),
                   absl::StrCat("submitted by ", by,
                                inside ? absl::StrCat(" at event ", at->second)
                                       : " outside the record's events",
                                same ? ", as its input" : ", not as its input")});
  }
}

}  // namespace

absl::StatusOr<std::vector<Check>> Verify(ApiClient& api, const std::string& dir) {
  auto records = ReadRecords(dir);
  if (!records.ok()) return records.status();
  std::vector<Check> out;
  auto chain = api.Get("/api/v1/audit/verify");
  if (!chain.ok()) return chain.status();
  out.push_back({"the event chain verifies", chain->value("ok", false), "ok",
                 absl::StrCat(chain->value("ok", false) ? "ok" : "broken: ", chain->dump())});
  out.push_back(TestSet(SuiteOf(dir), *records));
  for (const Record& r : *records) {
    out.push_back(Consistent(r));
    out.push_back(HeadCheck(api, r.id + ": chain at start", r.chain_start));
    out.push_back(HeadCheck(api, r.id + ": chain at end", r.chain_end));
    out.push_back({r.id + ": chain in order", r.chain_start.seq <= r.chain_end.seq, "start <= end",
                   absl::StrCat(r.chain_start.seq, " .. ", r.chain_end.seq)});
    if (r.jobs.empty()) continue;
    auto submitted = Submissions(api, r.chain_start.seq, r.chain_end.seq);
    if (!submitted.ok()) return submitted.status();
    JobChecks(api, r, *submitted, out);
  }
  return out;
}

}  // namespace carve::poc
