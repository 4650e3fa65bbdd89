// The kit's suites and their tests (docs/poc.md): each test is what a buyer asks, its pass
// condition, what an operator does when it fails, what it proves, and the code that runs it.
#ifndef CARVE_RUNTIME_POC_POC_SUITES_H_
#define CARVE_RUNTIME_POC_POC_SUITES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_cluster.h"

namespace carve::poc {

struct TestCase {
  std::string id;
  std::string title;
  std::string pass_condition;
  std::string failure_handling;
  std::string boundary;
  // Runs the test, filling the record's checks and observations; an error stops it (a fail,
  // with the error as its reason). Empty: the test is not built yet (verdict not-run).
  // A test without it is not built yet; its `boundary` then says why.
  std::function<absl::Status(Cluster&, Record&)> run;
};

struct Suite {
  std::string name;
  std::vector<TestCase> tests;
};

const std::vector<Suite>& Suites();
std::vector<TestCase> SoftwareTests();
TestCase AbnormalJobTest();              // poc_software_faults.cc
TestCase ReclamationTest();              // poc_software_faults.cc
TestCase QuotaPriorityTest();            // poc_software_quota.cc
std::vector<TestCase> RecoveryTests();   // poc_recovery.cc
std::vector<TestCase> PartitionTests();  // poc_partition.cc
TestCase DeviceFaultsTest();             // poc_partition_faults.cc
TestCase UpgradeTest();                  // poc_partition_upgrade.cc
TestCase NodeLossTest();                 // poc_recovery_loss.cc

// A record for a test that is not run (not built, or the kit was interrupted), saying why.
Record NotRun(Cluster& cluster, const std::string& suite, const TestCase& test,
              const std::string& why);
// Runs one test: the chain's head before and after, its jobs cleaned up, the verdict judged; a
// test that stops on an error fails with it, unless it said the cluster cannot show it.
Record RunTest(Cluster& cluster, const std::string& suite, const TestCase& test);

// The checks tests share.
void Expect(Record& r, const std::string& name, bool ok, const std::string& expected,
            const std::string& observed);
// Waits until probe job `id` has computed (and checkpointed) `seconds` seconds (poc_recovery.cc).
absl::Status AwaitCheckpointed(Cluster& c, int64_t id, size_t seconds);
// What moved a job: in words ("the drain"), and what its first attempt's cause says ("drain").
struct MoveCause {
  std::string what;
  std::string cause_has;
};
// Waits for probe job `id` (run --checkpoint for `total` seconds) to end, and checks that it
// succeeded, was moved once `by` that cause, resumed at second 2 or later, and computed every
// second 1..total. `late_output_dropped`: the first attempt's output stopped reaching the server
// (its node was cut off; the server drops an earlier attempt's late output), so the seconds up to
// the one resumed from count as computed.
absl::Status ExpectResumedAfterMove(Cluster& c, Record& r, int64_t id, int total,
                                    const MoveCause& by, bool late_output_dropped);

// Where job `id`'s tenant has notifications that want its recovery events (job.retrying,
// job.failover, job.preempted, job.lost, job.displaced, job.replica-retired) written since the
// test began, checks that each reached each of them (the server's delivery records); else notes
// in the record why nothing was checked (poc_notifications.cc).
absl::Status ExpectNotified(Cluster& c, Record& r, int64_t id);
// The clause every recovery test's pass condition ends with.
inline constexpr char kNotifiedClause[] =
    "; where the job's tenant has webhook notifications that want its recovery events, each "
    "such event reached each of them (delivered, by the server's delivery records)";

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_SUITES_H_
