#ifndef CARVE_RUNTIME_API_SERVER_H_
#define CARVE_RUNTIME_API_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "runtime/control_plane.h"

namespace httplib {
class Server;
}

namespace carve {

// The REST API (/api/v1, JSON, bearer tokens) over a ControlPlane, plus the scheduler loop.
class ApiServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 7070;  // 0: any free port (see port())
    int64_t schedule_interval_ms = 200;
  };
  ApiServer(ControlPlane* control, Options options);
  ~ApiServer();

  // Binds and starts serving and scheduling in background threads.
  absl::Status Start();
  void Stop();
  int port() const { return port_; }

 private:
  void Routes();
  void ScheduleLoop();

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
};

// The OpenAPI 3 document served at /api/v1/openapi.json.
const char* OpenApiDocument();

}  // namespace carve

#endif  // CARVE_RUNTIME_API_SERVER_H_
