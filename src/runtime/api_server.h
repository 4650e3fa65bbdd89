#ifndef CARVE_RUNTIME_API_SERVER_H_
#define CARVE_RUNTIME_API_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "runtime/control_plane.h"
#include "runtime/latency_histogram.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace carve {

// The REST API (/api/v1, JSON, bearer tokens) over a ControlPlane, plus the scheduler loop.
class ApiServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 7070;  // 0: any free port (see port())
    int64_t schedule_interval_ms = 200;
    // Hardening (api_limits.cc): per-token and per-user rate limit for tenant users (admins and
    // agents are
    // exempt), request body limit, socket timeouts, worker threads.
    double rate_per_s = 50;
    double rate_burst = 200;
    size_t max_body_bytes = 4 << 20;
    int timeout_s = 10;
    int threads = 64;
    // TLS: PEM certificate (chain) and private key; plain HTTP when empty.
    std::string tls_cert{};
    std::string tls_key{};
    // A socket from ListenExclusive (api_socket.h) to serve on; -1: Start binds host:port.
    int listen_fd = -1;
    // Several servers on one PostgreSQL store: "leader" and its lease's term, in /readyz.
    std::string role{};
    int64_t term = 0;
  };
  ApiServer(ControlPlane* control, Options options);
  ~ApiServer();

  // Binds host:port exclusively (or takes listen_fd) and starts serving and scheduling in
  // background threads. FailedPrecondition "port N is in use ..." when another socket has it.
  absl::Status Start();
  void Stop();
  int port() const { return port_; }
  // Scheduling cycles run so far and their total time (benchmarks; /metrics has the same).
  int64_t cycles() const { return cycles_; }
  int64_t cycle_us_total() const { return cycle_us_total_; }

 private:
  void Routes();
  void TenancyRoutes();    // users, tokens, audit, usage, utilization, metrics
  void PocReportRoutes();  // kept acceptance reports (api_routes_tenancy.cc)
  void UiRoutes();         // the dashboard under /ui/ (api_routes_ui.cc)
  void ListJobs(const httplib::Request& req, httplib::Response& res, const Principal& who);
  void ScheduleLoop();
  // Runs a scheduling cycle now rather than at the next interval (a submission, a replica's
  // end); kicks while a cycle runs make one more cycle.
  void Kick();
  // Logs a cycle's failure once per distinct error (and when cycles succeed again); the cycle's
  // duration at trace level. Called by the scheduling thread only.
  void ReportCycle(const absl::StatusOr<int>& scheduled, const absl::Status& accrued, int64_t us);
  void Harden();
  // Resolves the bearer token and asks the authorizer (tenancy.h) whether it may do `verb`;
  // replies with the error and returns nothing otherwise.
  std::optional<Principal> Authed(const httplib::Request& req, httplib::Response& res, Verb verb);
  // The caller's rate limit: ResourceExhausted when its token has no request left.
  absl::Status Admit(const Principal& who);

  ControlPlane* control_;
  Options options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_;
  std::thread schedule_thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool kicked_ = false;
  int port_ = 0;
  std::string last_cycle_error_;  // ReportCycle's last error line ("" after a good cycle)
  struct Bucket {
    double tokens = 0;
    int64_t last_us = 0;
  };
  std::atomic<int64_t> cycles_{0};
  std::atomic<int64_t> cycle_us_total_{0};
  std::atomic<int64_t> cycle_us_last_{0};
  LatencyHistogram cycle_seconds_;      // each scheduling cycle's duration
  LatencyHistogram heartbeat_seconds_;  // each agent heartbeat's handling, in the server
  std::atomic<int64_t> rate_limited_{0};
  std::mutex limit_mu_;
  std::map<std::string, Bucket> buckets_;  // "token:" + token id, "user:" + user id -> bucket
};

// The OpenAPI 3 document served at /api/v1/openapi.json.
const char* OpenApiDocument();

}  // namespace carve

#endif  // CARVE_RUNTIME_API_SERVER_H_
