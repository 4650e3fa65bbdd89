#include "runtime/api_server.h"

#include <climits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/api_http.h"
#include "runtime/api_socket.h"
#include "runtime/log.h"
#include "runtime/states.h"
#include "runtime/version.h"

namespace carve {

using json = nlohmann::json;

ApiServer::ApiServer(ControlPlane* control, Options options)
    : control_(control),
      options_(std::move(options)),
      http_(NewApiHttpServer(options_.tls_cert, options_.tls_key)) {
  Harden();
  Routes();
}

ApiServer::~ApiServer() { Stop(); }

absl::Status ApiServer::Start() {
  if (!http_->is_valid()) {
    absl::Status st = CheckTlsFiles(options_.tls_cert, options_.tls_key);
    return st.ok() ? absl::InternalError("cannot set up TLS") : st;
  }
  int fd = options_.listen_fd;
  if (fd < 0) {
    auto bound = ListenExclusive(options_.host, options_.port);
    if (!bound.ok()) return bound.status();
    fd = *bound;
  }
  port_ = LocalPort(fd);
  AdoptListenSocket(*http_, fd);
  control_->StartNotifications();  // before the first request can ask for its status
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  schedule_thread_ = std::thread([this] { ScheduleLoop(); });
  LogInfo("API listening on ", options_.host, ":", port_,
          options_.tls_cert.empty() ? " (plain HTTP)" : " (HTTPS)", ", scheduling every ",
          options_.schedule_interval_ms, " ms");
  return absl::OkStatus();
}

void ApiServer::Stop() {
  control_->StopNotifications();  // not under mu_: a delivery in flight may take its timeout
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  control_->EndWaits();
  wake_.notify_all();
  http_->stop();
  if (http_thread_.joinable()) http_thread_.join();
  if (schedule_thread_.joinable()) schedule_thread_.join();
  if (port_ != 0) LogInfo("API on port ", port_, " stopped");
}

void ApiServer::Kick() {
  std::lock_guard<std::mutex> lock(mu_);
  kicked_ = true;
  wake_.notify_all();
}

void ApiServer::ScheduleLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto rested = std::chrono::steady_clock::now();
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(options_.schedule_interval_ms),
                   [this] { return stopping_ || kicked_; });
    // Kicks arriving while cycles run back to back (a burst of submissions or ends): rest as long
    // as the last cycle took first, so cycles take at most half a core from the API, and what
    // the rest gathers is decided in one cycle.
    wake_.wait_until(lock, rested, [this] { return stopping_; });
    if (stopping_) break;
    kicked_ = false;
    lock.unlock();
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<int> scheduled = control_->ScheduleOnce();
    if (scheduled.ok()) control_->SignalNodes();  // agents waiting for work hear of it now
    int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    cycles_ += 1;
    cycle_us_total_ += us;
    cycle_us_last_ = us;
    cycle_seconds_.Observe(us);
    absl::Status accrued = control_->AccrueUtilization();
    ReportCycle(scheduled, accrued, us);
    rested = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    lock.lock();
  }
}

void ApiServer::ReportCycle(const absl::StatusOr<int>& scheduled, const absl::Status& accrued,
                            int64_t us) {
  if (scheduled.ok()) LogTrace("scheduling cycle: ", *scheduled, " jobs scheduled in ", us, " us");
  // Each distinct error once. A failed commit was logged where it happened, and fails every
  // cycle after it the same way.
  absl::Status error = !scheduled.ok() ? scheduled.status() : accrued;
  if (!error.ok() && !control_->Ready().ok()) return;
  std::string what = !scheduled.ok() ? "the scheduling cycle" : "utilization accounting";
  std::string text = error.ok() ? "" : absl::StrCat(what, " failed: ", error.message());
  if (text == last_cycle_error_) return;
  if (error.ok()) {
    LogInfo("scheduling cycles succeed again");
  } else {
    LogError(text);
  }
  last_cycle_error_ = text;
}

