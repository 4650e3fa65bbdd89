// A webhook receiver for the tests of notifications (kind: notification): an HTTP server on a
// free port of 127.0.0.1 in the test's process that keeps what it was sent.
#ifndef CARVE_TESTS_INTEGRATION_WEBHOOK_RECEIVER_H_
#define CARVE_TESTS_INTEGRATION_WEBHOOK_RECEIVER_H_

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace carve::it {

struct Delivery {
  nlohmann::json body;
  std::string signature;
  std::string event;
};

// A webhook receiver on a free port of 127.0.0.1; answers 500 while `failing` is above zero.
class Receiver {
 public:
  Receiver() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      if (trickle_) {
        // The attack: 200 and then a body a byte at a time, for as long as the client reads.
        res.set_chunked_content_provider(
            "application/json", [this](size_t, httplib::DataSink& sink) {
              std::this_thread::sleep_for(std::chrono::milliseconds(200));
              return !stopping_ && sink.write(" ", 1);
            });
        return;
      }
      if (failing_ > 0) {
        --failing_;
        res.status = 500;
        return;
      }
      got_.push_back({nlohmann::json::parse(req.body, nullptr, false),
                      req.get_header_value("X-Carve-Signature"),
                      req.get_header_value("X-Carve-Event")});
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Receiver() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }
  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/hook"); }
  void Trickle() {
    std::lock_guard<std::mutex> lock(mu_);
    trickle_ = true;
  }
  void Fail(int times) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = times;
  }
  std::vector<Delivery> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }
  // The delivery of `type` about `subject`, if one came.
  std::optional<Delivery> Find(const std::string& type, const std::string& subject) {
    for (const Delivery& d : got()) {
      if (d.body.value("type", "") == type && d.body.value("subject", "") == subject) return d;
    }
    return std::nullopt;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int failing_ = 0;
  bool trickle_ = false;
  std::atomic<bool> stopping_ = false;
  std::vector<Delivery> got_;
};

}  // namespace carve::it

#endif  // CARVE_TESTS_INTEGRATION_WEBHOOK_RECEIVER_H_
