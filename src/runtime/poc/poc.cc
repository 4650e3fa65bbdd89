#include "runtime/poc/poc.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/poc/poc_cluster.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

constexpr const char* kVerdicts[] = {"pass", "fail", "inconclusive", "not-run"};

json ChainJson(const ChainHead& h) { return {{"seq", h.seq}, {"hash", h.hash}}; }

absl::StatusOr<ChainHead> ChainFrom(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_object() || !it->value("seq", json()).is_number_integer() ||
      !it->value("hash", json()).is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("record field \"", field, "\" must be {\"seq\": N, \"hash\": \"...\"}"));
  }
  return ChainHead{(*it)["seq"].get<int64_t>(), (*it)["hash"].get<std::string>()};
}

}  // namespace

std::string VerdictName(Verdict v) { return kVerdicts[static_cast<int>(v)]; }

json ToJson(const Record& r) {
  json checks = json::array();
  for (const Check& c : r.checks) {
    checks.push_back(
        {{"name", c.name}, {"ok", c.ok}, {"expected", c.expected}, {"observed", c.observed}});
  }
  json logs = json::array();
  for (int64_t id : r.jobs) logs.push_back(absl::StrCat("/api/v1/jobs/", id, "/logs"));
  return {{"id", r.id},
          {"title", r.title},
          {"suite", r.suite},
          {"owner", r.owner},
          {"submitted_by", r.submitted_by},
          {"started_us", r.started_us},
          {"ended_us", r.ended_us},
          {"input", r.input},
          {"jobs", r.jobs},
          {"logs", logs},
          {"events", {{"after", r.chain_start.seq}, {"through", r.chain_end.seq}}},
          {"nodes", r.nodes},
          {"chain_start", ChainJson(r.chain_start)},
          {"chain_end", ChainJson(r.chain_end)},
          {"pass_condition", r.pass_condition},
          {"checks", checks},
          {"observed", r.observed},
          {"verdict", VerdictName(r.verdict)},
          {"verdict_reason", r.verdict_reason},
          {"failure_handling", r.failure_handling},
          {"boundary", r.boundary}};
}

absl::StatusOr<Record> RecordFromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("a record must be a JSON object");
  Record r;
  try {
    r.id = j.at("id").get<std::string>();
    r.title = j.value("title", "");
    r.suite = j.value("suite", "");
    r.owner = j.value("owner", "");
    r.submitted_by = j.value("submitted_by", "");
    r.started_us = j.value("started_us", int64_t{0});
    r.ended_us = j.value("ended_us", int64_t{0});
    r.input = j.value("input", json::array());
    r.jobs = j.value("jobs", std::vector<int64_t>{});
    r.nodes = j.value("nodes", json::object());
    r.pass_condition = j.value("pass_condition", "");
    for (const json& c : j.value("checks", json::array())) {
      r.checks.push_back(
          {c.at("name"), c.at("ok"), c.value("expected", ""), c.value("observed", "")});
    }
    r.observed = j.value("observed", json::object());
    r.verdict_reason = j.value("verdict_reason", "");
    r.failure_handling = j.value("failure_handling", "");
    r.boundary = j.value("boundary", "");
    const std::string verdict = j.at("verdict");
    bool known = false;
    for (int v = 0; v < 4; ++v) {
      if (verdict == kVerdicts[v]) r.verdict = static_cast<Verdict>(v), known = true;
    }
    if (!known)
      return absl::InvalidArgumentError(absl::StrCat("unknown verdict \"", verdict, "\""));
  } catch (const json::exception& e) {
    const json id = j.contains("id") ? j["id"] : json("?");
    return absl::InvalidArgumentError(absl::StrCat("record ", id.dump(), ": ", e.what()));
  }
  auto start = ChainFrom(j, "chain_start");
  if (!start.ok()) return start.status();
  auto end = ChainFrom(j, "chain_end");
  if (!end.ok()) return end.status();
  r.chain_start = *start;
  r.chain_end = *end;
  return r;
}

void CheckVersions(Record& r) {
  for (const auto& [node, v] : r.nodes.items()) {
    std::string missing;
    for (const char* key : {"driver", "cuda_driver", "kernel", "carve"}) {
      const bool known = v.is_object() && v.contains(key) && v[key].is_string() &&
                         !v[key].get<std::string>().empty();
      if (!known) absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
    }
    r.checks.push_back({absl::StrCat(node, ": versions recorded"), missing.empty(),
                        "driver, cuda_driver, kernel and carve",
                        missing.empty() ? "all four" : absl::StrCat("missing ", missing)});
  }
}

void Judge(Record& r) {
  if (r.verdict == Verdict::kInconclusive || r.verdict == Verdict::kNotRun) return;
  r.verdict = r.checks.empty() ? Verdict::kInconclusive : Verdict::kPass;
  if (r.checks.empty()) r.verdict_reason = "nothing was checked";
  for (const Check& c : r.checks) {
    if (c.ok) continue;
    r.verdict = Verdict::kFail;
    r.verdict_reason = absl::StrCat(c.name, ": expected ", c.expected, ", observed ", c.observed);
    return;
  }
}

absl::StatusOr<std::vector<Record>> Run(ApiClient& api, const Options& options,
                                        std::ostream& progress) {
  const std::string& s = options.suite;
  if (s != "software" && s != "partition" && s != "recovery" && s != "all") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown suite \"", s, "\": software, partition, recovery or all"));
  }
  if (options.probe.empty()) {
    return absl::InvalidArgumentError("no probe: the path of `carve` on the nodes (--probe)");
  }
  Cluster cluster(api, options, progress);
  if (auto head = cluster.Head(); !head.ok()) {
    return absl::Status(head.status().code(),
                        absl::StrCat("the kit needs a token that may verify the event chain "
                                     "(admin): ",
                                     head.status().message()));
  }
  for (const std::string& id : options.only) {
    bool known = false;
    for (const Suite& suite : Suites()) {
      for (const TestCase& test : suite.tests) known = known || id == suite.name + "." + test.id;
    }
    if (!known) return absl::InvalidArgumentError(absl::StrCat("--only: no test \"", id, "\""));
  }
  std::vector<Record> records;
  for (const Suite& suite : Suites()) {
    if (s != "all" && s != suite.name) continue;
    for (const TestCase& test : suite.tests) {
      progress << suite.name << "." << test.id << ": " << test.title << "\n" << std::flush;
      const std::string id = suite.name + "." + test.id;
      if (!options.only.empty() &&
          std::find(options.only.begin(), options.only.end(), id) == options.only.end()) {
        records.push_back(NotRun(cluster, suite.name, test, "not selected (--only)"));
        continue;
      }
      if (cluster.Interrupted()) {
        records.push_back(NotRun(cluster, suite.name, test, "interrupted before it started"));
        continue;
      }
      records.push_back(RunTest(cluster, suite.name, test));
      const Record& r = records.back();
      progress << "  " << VerdictName(r.verdict)
               << (r.verdict_reason.empty() ? "" : absl::StrCat(": ", r.verdict_reason)) << "\n"
               << std::flush;
    }
  }
  return records;
}

}  // namespace carve::poc
