// Hardening of the REST API: body size limit, socket timeouts, a bounded worker pool with short
// keep-alive, and a token bucket per API token and per user so one client cannot starve the others
// (a user minting new tokens gets no new requests: M3).
#include <chrono>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/api_server.h"
#include "runtime/clock.h"
#include "runtime/log.h"

namespace carve {

void ApiServer::Harden() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.timeout_s, 0);
  s.set_write_timeout(options_.timeout_s, 0);
  // A connection keeps a worker while it is kept alive: an idle one gives it back after 2 s, a
  // busy one after 1,000 requests (cpp-httplib's default of 5, and 20 before, made 16 busy
  // clients reconnect all the time: tests/runtime/api_server_test.cc).
  s.set_keep_alive_max_count(1000);
  s.set_keep_alive_timeout(2);
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    LogTrace(req.method, " ", req.path, " ", res.status);
  });
  size_t threads = static_cast<size_t>(options_.threads);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
}

absl::Status ApiServer::Admit(const Principal& who) {
  if (Unlimited(who) || options_.rate_per_s <= 0) {
    return absl::OkStatus();
  }
  std::lock_guard<std::mutex> lock(limit_mu_);
  int64_t now = SteadyUs();
  auto refill = [&](Bucket& b) -> Bucket& {
    if (b.last_us == 0) b.tokens = options_.rate_burst;
    b.tokens = std::min(options_.rate_burst, b.tokens + static_cast<double>(now - b.last_us) *
                                                            options_.rate_per_s / 1e6);
    b.last_us = now;
    return b;
  };
  Bucket& token = refill(buckets_["token:" + who.token_id]);
  Bucket& user = refill(buckets_["user:" + (who.user_id.empty() ? who.name : who.user_id)]);
  if (token.tokens < 1 || user.tokens < 1) {
    rate_limited_ += 1;
    return absl::ResourceExhaustedError(absl::StrCat("rate limit: ", options_.rate_per_s,
                                                     " requests/s per token and per user (burst ",
                                                     options_.rate_burst, "); retry shortly"));
  }
  token.tokens -= 1;
  user.tokens -= 1;
  return absl::OkStatus();
}

}  // namespace carve
