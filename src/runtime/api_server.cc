#include "runtime/api_server.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace carve {

using json = nlohmann::json;

namespace {

int HttpStatus(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

std::string CodeName(const absl::Status& s) {
  std::string name = absl::StatusCodeToString(s.code());
  for (char& c : name) c = c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return name;
}

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2) + "\n", "application/json");
}

void ReplyError(httplib::Response& res, const absl::Status& s) {
  Reply(res, HttpStatus(s), {{"error", {{"code", CodeName(s)}, {"message", s.message()}}}});
}

absl::StatusOr<json> Body(const httplib::Request& req) {
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("the body is not valid JSON");
  }
  return j;
}

absl::StatusOr<int64_t> IdParam(const httplib::Request& req) {
  int64_t id;
  if (!absl::SimpleAtoi(req.matches[1].str(), &id)) {
    return absl::InvalidArgumentError("the job id must be a number");
  }
  return id;
}

int64_t IntParam(const httplib::Request& req, const char* name, int64_t fallback) {
  int64_t v;
  if (req.has_param(name) && absl::SimpleAtoi(req.get_param_value(name), &v)) return v;
  return fallback;
}

}  // namespace

ApiServer::ApiServer(ControlPlane* control, Options options)
    : control_(control), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  Routes();
}

ApiServer::~ApiServer() { Stop(); }

absl::Status ApiServer::Start() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":",
                                               options_.port, " (in use? try --listen)"));
  }
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  schedule_thread_ = std::thread([this] { ScheduleLoop(); });
  return absl::OkStatus();
}

void ApiServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (schedule_thread_.joinable()) schedule_thread_.join();
}

void ApiServer::ScheduleLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.schedule_interval_ms),
                   [this] { return stopping_ || kicked_; });
    if (stopping_) break;
    kicked_ = false;
    lock.unlock();
    (void)control_->ScheduleOnce();
    lock.lock();
  }
}