std::optional<Principal> ApiServer::Authed(const httplib::Request& req, httplib::Response& res,
                                           Verb verb) {
  // The header exactly as sent (api_socket.cc): one value, "Bearer " and the token's bytes.
  std::string token;
  if (req.headers.count("Authorization") == 1) {
    const std::string& header = req.headers.find("Authorization")->second;
    if (absl::StartsWith(header, "Bearer ")) token = header.substr(7);
  }
  ControlPlane::SetActing(std::nullopt);
  // After a failed commit memory is ahead of the store: no answer may show or change it.
  if (absl::Status ready = control_->Ready(); !ready.ok()) {
    ReplyError(res, ready);
    return std::nullopt;
  }
  auto who = control_->Authenticate(token);
  if (!who.ok()) {
    ReplyError(res, who.status());
    return std::nullopt;
  }
  if (absl::Status allowed = Authorize(*who, verb); !allowed.ok()) {
    ReplyError(res, allowed);
    return std::nullopt;
  }
  if (absl::Status st = Admit(*who); !st.ok()) {
    ReplyError(res, st);
    return std::nullopt;
  }
  ControlPlane::SetActing(*who);  // the events this request causes name the credential
  return *who;
}

namespace {

// A JSON integer read whole, never truncated to an int (4294967298 replicas was taken as 2).
bool FitsInt(const nlohmann::json& v) {
  return v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT_MAX)
                                : v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX;
}

absl::Status TooManyReplicas(const nlohmann::json& v) {
  return absl::InvalidArgumentError(
      absl::StrCat("replicas: ", v.dump(), " is not between 1 and 1000"));
}

// How many log bytes one GET /logs returns: `limit`, 1 MiB by default, at most 16 MiB (a reader
// pages through a longer log by offset; the server never holds a whole log in memory).
constexpr int64_t kLogPage = int64_t{1} << 20;
constexpr int64_t kMaxLogPage = int64_t{16} << 20;

absl::StatusOr<int64_t> LogLimitParam(const httplib::Request& req) {
  auto limit = NonNegativeParam(req, "limit", kLogPage);
  if (limit.ok() && *limit > kMaxLogPage) {
    return absl::InvalidArgumentError(absl::StrCat("limit: ", *limit, " is more than ", kMaxLogPage,
                                                   " bytes (16 MiB) per request"));
  }
  return limit;
}

// POST /api/v1/jobs/cancel's body: the ids and the filter.
absl::StatusOr<std::pair<std::vector<int64_t>, std::optional<JobFilter>>> CancelSelection(
    const httplib::Request& req) {
  auto body = Body(req);
  if (!body.ok()) return body.status();
  if (!body->is_object()) {
    return absl::InvalidArgumentError("the body must be an object: {ids: [...], filter: {...}}");
  }
  for (const auto& [key, value] : body->items()) {
    if (key != "ids" && key != "filter") {
      return absl::InvalidArgumentError(absl::StrCat(key, ": not a field (ids, filter)"));
    }
  }
  std::vector<int64_t> ids;
  const json list = body->value("ids", json::array());
  if (!list.is_array()) return absl::InvalidArgumentError("ids: must be a list of job ids");
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("ids: ", id.dump(), " is not a job id"));
    }
    ids.push_back(id.get<int64_t>());
  }
  std::optional<JobFilter> filter;
  if (body->contains("filter")) {
    auto f = JobFilter::FromJson((*body)["filter"]);
    if (!f.ok()) return f.status();
    if (f->empty()) {
      return absl::InvalidArgumentError(
          "filter: empty; name what to cancel (queue, state, name, user, ...)");
    }
    filter = *f;
  }
  if (ids.empty() && !filter) {
    return absl::InvalidArgumentError("name the jobs to cancel: ids and/or a filter");
  }
  if (ids.size() > 10000) return absl::InvalidArgumentError("ids: at most 10000 at once");
  return std::pair{std::move(ids), std::move(filter)};
}

}  // namespace

