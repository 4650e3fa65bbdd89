// REST routes for tenancy (users, tokens), audit, usage, utilization, /metrics and kept
// acceptance reports.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "httplib.h"
#include "runtime/api_http.h"
#include "runtime/api_server.h"
#include "runtime/cost.h"
#include "runtime/csv.h"
#include "runtime/poc/poc.h"

namespace carve {

using json = nlohmann::json;

namespace {

// Records as JSON lines or CSV (with a header); `header` is true for the first page.
std::string Format(const json& records, const std::string& format,
                   const std::vector<std::string>& columns, bool header) {
  std::string out;
  if (format == "csv" && header) out = absl::StrJoin(columns, ",") + "\n";
  for (const json& r : records) out += format == "csv" ? CsvRow(r, columns) : r.dump() + "\n";
  return out;
}

absl::Status CheckFormat(const std::string& format) {
  if (format == "jsonl" || format == "csv" || format == "json") return absl::OkStatus();
  return absl::InvalidArgumentError("format: \"" + format + "\" is not jsonl, csv or json");
}

const std::vector<std::string> kAuditColumns = {"seq",    "time",   "actor",  "tenant",  "project",
                                                "action", "target", "reason", "details", "hash"};
const std::vector<std::string> kUsageColumns = {"job",
                                                "attempt",
                                                "user",
                                                "tenant",
                                                "project",
                                                "queue",
                                                "kind",
                                                "mode",
                                                "replicas",
                                                "devices",
                                                "nodes",
                                                "queued_us",
                                                "started_us",
                                                "held_from_us",
                                                "held_to_us",
                                                "ended_us",
                                                "end",
                                                "end_reason",
                                                "gpu_seconds",
                                                "cpu_core_seconds",
                                                "memory_gib_seconds",
                                                "cpu_seconds_used",
                                                "peak_memory_mib",
                                                "device_busy_seconds",
                                                "peak_device_memory_mib"};

}  // namespace

void ApiServer::TenancyRoutes() {
  httplib::Server& s = *http_;
  // A route for people that does `verb`.
  auto user_call = [this](Verb verb, auto fn) {
    return [this, verb, fn](const httplib::Request& req, httplib::Response& res) {
      auto who = Authed(req, res, verb);
      if (who) fn(req, res, *who);
    };
  };
  s.Get("/api/v1/whoami", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authed(req, res, Verb::kRead);
    if (!who) return;
    Reply(res, 200,
          {{"name", who->name},
           {"role", Name(who->role)},
           {"tenant", who->tenant},
           {"project", who->project},
           {"token", who->token_id}});
  });
  s.Post("/api/v1/users",
         user_call(Verb::kWrite, [this](const auto& req, auto& res, const Principal& who) {
           auto body = Body(req);
           Respond(res, body.ok() ? control_->CreateUser(*body, who) : body.status(), 201);
         }));
  s.Get("/api/v1/users",
        user_call(Verb::kRead, [this](const auto&, auto& res, const Principal& who) {
          Reply(res, 200, control_->ListUsers(who));
        }));
  s.Post(R"(/api/v1/users/([^/]+)/remove)",
         user_call(Verb::kWrite, [this](const auto& req, auto& res, const Principal& who) {
           Respond(res, control_->RemoveUser(req.matches[1].str(), who));
         }));
  s.Post("/api/v1/tokens",
         user_call(Verb::kWrite, [this](const auto& req, auto& res, const Principal& who) {
           auto body = Body(req);
           Respond(res, body.ok() ? control_->CreateToken(*body, who) : body.status(), 201);
         }));
  s.Get("/api/v1/tokens",
        user_call(Verb::kRead, [this](const auto&, auto& res, const Principal& who) {
          Reply(res, 200, control_->ListTokens(who));
        }));
  s.Post(R"(/api/v1/tokens/([^/]+)/revoke)",
         user_call(Verb::kWrite, [this](const auto& req, auto& res, const Principal& who) {
           Respond(res, control_->RevokeToken(req.matches[1].str(), who));
         }));
  s.Get("/api/v1/audit/verify", [this](const httplib::Request& req, httplib::Response& res) {
    if (Authed(req, res, Verb::kInspect)) Respond(res, control_->audit().Verify());
  });
  // `carve export all` (archive.h): a page of one kind's stored records, raw.
  s.Get(R"(/api/v1/export/([a-z._-]+))",
        user_call(Verb::kInspect, [this](const auto& req, auto& res, const Principal& who) {
          auto limit = NonNegativeParam(req, "limit", 1000);
          if (!limit.ok()) return ReplyError(res, limit.status());
          Respond(res, control_->ExportRecords(req.matches[1].str(), req.get_param_value("after"),
                                               *limit, who));
        }));
  s.Get("/api/v1/audit",
        user_call(Verb::kReport, [this](const auto& req, auto& res, const Principal& who) {
          std::string format = req.has_param("format") ? req.get_param_value("format") : "jsonl";
          if (absl::Status st = CheckFormat(format); !st.ok()) return ReplyError(res, st);
          auto window = WindowParams(req);
          if (!window.ok()) return ReplyError(res, window.status());
          AuditLog::Query q{req.get_param_value("tenant"), window->since_us, window->until_us};
          int64_t next = 0;
          auto first = control_->audit().AuditPage(q, who, 0, 1000, &next);
          if (!first.ok()) return ReplyError(res, first.status());
          if (format == "json" && next == 0) return Reply(res, 200, *first);
          StreamPages(
              res, format == "csv" ? "text/csv" : "application/x-ndjson",
              Format(*first, format, kAuditColumns, true), next,
              [this, q, who, format](int64_t after, int64_t* more) -> absl::StatusOr<std::string> {
                auto page = control_->audit().AuditPage(q, who, after, 1000, more);
                if (!page.ok()) return page.status();
                return Format(*page, format, kAuditColumns, false);
              });
        }));
  s.Get("/api/v1/usage",
        user_call(Verb::kRead, [this](const auto& req, auto& res, const Principal& who) {
          auto window = WindowParams(req);
          if (!window.ok()) return ReplyError(res, window.status());
          Respond(res, control_->Usage(req.has_param("by") ? req.get_param_value("by") : "tenant",
                                       window->since_us, window->until_us, who));
        }));
  s.Get("/api/v1/usage/records",
        user_call(Verb::kRead, [this](const auto& req, auto& res, const Principal& who) {
          std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
          if (absl::Status st = CheckFormat(format); !st.ok()) return ReplyError(res, st);
          auto window = WindowParams(req);
          if (!window.ok()) return ReplyError(res, window.status());
          json records = control_->UsageRecords(window->since_us, window->until_us, who);
          if (format == "json") return Reply(res, 200, records);
          res.set_content(Format(records, format, kUsageColumns, true),
                          format == "csv" ? "text/csv" : "application/x-ndjson");
        }));
  // Cost allocation (cost.h): usage priced, by owner; a tenant's invoice for a month.
  s.Get("/api/v1/cost",
        user_call(Verb::kRead, [this](const auto& req, auto& res, const Principal& who) {
          auto window = WindowParams(req);
          if (!window.ok()) return ReplyError(res, window.status());
          Respond(res, control_->Cost(req.has_param("by") ? req.get_param_value("by") : "tenant",
                                      window->since_us, window->until_us, who));
        }));
  s.Get("/api/v1/invoices",
        user_call(Verb::kRead, [this](const auto& req, auto& res, const Principal& who) {
          std::string format = req.has_param("format") ? req.get_param_value("format") : "json";
          if (absl::Status st = CheckFormat(format); !st.ok()) return ReplyError(res, st);
          auto invoice =
              control_->Invoice(req.get_param_value("tenant"), req.get_param_value("month"), who);
          if (!invoice.ok() || format == "json") return Respond(res, invoice);
          res.set_content(Format((*invoice)["lines"], format, InvoiceColumns(), true),
                          format == "csv" ? "text/csv" : "application/x-ndjson");
        }));
  s.Get("/api/v1/utilization", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authed(req, res, Verb::kInspect)) return;
    auto step = NonNegativeParam(req, "step_us", 0);
    if (!step.ok()) return ReplyError(res, step.status());
    auto window = WindowParams(req);
    if (!window.ok()) return ReplyError(res, window.status());
    Respond(res, control_->Utilization(window->since_us, window->until_us, *step));
  });
  PocReportRoutes();
  // Reservations: each one's phase, nodes and use now (admins: all; others: their tenant's).
  s.Get("/api/v1/reservations/status",
        user_call(Verb::kRead, [this](const auto&, auto& res, const Principal& who) {
          Reply(res, 200, control_->ListReservations(who));
        }));
  // Webhook notifications: what each delivers, and each event's attempts (notifier.h).
  s.Get("/api/v1/notifications/status",
        user_call(Verb::kRead, [this](const auto&, auto& res, const Principal& who) {
          Respond(res, control_->NotificationStatus(who));
        }));
  s.Get("/api/v1/notifications/deliveries",
        user_call(Verb::kRead, [this](const auto& req, auto& res, const Principal& who) {
          auto after = NonNegativeParam(req, "after", 0);
          auto limit = NonNegativeParam(req, "limit", 1000);
          if (!after.ok() || !limit.ok()) {
            return ReplyError(res, !after.ok() ? after.status() : limit.status());
          }
          Respond(res,
                  control_->NotificationDeliveries(req.get_param_value("name"), *after,
                                                   std::clamp<int64_t>(*limit, 1, 10000), who));
        }));
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    auto who = Authed(req, res, Verb::kReport);
    if (!who) return;
    std::string text = control_->Metrics(*who);
    if (who->role == Role::kAdmin) {
      absl::StrAppend(
          &text,
          cycle_seconds_.Text("carve_scheduler_cycle_seconds", "Scheduling cycles' durations"),
          heartbeat_seconds_.Text("carve_agent_heartbeat_seconds",
                                  "Agents' heartbeats, from authentication to the answer"),
          "# HELP carve_scheduler_cycle_last_seconds The last scheduling cycle's duration\n"
          "# TYPE carve_scheduler_cycle_last_seconds gauge\n",
          "carve_scheduler_cycle_last_seconds ", static_cast<double>(cycle_us_last_) / 1e6, "\n",
          "# HELP carve_api_rate_limited_total Requests refused by the per-token rate limit\n"
          "# TYPE carve_api_rate_limited_total counter\n",
          "carve_api_rate_limited_total ", rate_limited_.load(), "\n");
    }
    res.set_content(text, "text/plain; version=0.0.4");
  });
}

