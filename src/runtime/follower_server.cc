#include "runtime/follower_server.h"

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/api_http.h"
#include "runtime/api_socket.h"

namespace carve {

using json = nlohmann::json;

FollowerServer::FollowerServer(const std::string& tls_cert, const std::string& tls_key)
    : http_(NewApiHttpServer(tls_cert, tls_key)) {
  httplib::Server& s = *http_;
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}});
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    Reply(res, 503,
          {{"status", "not ready"},
           {"role", "follower"},
           {"leader", leader_},
           {"term", term_},
           {"reason", "a follower: it takes over when the leader's lease runs out"}});
  });
  auto elsewhere = [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leader_.empty()) res.set_header("X-Carve-Leader", leader_);
    Reply(res, 503,
          {{"error",
            {{"code", "unavailable"},
             {"message",
              leader_.empty()
                  ? std::string("this carve server is a follower and no server leads "
                                "right now; retry shortly")
                  : absl::StrCat("this carve server is a follower; the leader is ", leader_)}}},
           {"leader", leader_}});
  };
  s.Get(".*", elsewhere);
  s.Post(".*", elsewhere);
  s.Put(".*", elsewhere);
  s.Patch(".*", elsewhere);
  s.Delete(".*", elsewhere);
}

FollowerServer::~FollowerServer() { Stop(); }

absl::Status FollowerServer::Start(int fd) {
  if (!http_->is_valid()) return absl::InternalError("cannot set up the follower's TLS");
  AdoptListenSocket(*http_, fd);
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return absl::OkStatus();
}

void FollowerServer::SetLeader(const std::string& address, int64_t term) {
  std::lock_guard<std::mutex> lock(mu_);
  leader_ = address;
  term_ = term;
}

void FollowerServer::Stop() {
  if (!thread_.joinable()) return;
  http_->stop();
  thread_.join();
}

}  // namespace carve