void ApiServer::Routes() {
  httplib::Server& s = *http_;
  auto authed = [this](const httplib::Request& req, httplib::Response& res, Verb verb) {
    return Authed(req, res, verb);
  };
  auto respond = [](httplib::Response& res, const absl::StatusOr<json>& r, int ok = 200) {
    Respond(res, r, ok);
  };
  // A job the caller may not see answers exactly like a job that does not exist.
  auto job_access = [this](const httplib::Request& req, httplib::Response& res,
                           const Principal& who, Access access) -> std::optional<int64_t> {
    auto id = IdParam(req);
    absl::Status s = id.ok() ? control_->CheckJob(*id, who, access) : id.status();
    if (!s.ok()) {
      ReplyError(res, s);
      return std::nullopt;
    }
    return *id;
  };
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, {{"status", "ok"}});
  });
  // The server's version (agents report theirs at registration: GET /api/v1/nodes).
  s.Get("/api/v1/version", [=](const httplib::Request& req, httplib::Response& res) {
    if (!authed(req, res, Verb::kRead)) return;
    Reply(res, 200, {{"version", CarveVersion()}, {"kernel", KernelVersion()}});
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    absl::Status ready = control_->Ready();
    json body = ready.ok() ? json{{"status", "ready"}}
                           : json{{"status", "not ready"}, {"reason", ready.message()}};
    if (!options_.role.empty()) {
      body["role"] = options_.role;
      body["term"] = options_.term;
    }
    Reply(res, ready.ok() ? 200 : 503, body);
  });
  s.Get("/api/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(OpenApiDocument(), "application/json");
  });
  s.Post("/api/v1/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kWrite);
    if (!who) return;
    auto body = Body(req);
    if (!body.ok()) return ReplyError(res, body.status());
    if (absl::Status st = control_->AuthorizeSubmit(*body, *who); !st.ok()) {
      return ReplyError(res, st);
    }
    auto r = control_->Submit(*body, req.get_header_value("Idempotency-Key"), *who,
                              req.get_param_value("allow_unschedulable") == "true");
    if (r.ok()) Kick();
    respond(res, r, 201);
  });
  // Several jobs in one commit: {ids: [..]} and/or {filter: {queue, state, name, ...}}.
  s.Post("/api/v1/jobs/cancel", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kWrite);
    if (!who) return;
    auto selection = CancelSelection(req);
    if (!selection.ok()) return ReplyError(res, selection.status());
    auto r = control_->CancelMany(selection->first, selection->second, *who);
    if (r.ok()) control_->SignalNodes();  // agents stop the placed ones now
    respond(res, r);
  });
  s.Get("/api/v1/jobs", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (who) ListJobs(req, res, *who);
  });
  s.Get(R"(/api/v1/jobs/(\d+))", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    auto id = job_access(req, res, *who, Access::kRead);
    if (id) respond(res, ForReader(control_->GetJob(*id), *who));
  });
  s.Get(R"(/api/v1/jobs/(\d+)/explain)",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          auto who = authed(req, res, Verb::kRead);
          if (!who) return;
          auto id = job_access(req, res, *who, Access::kRead);
          if (id) respond(res, ForReader(control_->Explain(*id), *who));
        });
  s.Post(R"(/api/v1/jobs/(\d+)/cancel)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kWrite);
           if (!who) return;
           auto id = job_access(req, res, *who, Access::kWrite);
           if (!id) return;
           auto cancelled = control_->Cancel(*id, *who);
           if (cancelled.ok()) control_->SignalNodes();  // its agents stop it now
           respond(res, cancelled);
         });
  s.Post(R"(/api/v1/jobs/(\d+)/renew)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kWrite);
           if (!who) return;
           auto id = job_access(req, res, *who, Access::kWrite);
           if (id) respond(res, control_->Renew(*id, *who));
         });
  s.Post(R"(/api/v1/jobs/(\d+)/scale)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kWrite);
           if (!who) return;
           auto id = job_access(req, res, *who, Access::kWrite);
           if (!id) return;
           auto body = Body(req);
           if (!body.ok()) {
             ReplyError(res, body.status());
             return;
           }
           // A reference into the body, never a copy of it (a copy of a deep body recursed).
           auto count = body->is_object() ? body->find("replicas") : body->end();
           if (count == body->end() || !count->is_number_integer()) {
             ReplyError(res, absl::InvalidArgumentError("expected {\"replicas\": N}"));
             return;
           }
           if (!FitsInt(*count)) return ReplyError(res, TooManyReplicas(*count));
           respond(res, control_->Scale(*id, count->get<int>(), *who));
         });
  s.Get(R"(/api/v1/jobs/(\d+)/logs)",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          auto who = authed(req, res, Verb::kRead);
          if (!who) return;
          auto id = job_access(req, res, *who, Access::kRead);
          if (!id) return;
          auto offset = NonNegativeParam(req, "offset", 0);
          auto replica = NonNegativeParam(req, "replica", 0);
          auto limit = LogLimitParam(req);
          if (!offset.ok()) return ReplyError(res, offset.status());
          if (!replica.ok()) return ReplyError(res, replica.status());
          if (!limit.ok()) return ReplyError(res, limit.status());
          int64_t size = 0;
          auto data = control_->ReadLog(*id, static_cast<int>(std::min<int64_t>(*replica, 1 << 20)),
                                        *offset, *limit, &size);
          if (!data.ok()) return ReplyError(res, data.status());
          res.set_header("X-Carve-Log-Size", std::to_string(size));
          res.set_content(*data, "text/plain");
        });
  s.Get("/api/v1/nodes", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    json nodes = control_->ListNodes();
    if (req.has_param("pool")) {  // the nodes of one pool (`carve nodes --pool P`)
      const std::string pool = req.get_param_value("pool");
      json of = json::array();
      for (json& n : nodes) {
        if (n.value("pool", "") == pool) of.push_back(std::move(n));
      }
      nodes = std::move(of);
    }
    Reply(res, 200, VisibleNodes(nodes, *who));
  });
  s.Post("/api/v1/apply", [=, this](const httplib::Request& req, httplib::Response& res) {
    // Admins apply anything; a tenant-admin its own tenant's notifications (Apply decides).
    auto who = authed(req, res, Verb::kWrite);
    if (!who) return;
    auto body = Body(req);
    respond(res, body.ok() ? control_->Apply(*body, *who) : absl::StatusOr<json>(body.status()));
  });
  s.Get(R"(/api/v1/(tenants|projects|queues|pools|notifications|prices|reservations))",
        [=, this](const httplib::Request& req, httplib::Response& res) {
          auto who = authed(req, res, Verb::kRead);
          if (!who) return;
          std::string kind = req.matches[1].str();
          kind.pop_back();
          // A webhook's URL may itself be a credential (chat webhooks): admins and the
          // tenant's tenant-admins only.
          if (kind == "notification" && who->role != Role::kAdmin &&
              who->role != Role::kTenantAdmin) {
            return ReplyError(res, absl::PermissionDeniedError(
                                       "notifications are listed to admins and tenant-admins"));
          }
          Reply(res, 200, VisibleObjects(kind, control_->ListObjects(kind), *who));
        });
  // Queues: quota, used, borrowed, lent and pending per queue (control_plane_queues.cc).
  s.Get("/api/v1/queues/status", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    Reply(res, 200, control_->QueueStatus(*who));
  });
  // Their quota, use, borrowing and lending over time (queue_history.h).
  s.Get("/api/v1/queues/history", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    auto step = NonNegativeParam(req, "step_us", 0);
    if (!step.ok()) return ReplyError(res, step.status());
    auto window = WindowParams(req);
    if (!window.ok()) return ReplyError(res, window.status());
    Respond(res, control_->QueueHistory(window->since_us, window->until_us, *step, *who));
  });
  s.Post(R"(/api/v1/nodes/([^/]+)/(cordon|uncordon|drain))",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kOperate);
           if (!who) return;
           auto gpu = IntParam(req, "gpu", -1);
           if (!gpu.ok()) return ReplyError(res, gpu.status());
           respond(res, control_->Cordon(req.matches[1].str(), req.matches[2].str(),
                                         static_cast<int>(*gpu), *who));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/credential/revoke)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kOperate);
           if (who) respond(res, control_->RevokeNodeCredential(req.matches[1].str(), *who));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/dead)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kOperate);
           if (!who) return;
           respond(res, control_->DeclareDead(req.matches[1].str(), *who));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/maintenance)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kOperate);
           if (!who) return;
           auto body = Body(req);
           respond(res, body.ok() ? control_->Maintenance(req.matches[1].str(), *body, *who)
                                  : absl::StatusOr<json>(body.status()));
         });
  s.Post(R"(/api/v1/nodes/([^/]+)/gpus/(\d+)/layout)",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           auto who = authed(req, res, Verb::kOperate);
           if (!who) return;
           auto body = Body(req);
           int gpu = std::atoi(req.matches[2].str().c_str());
           respond(res, body.ok() ? control_->Relayout(req.matches[1].str(), gpu, *body, *who)
                                  : absl::StatusOr<json>(body.status()));
         });
  s.Get(R"(/api/v1/events/(\d+))", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    auto seq = IdParam(req);
    auto event = seq.ok() ? control_->audit().Event(*seq) : absl::StatusOr<json>(seq.status());
    if (event.ok() && !SeesEvent(*who, (*event)["details"])) {
      event = absl::NotFoundError(absl::StrCat("no event ", *seq, "; `carve events` lists them"));
    }
    respond(res, event);
  });
  s.Get("/api/v1/events", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kRead);
    if (!who) return;
    auto after = NonNegativeParam(req, "after", 0);
    if (!after.ok()) return ReplyError(res, after.status());
    auto limit = NonNegativeParam(req, "limit", 1000);
    if (!limit.ok()) return ReplyError(res, limit.status());
    auto events = control_->audit().Events(*after, *limit);
    if (!events.ok()) return ReplyError(res, events.status());
    // The page is read, then narrowed (what `who` may see, then ?job=&type=&since_us=): the
    // header says how far it read, so a reader goes on from there and not from its last match.
    if (!events->empty()) {
      res.set_header("X-Carve-Scanned-To", events->back().value("seq", json(0)).dump());
    }
    res.set_header("X-Carve-Scanned", std::to_string(events->size()));
    json out = json::array();
    auto job = NonNegativeParam(req, "job", 0);
    auto since = NonNegativeParam(req, "since_us", 0);
    if (!job.ok()) return ReplyError(res, job.status());
    if (!since.ok()) return ReplyError(res, since.status());
    const std::string subject = *job > 0 ? absl::StrCat("job/", *job) : "";
    const std::string type = req.get_param_value("type");
    for (json& e : VisibleEvents(*events, *who)) {
      if (!subject.empty() && e.value("subject", "") != subject) continue;
      if (!absl::StartsWith(e.value("type", ""), type)) continue;
      if (e.value("time_us", int64_t{0}) < *since) continue;
      out.push_back(std::move(e));
    }
    Reply(res, 200, out);
  });
  s.Post("/api/v1/agents/register", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kJoin);
    if (!who) return;
    auto body = Body(req);
    respond(res, body.ok() ? control_->Register(*body, *who) : absl::StatusOr<json>(body.status()));
  });
  s.Post("/api/v1/agents/heartbeat",
         [=, this](const httplib::Request& req, httplib::Response& res) {
           const auto began = std::chrono::steady_clock::now();
           auto who = authed(req, res, Verb::kNodeCall);
           if (!who) return;
           // Decoded once, here: the control plane takes the typed heartbeat.
           auto body = Body(req);
           absl::StatusOr<HeartbeatRequest> beat =
               body.ok() ? HeartbeatRequest::FromJson(*body) : body.status();
           absl::StatusOr<HeartbeatAnswer> answer =
               beat.ok() ? control_->Heartbeat(*beat, *who) : beat.status();
           if (answer.ok() && beat->ReportsAnEnd()) Kick();  // its GPUs are free: reuse them now
           respond(res, answer.ok() ? absl::StatusOr<json>(answer->ToJson()) : answer.status());
           heartbeat_seconds_.Observe(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now() - began)
                                          .count());
         });
  // Work pushed to agents: the answer comes when the node's work version passes `after`, or
  // after timeout_ms (at most 30 s). A quarter of the workers at most wait; beyond that, 429.
  s.Get("/api/v1/agents/wait", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kNodeCall);
    if (!who) return;
    auto after = NonNegativeParam(req, "after", 0);
    if (!after.ok()) return ReplyError(res, after.status());
    auto timeout = NonNegativeParam(req, "timeout_ms", 10000);
    if (!timeout.ok()) return ReplyError(res, timeout.status());
    auto version = control_->WaitForWork(req.get_param_value("node"), *after,
                                         std::min<int64_t>(*timeout, 30000),
                                         std::max(1, options_.threads / 4), *who);
    if (absl::IsResourceExhausted(version.status())) {
      res.set_header("Retry-After", std::to_string(kWaitRefusedRetryMs / 1000));
    }
    if (!version.ok()) return ReplyError(res, version.status());
    Reply(res, 200, {{"version", *version}});
  });
  s.Post("/api/v1/agents/logs", [=, this](const httplib::Request& req, httplib::Response& res) {
    auto who = authed(req, res, Verb::kNodeCall);
    if (!who) return;
    auto offset = NonNegativeParam(req, "offset", 0);
    if (!offset.ok()) return ReplyError(res, offset.status());
    auto job = IntParam(req, "job", -1);
    if (!job.ok()) return ReplyError(res, job.status());
    auto replica = IntParam(req, "replica", -1);
    if (!replica.ok()) return ReplyError(res, replica.status());
    absl::Status st =
        control_->AppendLog(*job, static_cast<int>(*replica), *offset, req.body, *who);
    if (!st.ok()) return ReplyError(res, st);
    Reply(res, 200, {{"ok", true}});
  });
  TenancyRoutes();
  UiRoutes();
  s.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    // cpp-httplib refuses form-encoded bodies over 8 KiB with its own 413: the API takes no form
    // bodies at all (Body), whatever their size, and says so.
    if (res.status == 413 && IsFormBody(req)) {
      ReplyError(res, FormBodyError());
    } else if (res.status == 413) {
      ReplyError(res,
                 absl::InvalidArgumentError(absl::StrCat("the request body is too large (at most ",
                                                         options_.max_body_bytes, " bytes)")));
      res.status = 413;
    }
    if (res.status == 404 && res.body.empty()) {
      ReplyError(res, absl::NotFoundError(absl::StrCat("no route ", req.method, " ", req.path,
                                                       "; see /api/v1/openapi.json")));
    }
    if (res.status >= 400 && res.body.empty()) {  // cpp-httplib's own refusals carry no body
      const int status = res.status;
      Reply(res, status,
            {{"error",
              {{"code", "http_" + std::to_string(status)},
               {"message", absl::StrCat("the server refused ", req.method, " ", req.path, " (HTTP ",
                                        status, "); see /api/v1/openapi.json")}}}});
    }
  });
}

