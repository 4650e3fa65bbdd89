#ifndef CARVE_RUNTIME_WORK_BOARD_H_
#define CARVE_RUNTIME_WORK_BOARD_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"

namespace carve {

// Work pushed to agents (the agent gateway's long poll, GET /api/v1/agents/wait): a version per
// node that grows when the node has work its agent has not been told of (a replica placed on it
// to start, or one of its replicas to stop). An agent holds a wait open and heartbeats at once
// when its version grows, so work reaches it as it is decided instead of at its next heartbeat.
// The board has its own lock: waiting agents never hold or wake on the control plane's, and a
// post wakes only the agents of nodes whose version grew. Thread-safe.
class WorkBoard {
 public:
  // One item of a node's work: (job, replica, whether it must stop).
  using Item = std::tuple<int64_t, int, bool>;
  using Work = std::map<std::string, std::set<Item>>;

  // What each node has to do now, in full (a node not named has nothing). Raises the version of
  // each node with an item it was not told of before; returns how many versions grew.
  int Post(Work work);
  // `node`'s version once it is above `after`, or when `timeout_ms` passes (then the version as
  // it is), or at once once the board has ended. ResourceExhausted when `max_waiters` agents
  // already wait.
  absl::StatusOr<int64_t> Wait(const std::string& node, int64_t after, int64_t timeout_ms,
                               int max_waiters);
  // Answers every wait now and from now on (the server is stopping, or cannot commit).
  void End();
  int64_t version(const std::string& node) const;

 private:
  struct Slot {
    int64_t version = 0;
    std::set<Item> told;  // what the last post gave the node
    std::condition_variable cv;
  };

  mutable std::mutex mu_;
  absl::node_hash_map<std::string, Slot> slots_;  // a slot's cv stays put while waited on
  int waiters_ = 0;
  bool ended_ = false;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_WORK_BOARD_H_
