#ifndef CARVE_RUNTIME_JOB_SPEC_H_
#define CARVE_RUNTIME_JOB_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/gpu_catalog.h"
#include "core/sched/queueing/topology.h"
#include "core/sched/request.h"
#include "nlohmann/json.hpp"

namespace carve {

// What a user submits (job.yaml or the API's JSON; the same fields):
//   name: train-resnet            kind: training | inference | batch | evaluation | interactive |
//   data tenant, project, queue        (default "default") priority: 0                   replicas:
//   1 resources:
//     gpus: 2                     mode: exclusive | shared | partition
//     gpu_compute: 30%            gpu_memory: 10Gi          profile: 3g.71gb
//     gpu_model: [H200]           cpu: 8                    memory: 32Gi
//   command: [python, train.py]   env: {EPOCHS: "3"}        workdir: /data
//   max_runtime: 2h
// Unknown fields are errors, so a typo never silently changes what runs.
struct JobSpec {
  std::string name;
  std::string tenant = "default";
  std::string project = "default";
  std::string queue = "default";
  std::string kind = "batch";
  int64_t priority = 0;
  int replicas = 1;
  int gpus = 0;
  std::string mode = "exclusive";
  std::string gpu_compute;  // shared: "30%", "0.3", "300m"
  std::string gpu_memory;   // shared: "10Gi"
  std::string profile;      // partition
  std::vector<std::string> gpu_models;
  std::string cpu = "1";
  std::string memory = "1Gi";
  // The CPU the replica's cgroup allows when above the request (`resources.limits: {cpu: 16}`):
  // placement and quota count the request, the node lets it burst to the limit when its CPUs
  // are idle. Empty: the request is the limit. Memory has no limit above its request: memory is
  // not given back under pressure, so a replica past its request would take what placement
  // gave another job, and the kernel would kill one of them.
  std::string cpu_limit;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;
  std::string max_runtime;  // "90s", "30m", "2h"; empty: none
  // What happens when the platform loses the job (its node fails): checkpoint-retry (training),
  // failover (inference), requeue (evaluation, batch, interactive, data) or none; each allows
  // `max_retries` new attempts. Defaults by kind.
  std::string recovery;
  // Interactive work holds a lease: unless renewed (`carve renew`) within this long, the job is
  // stopped and its GPUs come back. Default 1h for kind interactive; empty otherwise.
  std::string lease;
  int max_retries = -1;  // -1: the policy's default
  // Scheduling: a priority class (critical | standard | exploratory, or one applied with
  // `carve apply`) sets the default priority and preemptibility; `topology: compact` prefers
  // the replicas on one node, then one NVLink domain, then one rack.
  std::string priority_class;
  std::optional<bool> preemptible;
  std::string topology;
  // How long the job has to checkpoint once told to stop (preempted, drained, cancelled):
  // SIGTERM, then SIGKILL after this ("30s"); empty: the agent's default (3 s).
  std::string checkpoint_grace;
  // Shared GPUs: "enforced" (default) runs only where the node enforces the share's caps (an
  // MPS daemon); "best-effort" also accepts a shared GPU without one (caps not enforced, and the
  // replica's record says so).
  std::string isolation;
  // Named extra resources per replica (`resources.extra: {rdma_gbps: 200}`), in whole units; a
  // node offers them with `carve agent --resource NAME=AMOUNT`.
  std::map<std::string, int64_t> extra;
  // `spread: {max_per_node: N, app: NAME}`: at most N replicas of the tenant's application NAME
  // (without an app: of this job) on one node; 0: no limit.
  int spread_max_per_node = 0;
  std::string spread_app;

  nlohmann::json ToJson() const;
  std::string RecoveryPolicy() const;
  std::string Lease() const { return !lease.empty() || kind != "interactive" ? lease : "1h"; }
  int MaxRetries() const;
};

// Strict parse: the error names the field ("resources.cpu: invalid CPU quantity \"two\"").
absl::StatusOr<JobSpec> JobSpecFromJson(const nlohmann::json& j);
// What a new submission must also meet (stored records are not held to it, so that a limit
// added later never keeps a server from loading its store): names (name, tenant, project,
// queue, priority_class) printable and at most 128 bytes; env names [A-Za-z_][A-Za-z0-9_]*;
// no NUL in env values or command arguments; command and env at most 256 KiB together.
absl::Status CheckSubmission(const JobSpec& spec);
// YAML (a job file) to the same JSON shape. Deeper than 64 levels, or more than 200,000 values
// once aliases are expanded, is an error.
absl::StatusOr<nlohmann::json> YamlToJson(const std::string& yaml_text);
// Every document of a multi-document YAML file ("---" between them), as a JSON array; a document
// that is itself a list contributes its items.
absl::StatusOr<nlohmann::json> YamlDocumentsToJson(const std::string& yaml_text);

// The scheduler's view of a spec; checks quantities, models and profiles against the catalog.
// `job_id` names the application a spread limit without an app counts (the job itself).
absl::StatusOr<JobRequest> ToJobRequest(const JobSpec& spec, const GpuCatalog& catalog,
                                        int64_t job_id = 0);

// Extra resources as a job asks for them or a node offers them (`field` names where): names as
// label keys (letters, digits, '-', '_', '.', an optional "prefix/"), at most kMaxExtraResources
// of them, each amount 1 to 10^15.
inline constexpr size_t kMaxExtraResources = 32;
absl::Status CheckExtraResources(const std::map<std::string, int64_t>& extra,
                                 const std::string& field);
// "NAME=AMOUNT" (`carve agent --resource`), checked as above.
absl::StatusOr<std::pair<std::string, int64_t>> ParseExtraResource(absl::string_view text);
// Reads `{name: amount}` (whole numbers) from j[key] into `out`, checked as above.
absl::Status ReadExtraResources(const nlohmann::json& j, const std::string& key,
                                const std::string& field, std::map<std::string, int64_t>& out);

// What a submission must ask for at least, per replica: a job is limited and charged by what it
// asks, so "0" would run unlimited and free. (Stored jobs are not checked again.)
inline constexpr int64_t kMinCpuMilli = 100;  // 100m
inline constexpr int64_t kMinMemoryMib = 16;  // 16Mi
absl::Status CheckSubmissionMinimums(const JobSpec& spec);

// "90s", "30m", "2h", "1h30m" -> microseconds; errors say what was wrong.
absl::StatusOr<int64_t> ParseDurationUs(const std::string& text);

}  // namespace carve

#endif  // CARVE_RUNTIME_JOB_SPEC_H_
