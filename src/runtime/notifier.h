// Webhook notifications (kind: notification; docs/operations.md, "Notifications"). The event log
// is the outbox: each notification keeps a durable cursor into it (kind "notification-cursor"),
// and a delivery thread sends every later event the notification wants, in order, one at a time,
// signed with its secret and retried with backoff; each delivery's attempts are recorded (kind
// "notification-delivery"). An event committed before a crash is delivered after the restart,
// since the cursor moves only once it was delivered or given up: a receiver sees each event at
// least once, and the event's sequence number (`id`, and the X-Carve-Event header) lets it drop
// repeats.
//
// What a tenant's webhook gets: the events of its own jobs (details.tenant, and its project when
// the notification names one) with their reason and details; of a platform event (a device, a
// node) that names jobs, only when one of them is its own, and then only the type, subject, time
// and its own jobs (a reason or details may name another tenant's jobs). Nothing else.
#ifndef CARVE_RUNTIME_NOTIFIER_H_
#define CARVE_RUNTIME_NOTIFIER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "ports/store.h"
#include "runtime/notification_config.h"

namespace carve {

class Notifier {
 public:
  struct Options {
    int64_t poll_ms = 200;         // how often the log is read for new events
    int64_t first_retry_ms = 500;  // then doubled per attempt, up to max_retry_ms
    int64_t max_retry_ms = 60'000;
    int max_attempts = 10;       // then the delivery is recorded failed and skipped
    int64_t timeout_ms = 5'000;  // connect and read, per attempt
  };
  struct Sources {
    std::function<std::vector<NotificationConfig>()> configs;
    // A job's tenant and project ({"", ""} when unknown).
    std::function<std::pair<std::string, std::string>(int64_t job)> job_owner;
    // Whether jobs of `tenant` (of its `project`; "": of any of its projects) may use `queue`:
    // a queue's quota events go to them.
    std::function<bool(const std::string& queue, const std::string& tenant,
                       const std::string& project)>
        queue_user;
    std::function<int64_t()> now_us;
  };

  Notifier(Store* store, Sources sources, Options options);
  ~Notifier();
  void Start();
  void Stop();

  // One pass over every notification (the thread's loop body).
  void RunOnce();

  // Per notification: cursor, the delivery in progress, counts.
  nlohmann::json Status() const;

  static constexpr char kCursorKind[] = "notification-cursor";
  static constexpr char kDeliveryKind[] = "notification-delivery";
  // A notification's records are its tenant's: "TENANT/NAME" (re-applied to another tenant, a
  // notification starts afresh, and the new tenant never reads the old one's deliveries).
  static std::string Scope(const std::string& tenant, const std::string& name);
  // The id of a delivery record for event `seq` ("SCOPE/<seq, zero padded>").
  static std::string DeliveryId(const std::string& scope, int64_t seq);

  // The body's signature header value: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t.body)>".
  static std::string Sign(const std::string& secret, int64_t unix_seconds, const std::string& body);

 private:
  struct Pending {
    int64_t seq = 0;
    std::string wants;  // the project and event types the body was chosen and made for
    std::string body;
    nlohmann::json attempts = nlohmann::json::array();
    int64_t next_try_us = 0;
  };
  struct State {
    bool loaded = false;
    int64_t cursor = 0;  // every event up to here is handled
    std::optional<Pending> pending;
    int64_t delivered = 0;
    int64_t failed = 0;
  };
  // The payload for `n` of event `e`, or nullopt when it is not for `n`.
  std::optional<nlohmann::json> PayloadFor(const NotificationConfig& n, const StoredEvent& e) const;
  void Load(const NotificationConfig& n, State& s);
  // Delivers what is due for `n`, up to a time budget.
  void Work(const NotificationConfig& n, State& s);
  void Advance(const NotificationConfig& n, State& s);
  // One attempt; whether it was delivered.
  bool Attempt(const NotificationConfig& n, State& s);
  void Save(const NotificationConfig& n, const State& s, const std::string& outcome);
  void Loop();

  Store* store_;
  Sources sources_;
  Options options_;
  mutable std::mutex mu_;  // guards states_ against Status
  std::map<std::string, State> states_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace carve

#endif  // CARVE_RUNTIME_NOTIFIER_H_
