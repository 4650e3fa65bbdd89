// The acceptance kit (`carve poc`, docs/poc.md): a buyer's proof-of-concept tests, run against a
// live cluster through the public API with ordinary jobs (`carve probe`), each leaving one
// acceptance record: what was submitted, by whom, when, on which nodes and versions, where its
// logs and events are, what passing means, what was observed, the verdict, and the event chain's
// head before and after so a reviewer can check that the chain covers the test.
#ifndef CARVE_RUNTIME_POC_POC_H_
#define CARVE_RUNTIME_POC_POC_H_

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api_client.h"

namespace carve::poc {

struct Options {
  std::string server;  // the cluster's URL and CA, for the users a test creates
  std::string ca;
  std::string suite = "software";  // software | partition | recovery | all
  std::string owner;               // who ran the kit (recorded)
  std::string probe;               // the `carve` binary jobs run `carve probe` with, on the nodes
  std::string gpu_model;           // shared GPUs of this model ("": the first model found)
  double tolerance = 0.5;          // a neighbour keeps at least this share of its solo rate
  int64_t seconds = 3;             // compute seconds of each probe
  int64_t timeout_s = 180;         // the longest a test waits for one outcome
  int64_t job_memory_mib = 512;    // host memory of each probe job
  std::string submitted_by;        // the token's user, who submits the jobs (whoami)
  std::vector<std::string> only;   // run only these tests ("recovery.service-drain"); all if empty
  // Injects device and node faults (partition.device-faults): run through /bin/sh as
  // `CMD ACTION NODE [GPU_UUID [START]]`; empty: that test is not run.
  std::string fault_command;
  // Set (by a signal handler) to stop: the running test cleans up, the rest are not run.
  const std::atomic<bool>* interrupted = nullptr;
};

// One check of a test: what was expected, what was seen, and whether they agree.
struct Check {
  std::string name;
  bool ok = false;
  std::string expected;
  std::string observed;
};

// A point of the event chain: the last event's sequence number and hash (0 and "" when empty).
struct ChainHead {
  int64_t seq = 0;
  std::string hash;
};

enum class Verdict { kPass, kFail, kInconclusive, kNotRun };
std::string VerdictName(Verdict v);

// One test's acceptance record (records.jsonl, one per line; records.csv).
struct Record {
  std::string id;     // "software.resource-request"
  std::string title;  // what a buyer calls it
  std::string suite;
  std::string owner;         // who is responsible for the test (--owner)
  std::string submitted_by;  // the user whose token submitted its jobs
  int64_t started_us = 0;
  int64_t ended_us = 0;
  nlohmann::json input = nlohmann::json::array();   // the exact job specs submitted
  std::vector<int64_t> jobs;                        // their ids: `carve show`, `carve logs`
  nlohmann::json nodes = nlohmann::json::object();  // node -> the versions its replicas ran under
  ChainHead chain_start;
  ChainHead chain_end;
  std::string pass_condition;
  std::vector<Check> checks;
  nlohmann::json observed = nlohmann::json::object();  // figures, for the report's charts
  Verdict verdict = Verdict::kNotRun;
  std::string verdict_reason;    // the first failed check, or why it could not be judged
  std::string failure_handling;  // what the platform did, what an operator must do
  std::string boundary;          // what this test proves here, and what it does not
};

nlohmann::json ToJson(const Record& r);
absl::StatusOr<Record> RecordFromJson(const nlohmann::json& j);
// The verdict from the checks: pass when every check passed, else fail naming the first.
void Judge(Record& r);
// One check per node the test's jobs ran on: its replicas recorded the versions they ran under
// (driver, CUDA driver, kernel, carve), so the record can say under which versions it holds.
void CheckVersions(Record& r);

// Runs the chosen suite against the cluster `api` points at, writing a line per step to
// `progress`. Every test cleans up the jobs it started.
absl::StatusOr<std::vector<Record>> Run(ApiClient& api, const Options& options,
                                        std::ostream& progress);

// Writes DIR/records.jsonl, DIR/records.csv and DIR/report.html (self-contained).
absl::Status Write(const std::string& dir, const nlohmann::json& meta,
                   const std::vector<Record>& records);
// The report page: the acceptance table, per test its evidence and charts, and the boundary
// conclusions. `meta`: server, owner, versions, when.
std::string RenderReport(const nlohmann::json& meta, const std::vector<Record>& records);
// One CSV line per record, with a header line.
std::string RecordsCsv(const std::vector<Record>& records);

// Re-checks DIR's records against the server: every record's jobs exist, the chain verifies, and
// the event at each recorded head still has the recorded hash. One Check per claim.
absl::StatusOr<std::vector<Check>> Verify(ApiClient& api, const std::string& dir);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_H_
