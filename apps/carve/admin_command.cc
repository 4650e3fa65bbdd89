// Tenancy, audit and usage commands: user, token, whoami, audit, usage, export, utilization.
#include <chrono>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client_common.h"
#include "ports/store.h"
#include "runtime/job_spec.h"

namespace carve::app {
namespace {

using json = nlohmann::json;

std::string TimeText(int64_t us) {
  if (us == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

std::string Range(int64_t since, int64_t until) {
  return absl::StrCat("since_us=", since, "&until_us=", until);
}

void AddUser(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* user = app.add_subcommand("user", "Create, list and remove users");
  user->require_subcommand(1);
  auto body = std::make_shared<json>(json::object());
  auto name = std::make_shared<std::string>();
  auto role = std::make_shared<std::string>("member");
  auto tenant = std::make_shared<std::string>();
  auto project = std::make_shared<std::string>();
  CLI::App* create = user->add_subcommand("create", "Create a user (then `carve token create`)");
  create->add_option("name", *name, "User name")->required();
  create->add_option("--role", *role, "admin | tenant-admin | member | viewer")
      ->capture_default_str();
  create->add_option("--tenant", *tenant, "Tenant (tenant-admin, member, viewer)");
  create->add_option("--project", *project, "Project (member, viewer)");
  create->callback([c, name, role, tenant, project] {
    json b = {{"name", *name}, {"role", *role}};
    if (!tenant->empty()) b["tenant"] = *tenant;
    if (!project->empty()) b["project"] = *project;
    json u = Check(Client(*c).Post("/api/v1/users", b));
    if (!Structured(*c, u)) std::cout << "user " << *name << " created (" << *role << ")\n";
  });
  CLI::App* ls = user->add_subcommand("ls", "List the users you may see");
  ls->callback([c] {
    json list = Check(Client(*c).Get("/api/v1/users"));
    if (Structured(*c, list)) return;
    std::cout << absl::StrFormat("%-20s %-13s %-16s %-16s %s\n", "NAME", "ROLE", "TENANT",
                                 "PROJECT", "CREATED");
    for (const json& u : list) {
      std::cout << absl::StrFormat("%-20s %-13s %-16s %-16s %s\n", u.value("name", ""),
                                   u.value("role", ""), u.value("tenant", ""),
                                   u.value("project", ""),
                                   TimeText(u.value("created_us", int64_t{0})));
    }
  });
  CLI::App* rm = user->add_subcommand("rm", "Remove a user and revoke its tokens");
  rm->add_option("name", *name, "User name")->required();
  rm->callback([c, name] {
    json r = Check(Client(*c).Post("/api/v1/users/" + *name + "/remove", json::object()));
    if (!Structured(*c, r)) {
      std::cout << "user " << *name << " removed; " << r.value("tokens_revoked", 0)
                << " tokens revoked\n";
    }
  });
}

void AddToken(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* token = app.add_subcommand("token", "Create, list and revoke API tokens");
  token->require_subcommand(1);
  auto user = std::make_shared<std::string>();
  auto expires = std::make_shared<std::string>("30d");
  auto description = std::make_shared<std::string>();
  CLI::App* create = token->add_subcommand("create", "Create a token; it is shown only once");
  create->add_option("--user", *user, "For this user (default: yourself)");
  create->add_option("--expires", *expires, "Lifetime: 30d, 12h, 90m (at most 366d)")
      ->capture_default_str();
  create->add_option("--description", *description, "What the token is for");
  create->callback([c, user, expires, description] {
    json b = {{"expires_in", *expires}};
    if (!user->empty()) b["user"] = *user;
    if (!description->empty()) b["description"] = *description;
    json t = Check(Client(*c).Post("/api/v1/tokens", b));
    if (Structured(*c, t)) return;
    std::cout << t.value("token", "") << "\n";
    std::cerr << "token " << t.value("id", "") << " for " << t.value("user", "") << ", expires "
              << TimeText(t.value("expires_us", int64_t{0}))
              << " UTC. Store it now: it is not shown again (only its hash is kept).\n";
  });
  CLI::App* ls = token->add_subcommand("ls", "List tokens (never their secrets)");
  ls->callback([c] {
    json list = Check(Client(*c).Get("/api/v1/tokens"));
    if (Structured(*c, list)) return;
    std::cout << absl::StrFormat("%-13s %-16s %-13s %-12s %-17s %-8s %s\n", "ID", "USER", "ROLE",
                                 "TENANT", "EXPIRES", "STATE", "DESCRIPTION");
    for (const json& t : list) {
      int64_t exp = t.value("expires_us", int64_t{0});
      std::string state = t.value("revoked", false)    ? "revoked"
                          : exp != 0 && exp <= NowUs() ? "expired"
                                                       : "active";
      std::cout << absl::StrFormat("%-13s %-16s %-13s %-12s %-17s %-8s %s\n", t.value("id", ""),
                                   t.value("user", t.value("name", "")), t.value("role", ""),
                                   t.value("tenant", ""), exp == 0 ? "never" : TimeText(exp), state,
                                   t.value("description", ""));
    }
  });
  auto id = std::make_shared<std::string>();
  CLI::App* revoke = token->add_subcommand("revoke", "Revoke a token by its id");
  revoke->add_option("id", *id, "Token id (`carve token ls`)")->required();
  revoke->callback([c, id] {
    json t = Check(Client(*c).Post("/api/v1/tokens/" + *id + "/revoke", json::object()));
    if (!Structured(*c, t)) std::cout << "token " << *id << " revoked\n";
  });
  app.add_subcommand("whoami", "Who the token is: name, role, tenant, project")->callback([c] {
    json w = Check(Client(*c).Get("/api/v1/whoami"));
    if (Structured(*c, w)) return;
    std::cout << w.value("name", "") << " (" << w.value("role", "") << ")";
    if (!w.value("tenant", "").empty()) std::cout << " tenant " << w.value("tenant", "");
    if (!w.value("project", "").empty()) std::cout << " project " << w.value("project", "");
    std::cout << "\n";
  });
}

// Offline check of a store file, or the server's check; --expect-head pins a head recorded
// earlier (a rewritten chain verifies on its own, but not against a head kept elsewhere).
void Verify(const Connection& c, const std::string& data, const std::string& expect) {
  json r;
  if (!data.empty()) {
    auto store = OpenSqliteStore(data + "/carve.db");
    if (!store.ok()) Die(store.status());
    absl::Status chain = (*store)->VerifyEventChain();
    r = {{"ok", chain.ok()}};
    if (!chain.ok()) r["error"] = std::string(chain.message());
    int64_t count = 0;
    for (int64_t after = 0;;) {
      auto events = (*store)->Events(after, 10000);
      if (!events.ok() || events->empty()) break;
      count += static_cast<int64_t>(events->size());
      after = events->back().seq;
      r["head_seq"] = after;
      r["head_hash"] = events->back().hash;
    }
    r["events"] = count;
  } else {
    r = Check(Client(c).Get("/api/v1/audit/verify"));
  }
  if (r.value("ok", false) && !expect.empty()) {
    std::vector<std::string> parts = absl::StrSplit(expect, ':');
    int64_t seq = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &seq)) {
      Die(absl::InvalidArgumentError("--expect-head: write it as SEQ:HASH"));
    }
    json e =
        data.empty() ? Check(Client(c).Get(absl::StrCat("/api/v1/events/", seq))) : json::object();
    if (!data.empty()) {
      auto store = OpenSqliteStore(data + "/carve.db");
      auto events = store.ok() ? (*store)->Events(seq - 1, 1) : store.status();
      if (events.ok() && !events->empty()) e["hash"] = events->front().hash;
    }
    if (e.value("hash", "") != parts[1]) {
      r["ok"] = false;
      r["error"] = absl::StrCat("event ", seq, " has hash ", e.value("hash", "(none)"),
                                ", not the recorded ", parts[1], ": the log was rewritten");
    }
  }
  if (!Structured(c, r)) {
    if (r.value("ok", false)) {
      std::cout << "audit chain verified: " << r.value("events", int64_t{0}) << " events, head "
                << r.value("head_seq", int64_t{0}) << ":" << r.value("head_hash", "") << "\n";
    } else {
      std::cout << "audit chain BROKEN: " << r.value("error", "") << "\n";
    }
  }
  if (!r.value("ok", false)) std::exit(1);
}

void AddAudit(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* audit = app.add_subcommand("audit", "Verify and export the audit trail");
  audit->require_subcommand(1);
  auto data = std::make_shared<std::string>();
  auto expect = std::make_shared<std::string>();
  CLI::App* verify = audit->add_subcommand("verify", "Check every link of the hash chain");
  verify->add_option("--data", *data, "Check the store in this data directory directly");
  verify->add_option("--expect-head", *expect, "SEQ:HASH recorded earlier must still be there");
  verify->callback([c, data, expect] { Verify(*c, *data, *expect); });
  auto tenant = std::make_shared<std::string>();
  auto since = std::make_shared<std::string>();
  auto until = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("jsonl");
  CLI::App* exp = audit->add_subcommand("export", "Stream audit records");
  exp->add_option("--tenant", *tenant, "Only this tenant's records");
  exp->add_option("--since", *since, "From (time or 24h ago)");
  exp->add_option("--until", *until, "Until (time or 1h ago)");
  exp->add_option("--format", *format, "jsonl | csv")->capture_default_str();
  exp->callback([c, tenant, since, until, format] {
    auto text = Client(*c).GetText(
        absl::StrCat("/api/v1/audit?format=", *format, "&tenant=", *tenant, "&",
                     Range(TimeFlag("--since", *since), TimeFlag("--until", *until))));
    if (!text.ok()) Die(text.status());
    std::cout << *text;
  });
}

void PrintUsage(const json& u) {
  std::string by = u.value("by", "");
  std::cout << absl::StrFormat("%-24s %6s %12s %16s %12s %14s\n", absl::AsciiStrToUpper(by), "JOBS",
                               "GPU-HOURS", "PRODUCTIVE-GPU-H", "CPU-HOURS", "MEM-GIB-HOURS");
  for (const json& r : u["rows"]) {
    std::cout << absl::StrFormat("%-24s %6d %12.3f %16.3f %12.3f %14.3f\n", r.value(by, ""),
                                 r.value("jobs", 0), r.value("gpu_hours", 0.0),
                                 r.value("productive_gpu_hours", 0.0),
                                 r.value("cpu_core_hours", 0.0), r.value("memory_gib_hours", 0.0));
  }
}

void PrintUtilization(const json& u) {
  std::cout << "GPU-hours from " << TimeText(u.value("from_us", int64_t{0})) << " to "
            << TimeText(u.value("to_us", int64_t{0}))
            << " UTC (whole minutes); definitions: docs/utilization.md\n";
  std::cout << absl::StrFormat("%-10s %-12s %9s %9s %11s %9s %9s %10s  %s\n", "POOL", "MODEL",
                               "INSTALLED", "ONLINE", "SCHEDULABLE", "ALLOCATED", "BUSY",
                               "PRODUCTIVE", "ALLOCATED/SCHEDULABLE");
  for (const json& r : u["rows"]) {
    const json& h = r["gpu_hours"];
    std::string ratio = "-";
    for (const json& f : r["figures"]) {
      if (f["figure"] == "allocated/schedulable" && !f["value"].is_null()) {
        ratio = absl::StrFormat("%.1f%%", 100 * f["value"].get<double>());
      }
    }
    std::cout << absl::StrFormat("%-10s %-12s %9.3f %9.3f %11.3f %9.3f %9.3f %10.3f  %s\n",
                                 r.value("pool", ""), r.value("model", ""),
                                 h.value("installed", 0.0), h.value("online", 0.0),
                                 h.value("schedulable", 0.0), h.value("allocated", 0.0),
                                 h.value("busy", 0.0), h.value("productive", 0.0), ratio);
  }
}

void PrintCost(const json& u) {
  const std::string by = u.value("by", "");
  if (!u.value("priced", false)) {
    std::cout << "no prices applied (kind: price, docs/operations.md): every cost is 0\n";
  }
  std::cout << absl::StrFormat("%-24s %5s %10s %10s %9s %9s %10s %10s %9s %11s %11s %9s %9s %s\n",
                               absl::AsciiStrToUpper(by), "JOBS", "GPU-HOURS", "GPU-COST",
                               "CPU-COST", "MEM-COST", "TOTAL", "IDLE-GPU-H", "IDLE-COST",
                               "UNMEASURED", "RSV-UNUSED-H", "RSV-COST", "UNPRICED", "CURRENCY");
  for (const json& r : u["rows"]) {
    std::cout << absl::StrFormat(
        "%-24s %5d %10.3f %10.2f %9.2f %9.2f %10.2f %10.3f %9.2f %11.3f %11.3f %9.2f %9.3f %s\n",
        r.value(by, ""), r.value("jobs", 0), r.value("gpu_hours", 0.0), r.value("gpu_cost", 0.0),
        r.value("cpu_cost", 0.0), r.value("memory_cost", 0.0), r.value("total", 0.0),
        r.value("idle_gpu_hours", 0.0), r.value("idle_cost", 0.0),
        r.value("idle_unmeasured_gpu_hours", 0.0), r.value("reserved_unused_gpu_hours", 0.0),
        r.value("reserved_unused_cost", 0.0), r.value("unpriced_gpu_hours", 0.0),
        r.value("currency", ""));
  }
  const bool reserved = std::any_of(u["rows"].begin(), u["rows"].end(), [](const json& r) {
    return r.value("reserved_unused_gpu_hours", 0.0) > 0;
  });
  if (reserved) {
    std::cout << "GPU-HOURS, GPU-COST and TOTAL include RSV-: reserved GPU time the holder left "
                 "unused (docs/operations.md, \"Reservations\")\n";
  }
}

void AddCost(CLI::App& app, std::shared_ptr<Connection> c) {
  auto by = std::make_shared<std::string>("tenant");
  auto since = std::make_shared<std::string>();
  auto until = std::make_shared<std::string>();
  CLI::App* cost = app.add_subcommand("cost", "What the usage cost at the applied prices");
  cost->add_option("--by", *by, "tenant | project | queue | user")->capture_default_str();
  cost->add_option("--since", *since, "From (time or 24h ago)");
  cost->add_option("--until", *until, "Until (time or 1h ago)");
  cost->callback([c, by, since, until] {
    json u = Check(Client(*c).Get(
        absl::StrCat("/api/v1/cost?by=", *by, "&",
                     Range(TimeFlag("--since", *since), TimeFlag("--until", *until)))));
    if (!Structured(*c, u)) PrintCost(u);
  });
}

void AddInvoice(CLI::App& exp, std::shared_ptr<Connection> c) {
  auto tenant = std::make_shared<std::string>();
  auto month = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("csv");
  CLI::App* invoice =
      exp.add_subcommand("invoice", "A tenant's month: one line per job attempt and price");
  invoice->add_option("--tenant", *tenant, "Whose")->required();
  invoice->add_option("--month", *month, "Which, e.g. 2026-11 (UTC)")->required();
  invoice->add_option("--format", *format, "csv | jsonl")->capture_default_str();
  invoice->callback([c, tenant, month, format] {
    auto text = Client(*c).GetText(
        absl::StrCat("/api/v1/invoices?format=", *format, "&tenant=", *tenant, "&month=", *month));
    if (!text.ok()) Die(text.status());
    std::cout << *text;
  });
}

void AddUsage(CLI::App& app, std::shared_ptr<Connection> c) {
  auto by = std::make_shared<std::string>("tenant");
  auto since = std::make_shared<std::string>();
  auto until = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("csv");
  CLI::App* usage = app.add_subcommand("usage", "GPU, CPU and memory hours, grouped");
  usage->add_option("--by", *by, "tenant | project | queue | kind | model | user")
      ->capture_default_str();
  usage->add_option("--since", *since, "From (time or 24h ago)");
  usage->add_option("--until", *until, "Until (time or 1h ago)");
  usage->callback([c, by, since, until] {
    json u = Check(Client(*c).Get(
        absl::StrCat("/api/v1/usage?by=", *by, "&",
                     Range(TimeFlag("--since", *since), TimeFlag("--until", *until)))));
    if (!Structured(*c, u)) PrintUsage(u);
  });
  AddCost(app, c);
  CLI::App* exp = app.add_subcommand("export", "Export records (usage, invoice, all)");
  exp->require_subcommand(1);
  AddInvoice(*exp, c);
  AddExportAll(*exp, c);
  AddImport(app);
  AddStore(app);
  CLI::App* records = exp->add_subcommand("usage", "One usage record per job attempt");
  records->add_option("--format", *format, "csv | jsonl")->capture_default_str();
  records->add_option("--since", *since, "From (time or 24h ago)");
  records->add_option("--until", *until, "Until (time or 1h ago)");
  records->callback([c, format, since, until] {
    auto text = Client(*c).GetText(
        absl::StrCat("/api/v1/usage/records?format=", *format, "&",
                     Range(TimeFlag("--since", *since), TimeFlag("--until", *until))));
    if (!text.ok()) Die(text.status());
    std::cout << *text;
  });
  CLI::App* util = app.add_subcommand(
      "utilization", "The utilization matrix per pool and model, each figure named");
  util->add_option("--since", *since, "From (time or 24h ago)");
  util->add_option("--until", *until, "Until (time or 1h ago)");
  util->callback([c, since, until] {
    json u = Check(Client(*c).Get(absl::StrCat(
        "/api/v1/utilization?", Range(TimeFlag("--since", *since), TimeFlag("--until", *until)))));
    if (!Structured(*c, u)) PrintUtilization(u);
  });
}

}  // namespace

void AddAdminCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  AddUser(app, c);
  AddToken(app, c);
  AddAudit(app, c);
  AddUsage(app, c);
}

}  // namespace carve::app