// Acceptance reports kept by the server (poc_reports.h): admins keep, list and read them.
void ApiServer::PocReportRoutes() {
  httplib::Server& s = *http_;
  auto admin_call = [this](auto fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      auto who = Authed(req, res, Verb::kInspect);
      if (who) fn(req, res, *who);
    };
  };
  s.Post("/api/v1/poc/reports",
         admin_call([this](const auto& req, auto& res, const Principal& who) {
           auto body = Body(req);
           Respond(res, body.ok() ? control_->KeepPocReport(*body, who) : body.status(), 201);
         }));
  s.Get("/api/v1/poc/reports", admin_call([this](const auto& req, auto& res, const Principal& who) {
          auto limit = NonNegativeParam(req, "limit", 50);
          if (!limit.ok()) return ReplyError(res, limit.status());
          Respond(res, control_->PocReports(std::clamp<int64_t>(*limit, 1, 1000), who));
        }));
  s.Get(R"(/api/v1/poc/reports/(\d+))",
        admin_call([this](const auto& req, auto& res, const Principal& who) {
          auto id = IdParam(req);
          Respond(res, id.ok() ? control_->PocReport(*id, who) : id.status());
        }));
  // The report page `carve poc run` wrote, rendered again from the kept records.
  s.Get(R"(/api/v1/poc/reports/(\d+)/report\.html)",
        admin_call([this](const auto& req, auto& res, const Principal& who) {
          auto id = IdParam(req);
          auto kept = id.ok() ? control_->PocReport(*id, who) : id.status();
          if (!kept.ok()) return ReplyError(res, kept.status());
          std::vector<poc::Record> records;
          for (const json& r : (*kept)["records"]) {
            auto record = poc::RecordFromJson(r);
            if (!record.ok())
              return ReplyError(res, absl::DataLossError(record.status().message()));
            records.push_back(*std::move(record));
          }
          res.set_header("Content-Disposition",
                         absl::StrCat("attachment; filename=\"carve-poc-", *id, ".html\""));
          res.set_content(poc::RenderReport((*kept)["meta"], records), "text/html; charset=utf-8");
        }));
}

}  // namespace carve
