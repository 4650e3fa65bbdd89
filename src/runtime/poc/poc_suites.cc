#include "runtime/poc/poc_suites.h"

#include "absl/strings/str_cat.h"

namespace carve::poc {

namespace {

constexpr const char* kNotBuilt = "not built yet in this version of the kit (issue 13)";

TestCase Planned(std::string id, std::string title, std::string pass_condition) {
  return {std::move(id), std::move(title), std::move(pass_condition), "", "", nullptr};
}

std::vector<TestCase> PartitionTests() {
  return {
      Planned("unit-lifecycle", "MIG unit lifecycle",
              "create, allocate, delete and re-create an instance; the discovered state matches "
              "the record at each step"),
      Planned("device-faults", "MIG device faults",
              "a fault in one instance, a device restart and a node failure each touch exactly "
              "the jobs that were on it"),
      Planned("upgrade", "Upgrade and maintenance",
              "unit ids, jobs and audit records stay traceable across a version change in a "
              "maintenance window"),
      Planned("across-pools", "Partitions across pools",
              "a queue's MIG quota is enforced; another tenant can neither see nor use them"),
  };
}

}  // namespace

const std::vector<Suite>& Suites() {
  static const std::vector<Suite> suites = {
      {"software", SoftwareTests()},
      {"partition", PartitionTests()},
      {"recovery", RecoveryTests()},
  };
  return suites;
}

void Expect(Record& r, const std::string& name, bool ok, const std::string& expected,
            const std::string& observed) {
  r.checks.push_back({name, ok, expected, observed});
}

Record RunTest(Cluster& cluster, const std::string& suite, const TestCase& test) {
  Record r;
  r.id = absl::StrCat(suite, ".", test.id);
  r.title = test.title;
  r.suite = suite;
  r.owner = cluster.options().owner;
  r.pass_condition = test.pass_condition;
  r.failure_handling = test.failure_handling;
  r.boundary = test.boundary;
  r.started_us = NowUs();
  if (auto head = cluster.Head(); head.ok()) r.chain_start = *head;
  if (!test.run) {
    r.verdict = Verdict::kNotRun;
    r.verdict_reason = kNotBuilt;
  } else {
    r.verdict = Verdict::kPass;  // until a check or the run says otherwise
    absl::Status st = test.run(cluster, r);
    cluster.CleanUp(r);
    Judge(r);
    if (!st.ok() && r.verdict != Verdict::kInconclusive) {
      r.verdict = Verdict::kFail;
      r.verdict_reason = absl::StrCat("the test could not finish: ", st.message());
    }
  }
  r.ended_us = NowUs();
  if (auto head = cluster.Head(); head.ok()) {
    r.chain_end = *head;
  } else {
    r.verdict = Verdict::kFail;
    r.verdict_reason = absl::StrCat("the event chain cannot be read: ", head.status().message());
  }
  return r;
}

}  // namespace carve::poc