// GET /api/v1/jobs[?all=true][&after=ID][&limit=N]: with `limit`, one page and a Link header to
// the next; without, the whole list as one JSON array, streamed page by page (a list of every job
// ever run is never in the server's memory at once).
void ApiServer::ListJobs(const httplib::Request& req, httplib::Response& res,
                         const Principal& who) {
  constexpr int64_t kMaxPage = 10000;
  const bool all = req.get_param_value("all") == "true";
  auto filter = JobFilter::FromParams([&](const char* key) -> std::optional<std::string> {
    if (!req.has_param(key)) return std::nullopt;
    return req.get_param_value(key);
  });
  if (!filter.ok()) return ReplyError(res, filter.status());
  auto after = NonNegativeParam(req, "after", 0);
  if (!after.ok()) return ReplyError(res, after.status());
  int64_t limit = 0;
  if (req.has_param("limit") &&
      (!absl::SimpleAtoi(req.get_param_value("limit"), &limit) || limit < 1 || limit > kMaxPage)) {
    return ReplyError(res, absl::InvalidArgumentError(
                               absl::StrCat("limit must be a number from 1 to ", kMaxPage)));
  }
  int64_t next = 0;
  auto first = control_->JobsPage(all, *filter, who, *after, limit > 0 ? limit : 1000, &next);
  if (!first.ok()) return ReplyError(res, first.status());
  if (limit > 0 && next != 0) {
    std::string query;  // the filters of this request, for the next page
    std::vector<std::string> keys = JobFilter::TextKeys();
    keys.insert(keys.end(), {"state", "since"});
    for (const std::string& key : keys) {
      if (!req.has_param(key)) continue;
      absl::StrAppend(&query, key, "=",
                      httplib::detail::encode_query_param(req.get_param_value(key)), "&");
    }
    res.set_header("Link", absl::StrCat("</api/v1/jobs?", all ? "all=true&" : "", query,
                                        "after=", next, "&limit=", limit, ">; rel=\"next\""));
  }
  if (limit > 0 || next == 0) return Reply(res, 200, *first);
  // One JSON array: its elements joined by ",\n" across pages.
  auto page = [](const json& jobs, bool first_page) {
    std::string text;
    for (const json& j : jobs)
      absl::StrAppend(&text, first_page && text.empty() ? "" : ",\n", j.dump());
    return text;
  };
  StreamPages(
      res, "application/json", "[\n" + page(*first, true), next,
      [this, all, filter = *filter, who, page](int64_t after,
                                               int64_t* more) -> absl::StatusOr<std::string> {
        auto jobs = control_->JobsPage(all, filter, who, after, 1000, more);
        if (!jobs.ok()) return jobs.status();
        return page(*jobs, false);
      },
      "\n]\n");
}

}  // namespace carve
