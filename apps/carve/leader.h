// `carve server --store postgresql://...` among several servers on one database (issue 17): each
// follows (its API answers 503 naming the leader) until it takes the leader's lease
// (adapters/store/postgres_lease.h), then opens the store fenced by its term and leads. The
// leader renews its lease in the background; when it cannot (another server took over, or the
// lease ran out unrenewed) it stops at once: a supervisor restarts it, and it follows.
#ifndef CARVE_APPS_CARVE_LEADER_H_
#define CARVE_APPS_CARVE_LEADER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "adapters/store/postgres_lease.h"

namespace carve::app {

struct LeaderSettings {
  std::string url;      // the PostgreSQL store
  std::string holder;   // this server's name among them (--name)
  std::string address;  // its API's URL, for clients a follower redirects (--advertise)
  int64_t lease_ms = 3000;
  std::string tls_cert;  // the follower's API serves as the leader's would
  std::string tls_key;
};

class Leadership {
 public:
  Leadership(std::unique_ptr<PostgresLease> lease, int64_t term);
  ~Leadership();  // stops renewing (without releasing)

  int64_t term() const { return term_; }
  const std::string& holder() const { return lease_->holder(); }
  // Renews every lease_ms / 3 until Release; exits the process (status 75) once the lease is
  // lost, or once lease_ms less a sixth has passed since the last renewal that succeeded was
  // sent (a watchdog: a renewal blocked on a silent network cannot keep it alive), so that it
  // stops before a follower can lead. Late commits tried before that are refused by the store.
  void StartRenewing();
  // A clean stop: gives the lease up, so that a follower takes over at once.
  void Release();

 private:
  void Renew();
  void Watch();
  void Stop();  // the renewer and the watchdog

  std::unique_ptr<PostgresLease> lease_;
  const int64_t term_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // When the last renewal that succeeded was sent (steady clock): the lease lasts at least
  // lease_ms from then, whatever the renewer is blocked on now.
  std::atomic<int64_t> renewed_ns_{0};
  std::thread renewer_;
  std::thread watchdog_;
};

// Follows until this server takes the lease: serves FollowerServer on `listen_fd` meanwhile
// (which then closes it: `listen_fd` is -1 on return and the caller listens again). nullptr when
// SIGINT or SIGTERM (blocked, as BlockSignals leaves them) came first. Dies when the database
// cannot be reached at start. `following` runs once when it starts to follow.
std::unique_ptr<Leadership> FollowUntilLeader(const LeaderSettings& s, int& listen_fd,
                                              const std::function<void()>& following);

}  // namespace carve::app

#endif  // CARVE_APPS_CARVE_LEADER_H_
