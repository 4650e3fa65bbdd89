#include "runtime/poc/poc_suites.h"

#include "absl/strings/str_cat.h"

namespace carve::poc {

namespace {

constexpr const char* kNotBuilt = "not built yet in this version of the kit (issue 13)";

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

namespace {

Record Begin(Cluster& cluster, const std::string& suite, const TestCase& test) {
  Record r;
  r.id = absl::StrCat(suite, ".", test.id);
  r.title = test.title;
  r.suite = suite;
  r.owner = cluster.options().owner;
  r.submitted_by = cluster.options().submitted_by;
  r.pass_condition = test.pass_condition;
  r.failure_handling = test.failure_handling;
  r.boundary = test.boundary;
  r.started_us = NowUs();
  return r;
}

// The chain's head after the test (and its clean-up); a head that cannot be read fails it.
void End(Cluster& cluster, Record& r) {
  r.ended_us = NowUs();
  auto head = cluster.Head();
  if (head.ok()) {
    r.chain_end = *head;
    return;
  }
  r.verdict = Verdict::kFail;
  r.verdict_reason = absl::StrCat("the event chain cannot be read: ", head.status().message());
}

}  // namespace

Record NotRun(Cluster& cluster, const std::string& suite, const TestCase& test,
              const std::string& why) {
  Record r = Begin(cluster, suite, test);
  if (auto head = cluster.Head(); head.ok()) r.chain_start = *head;
  r.verdict = Verdict::kNotRun;
  r.verdict_reason = why;
  End(cluster, r);
  return r;
}

Record RunTest(Cluster& cluster, const std::string& suite, const TestCase& test) {
  if (!test.run) {
    return NotRun(cluster, suite, test, test.boundary.empty() ? kNotBuilt : test.boundary);
  }
  Record r = Begin(cluster, suite, test);
  auto head = cluster.Head();
  if (!head.ok()) {
    r.verdict = Verdict::kFail;
    r.verdict_reason =
        absl::StrCat("the event chain cannot be read at the start: ", head.status().message());
    End(cluster, r);
    return r;
  }
  r.chain_start = *head;
  r.verdict = Verdict::kPass;  // until a check or the run says otherwise
  absl::Status st = test.run(cluster, r);
  const bool marked = r.verdict == Verdict::kInconclusive;  // the test said the cluster cannot
  cluster.CleanUp(r);
  CheckVersions(r);
  Judge(r);
  if (!st.ok() && cluster.Interrupted()) {
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = "interrupted: its jobs were cancelled";
  } else if (!st.ok() && !marked) {
    r.verdict = Verdict::kFail;
    r.verdict_reason = absl::StrCat("the test could not finish: ", st.message());
  }
  End(cluster, r);
  return r;
}

}  // namespace carve::poc
