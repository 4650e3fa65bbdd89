#ifndef CARVE_RUNTIME_AGENT_SWARM_H_
#define CARVE_RUNTIME_AGENT_SWARM_H_

// Thousands of simulated agents in one process against a real server (`carve sim agents`), so
// that what the server does at a cluster's size is measured, not extrapolated (docs/scale.md).
//
// Each node speaks the agent protocol as `carve agent` does: it registers with the join token
// naming the SHA-256 of a credential it made, heartbeats every heartbeat_ms on a new connection
// with its GPUs and replicas, and between heartbeats waits for work (GET /api/v1/agents/wait, one
// kept-alive connection per node, at most a second per wait) unless `wait` is off. Its replicas
// run on a virtual workload: no process starts; a replica whose command is `sleep N` (or
// `sh -c "sleep N"`) exits 0 after N seconds, any other after job_ms, one past its max_runtime
// ends timed out, and a stop ends it at once by SIGTERM. Its reclaim record says "unchecked"
// with the reason: nothing ran, so nothing was checked.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve {

struct SwarmOptions {
  std::string server;  // one or several addresses, as ApiClient takes them
  std::string token;   // the join token
  std::string ca_file;
  int nodes = 100;
  std::string prefix = "sim";  // nodes are PREFIX-00001, ...
  // "mixed": 8×H100-80GB, 8×A100-80GB, 8×H200-141GB and 4×L40S nodes in turn; "h100": all
  // 8×H100-80GB.
  std::string profile = "mixed";
  int64_t heartbeat_ms = 500;  // the agent's default
  int threads = 32;            // heartbeats sent at once at most
  bool wait = true;
  int64_t job_ms = 10000;
  // Node credentials from an earlier run (node name -> credential): those nodes register with
  // their own credential, as a restarted agent does; the others join with the join token.
  std::map<std::string, std::string> credentials;
};

// What a node is made of under a profile: its GPUs' model, count and memory, its CPU and memory.
struct SwarmNodeShape {
  std::string model;
  int gpus = 0;
  int64_t gpu_memory_mib = 0;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
};
// The shape of node `i` (0-based) under `profile`; InvalidArgument naming the profiles.
absl::StatusOr<SwarmNodeShape> SwarmShape(const std::string& profile, int i);
// How long a virtual replica of `command` runs: N seconds for `sleep N` or `sh -c "sleep N"`,
// else `fallback_ms`.
int64_t VirtualRuntimeMs(const std::vector<std::string>& command, int64_t fallback_ms);

// Latency figures of a set of samples (microseconds): {count, p50_ms, p90_ms, p99_ms, max_ms}.
nlohmann::json LatencySummary(std::vector<int64_t> us);

class AgentSwarm {
 public:
  explicit AgentSwarm(SwarmOptions options);
  ~AgentSwarm();

  // Registers every node, `threads` at a time; the first refusal ends it, naming the node.
  absl::Status Register();
  // Every node's credential, for the next run's SwarmOptions::credentials.
  std::map<std::string, std::string> Credentials() const;
  // Heartbeats (and waits) in background threads until Stop.
  void Start();
  void Stop();
  // Since the last call: heartbeats sent, their latency (the answer's arrival less the request's
  // start, as the node saw it), failures by message, beats later than twice the period, waits
  // answered and refused, and the replicas started, ended and running now.
  nlohmann::json Window();

 private:
  struct Node;
  struct Replica;
  void HeartbeatLoop();
  void Heartbeat(Node& node);
  void WaitLoop(Node& node);
  void Wake(int index);  // its next heartbeat is due now (work is waiting for it)
  void Count(const absl::Status& failure);

  SwarmOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::pair<int64_t, int>> due_;  // (steady µs, node index) of nodes waiting to beat
  std::vector<int64_t> due_of_;            // each node's entry in due_; -1 while it beats
  std::vector<std::thread> threads_;

  std::mutex stats_mu_;
  std::vector<int64_t> latencies_us_;
  std::map<std::string, int64_t> failures_;
  int64_t late_ = 0;
  std::atomic<int64_t> waits_{0}, waits_refused_{0}, started_{0}, ended_{0}, running_{0};
  int64_t window_start_us_ = 0;
};

// `carve sim submit`: submits `jobs` jobs through the API from `clients` connections at once
// (each {command, resources: {gpus}} with an idempotency key) and reports {jobs, seconds,
// per_second, failed, latency: LatencySummary}.
struct SubmitLoadOptions {
  std::string server;
  std::string token;
  std::string ca_file;
  int jobs = 1000;
  int clients = 8;
  std::vector<std::string> command = {"sleep", "30"};
  int gpus = 1;
  std::string key_prefix = "load";
};
absl::StatusOr<nlohmann::json> SubmitLoad(const SubmitLoadOptions& options);

}  // namespace carve

#endif  // CARVE_RUNTIME_AGENT_SWARM_H_