void ApiServer::Routes() {
  httplib::Server& s = *http_;
  auto authed = [this](const httplib::Request& req, httplib::Response& res,
                       const char* role) -> std::optional<Principal> {
    std::string header = req.get_header_value("Authorization");
    std::string token = absl::StartsWith(header, "Bearer ") ? header.substr(7) : "";
    auto who = control_->Authenticate(token);
    if (!who.ok()) {
      ReplyError(res, who.status());
      return std::nullopt;
    }
    if (role != nullptr && who->role != role && who->role != "admin") {
      ReplyError(res,
                 absl::PermissionDeniedError(absl::StrCat("this call needs the ", role, " role")));
      return std::nullopt;
    }
    return *who;
  };
  auto respond = [](httplib::Response& res, const absl::StatusOr<json>& r, int ok = 200) {
    if (r.ok()) {
      Reply(res, ok, *r);
    } else {
      ReplyError(res, r.status());
    }
  };

  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}});
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    bool ok = control_->healthy();
    Reply(res, ok ? 200 : 503, {{"status", ok ? "ready" : "store failed; restart"}});
  });
  s.Get("/api/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(OpenApiDocument(), "application/json");
  });
  s.Post("/api/v1/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, "user");
    if (!who) return;
    auto body = Body(req);
    if (!body.ok()) return ReplyError(res, body.status());
    auto r = control_->Submit(*body, req.get_header_value("Idempotency-Key"), *who);
    if (r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      kicked_ = true;
      wake_.notify_all();
    }
    respond(res, r, 201);
  });
  s.Get("/api/v1/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    Reply(res, 200, control_->ListJobs(req.get_param_value("all") == "true"));
  });
  s.Get(R"(/api/v1/jobs/(\d+))", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    auto id = IdParam(req);
    respond(res, id.ok() ? control_->GetJob(*id) : absl::StatusOr<json>(id.status()));
  });
  s.Get(R"(/api/v1/jobs/(\d+)/explain)",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          if (!authed(req, res, "user")) return;
          auto id = IdParam(req);
          respond(res, id.ok() ? control_->Explain(*id) : absl::StatusOr<json>(id.status()));
        });
  s.Post(R"(/api/v1/jobs/(\d+)/cancel)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           auto id = IdParam(req);
           respond(res, id.ok() ? control_->Cancel(*id, *who) : absl::StatusOr<json>(id.status()));
         });
  s.Post(R"(/api/v1/jobs/(\d+)/renew)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           auto id = IdParam(req);
           respond(res, id.ok() ? control_->Renew(*id, *who) : absl::StatusOr<json>(id.status()));
         });
  s.Post(R"(/api/v1/jobs/(\d+)/scale)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           auto id = IdParam(req);
           auto body = Body(req);
           if (!id.ok() || !body.ok()) {
             ReplyError(res, !id.ok() ? id.status() : body.status());
             return;
           }
           const json count = body->is_object() ? body->value("replicas", json()) : json();
           if (!count.is_number_integer()) {
             ReplyError(res, absl::InvalidArgumentError("expected {\"replicas\": N}"));
             return;
           }
           respond(res, control_->Scale(*id, count.get<int>(), *who));
         });
  s.Get(R"(/api/v1/jobs/(\d+)/logs)",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          if (!authed(req, res, "user")) return;
          auto id = IdParam(req);
          if (!id.ok()) return ReplyError(res, id.status());
          int64_t size = 0;
          auto data = control_->ReadLog(*id, static_cast<int>(IntParam(req, "replica", 0)),
                                        IntParam(req, "offset", 0), &size);
          if (!data.ok()) return ReplyError(res, data.status());
          res.set_header("X-Carve-Log-Size", std::to_string(size));
          res.set_content(*data, "text/plain");
        });
  s.Get("/api/v1/nodes", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    Reply(res, 200, control_->ListNodes());
  });
  s.Post("/api/v1/apply", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, "user");
    if (!who) return;
    auto body = Body(req);
    respond(res, body.ok() ? control_->Apply(*body, *who) : absl::StatusOr<json>(body.status()));
  });
  s.Get(R"(/api/v1/(tenants|projects|queues))",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          if (!authed(req, res, "user")) return;
          std::string kind = req.matches[1].str();
          Reply(res, 200, control_->ListObjects(kind.substr(0, kind.size() - 1)));
        });
  // Queues: quota, used, borrowed, lent and pending per queue (control_plane_queues.cc).
  s.Get("/api/v1/queues/status", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    Reply(res, 200, control_->QueueStatus());
  });
  s.Post(R"(/api/v1/nodes/([^/]+)/(cordon|uncordon|drain))",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           respond(res, control_->Cordon(req.matches[1].str(), req.matches[2].str(),
                                         static_cast<int>(IntParam(req, "gpu", -1)), *who));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/dead)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           respond(res, control_->DeclareDead(req.matches[1].str(), *who));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/maintenance)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           auto body = Body(req);
           respond(res, body.ok() ? control_->Maintenance(req.matches[1].str(), *body, *who)
                                  : absl::StatusOr<json>(body.status()));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/gpus/(\d+)/layout)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, "user");
           if (!who) return;
           auto body = Body(req);
           int gpu = std::atoi(req.matches[2].str().c_str());
           respond(res, body.ok() ? control_->Relayout(req.matches[1].str(), gpu, *body, *who)
                                  : absl::StatusOr<json>(body.status()));
         });
  s.Get(R"(/api/v1/events/(\d+))", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    auto seq = IdParam(req);
    respond(res, seq.ok() ? control_->Event(*seq) : absl::StatusOr<json>(seq.status()));
  });
  s.Get("/api/v1/events", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "user")) return;
    Reply(res, 200, control_->Events(IntParam(req, "after", 0), IntParam(req, "limit", 1000)));
  });
  s.Post("/api/v1/agents/register", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, "agent");
    if (!who) return;
    auto body = Body(req);
    respond(res, body.ok() ? control_->Register(*body, *who) : absl::StatusOr<json>(body.status()));
  });
  s.Post(
      "/api/v1/agents/heartbeat", [=, this](const httplib::Request& req, httplib::Response& res) {
        auto who = authed(req, res, "agent");
        if (!who) return;
        auto body = Body(req);
        respond(res,
                body.ok() ? control_->Heartbeat(*body, *who) : absl::StatusOr<json>(body.status()));
      });
  s.Post("/api/v1/agents/logs", [=, this](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, "agent")) return;
    absl::Status st = control_->AppendLog(IntParam(req, "job", -1),
                                          static_cast<int>(IntParam(req, "replica", -1)),
                                          IntParam(req, "offset", 0), req.body);
    if (!st.ok()) return ReplyError(res, st);
    Reply(res, 200, {{"ok", true}});
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      ReplyError(res, absl::NotFoundError(absl::StrCat("no route ", req.method, " ", req.path,
                                                       "; see /api/v1/openapi.json")));
    }
  });
}

}  // namespace carve
