// The acceptance kit's view of the cluster under test: only the public API, as the owner's
// token allows. Submits the tests' jobs (recording each spec and id in the test's record), waits
// for the states that name an outcome, reads the probes' lines from the jobs' logs.
#ifndef CARVE_RUNTIME_POC_POC_CLUSTER_H_
#define CARVE_RUNTIME_POC_POC_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/api_client.h"
#include "runtime/poc/poc.h"

namespace carve::poc {

// What a probe printed (runtime/probe.h), by kind.
struct ProbeLog {
  nlohmann::json sees;                  // null when it never got that far
  int64_t held_mib = 0;                 // the most a step held (ok)
  bool refused = false;                 // a step was refused by the device
  int64_t refused_mib = 0;              // the total the first refused step asked for
  std::optional<int64_t> reached_mib;   // "memory-reached": absent when it was killed first
  std::optional<int64_t> per_second;    // "done": the mean compute rate
  std::string compute;                  // "done": gpu-kernel or cpu-loop ("" before it)
  bool crashed = false;                 // "crash": it raised SIGSEGV on purpose
  std::vector<nlohmann::json> resumed;  // "resumed" lines, one per attempt run --checkpoint
  std::vector<int64_t> seconds;         // the "progress" lines' seconds, in order
};

class Cluster {
 public:
  Cluster(ApiClient& api, const Options& options, std::ostream& progress)
      : api_(api), options_(options), progress_(progress) {}

  const Options& options() const { return options_; }
  std::ostream& progress() { return progress_; }
  ApiClient& api() { return api_; }

  // Submits `spec` and notes it (spec and id) in `record`.
  absl::StatusOr<int64_t> Submit(const nlohmann::json& spec, Record& record);
  absl::StatusOr<nlohmann::json> Job(int64_t id);
  // Polls the job until `done` holds for it (or the kit's timeout): the job as last seen.
  absl::StatusOr<nlohmann::json> WaitUntil(int64_t id,
                                           const std::function<bool(const nlohmann::json&)>& done,
                                           const std::string& what);
  absl::StatusOr<nlohmann::json> WaitFinal(int64_t id);
  absl::StatusOr<nlohmann::json> WaitRunning(int64_t id);
  absl::StatusOr<ProbeLog> Probe(int64_t id);
  absl::Status Cancel(int64_t id);
  absl::Status Scale(int64_t id, int replicas);
  // POST /api/v1/nodes/NODE/ACTION: cordon, uncordon, drain.
  absl::Status NodeAction(const std::string& node, const std::string& action);
  absl::StatusOr<ChainHead> Head();
  absl::StatusOr<nlohmann::json> Nodes();
  absl::StatusOr<nlohmann::json> Get(const std::string& path) { return api_.Get(path); }
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) {
    return api_.Post(path, body);
  }
  absl::StatusOr<std::string> Text(const std::string& path) { return api_.GetText(path); }
  // Active jobs' devices: "node/gpu N" of every pending or running replica.
  absl::StatusOr<std::set<std::string>> BusyGpus();
  // The reason of the first job.waiting event of job `id` after event `after_seq` ("" when it
  // never waited): why it waited, whatever the moment it is read.
  absl::StatusOr<std::string> WaitReason(int64_t id, int64_t after_seq);
  // Polls the events after `after_seq` until one of `type` about `subject` appears (or the kit's
  // timeout): that event.
  absl::StatusOr<nlohmann::json> AwaitEvent(int64_t after_seq, const std::string& type,
                                            const std::string& subject);
  // True once the kit was asked to stop (Ctrl-C): waits end at once.
  bool Interrupted() const {
    return options_.interrupted != nullptr && options_.interrupted->load();
  }
  // Cancels every job of `record` that has not ended (a test that failed half way) and waits
  // for it to end.
  void CleanUp(const Record& record);
  // Notes the nodes `job`'s replicas ran on, with their versions, in `record`.
  static void NoteNodes(const nlohmann::json& job, Record& record);

 private:
  ApiClient& api_;
  Options options_;
  std::ostream& progress_;
};

bool IsFinal(const nlohmann::json& job);
// Calls `each` with every event after `after_seq`, oldest first, page by page, until it returns
// false or the log ends.
absl::Status ForEachEvent(ApiClient& api, int64_t after_seq,
                          const std::function<bool(const nlohmann::json&)>& each);
ProbeLog ParseProbeLog(const std::string& log);
int64_t NowUs();

// The shared GPUs of the cluster: (node, device index, model, memory MiB) of every shared GPU of
// `model` ("": the model of the first one found) that takes work (ready node, GPU healthy and
// available: not cordoned, draining, fenced or quarantined); idle when no replica in `busy`
// ("node/gpu N") holds it.
struct SharedGpu {
  std::string node;
  int device = 0;
  std::string model;
  int64_t memory_mib = 0;
  bool idle = true;
};
std::vector<SharedGpu> SharedGpus(const nlohmann::json& nodes, const std::string& model,
                                  const std::set<std::string>& busy);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_CLUSTER_H_
