// `carve ls`, `carve cancel` and `carve logs`: jobs as squeue/scancel/kubectl users expect them.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client_common.h"
#include "httplib.h"
#include "runtime/api_client.h"
#include "runtime/states.h"

namespace carve::app {

namespace {

using json = nlohmann::json;

// The filters `ls` and `cancel` share, as the API's query parameters.
struct Filters {
  std::vector<std::string> states;
  std::string user, tenant, project, queue, node, name, since;

  void Add(CLI::App* cmd) {
    cmd->add_option("--state", states, "Only jobs in these states (queued, running, ...)")
        ->delimiter(',');
    cmd->add_option("--user", user, "Only jobs this user submitted");
    cmd->add_option("--tenant", tenant, "Only this tenant's jobs");
    cmd->add_option("--project", project, "Only this project's jobs");
    cmd->add_option("--queue", queue, "Only jobs in this queue");
    cmd->add_option("--node", node, "Only jobs that ran or run on this node");
    cmd->add_option("--name", name, "Only jobs of this name (ending in *: names starting so)");
  }
  bool any() const {
    return !states.empty() || !user.empty() || !tenant.empty() || !project.empty() ||
           !queue.empty() || !node.empty() || !name.empty() || !since.empty();
  }
  // "state=queued,running&queue=a&" (each value URL-encoded).
  std::string Query() const {
    std::string q;
    auto put = [&](const char* key, const std::string& value) {
      if (!value.empty())
        absl::StrAppend(&q, key, "=", httplib::detail::encode_query_param(value), "&");
    };
    put("state", absl::StrJoin(states, ","));
    put("user", user);
    put("tenant", tenant);
    put("project", project);
    put("queue", queue);
    put("node", node);
    put("name", name);
    if (int64_t t = TimeFlag("--since", since); t > 0) put("since", std::to_string(t));
    return q;
  }
  json Json() const {
    json f = json::object();
    if (!states.empty()) f["states"] = states;
    for (auto [key, value] : {std::pair{"user", &user},
                              {"tenant", &tenant},
                              {"project", &project},
                              {"queue", &queue},
                              {"node", &node},
                              {"name", &name}}) {
      if (!value->empty()) f[key] = *value;
    }
    if (int64_t t = TimeFlag("--since", since); t > 0) f["since"] = t;
    return f;
  }
};

// "3m12s"-style: how long from `from_us` to `to_us` (to now when 0); "-" without a start.
std::string Span(int64_t from_us, int64_t to_us) {
  if (from_us <= 0) return "-";
  int64_t s = std::max<int64_t>(0, ((to_us > 0 ? to_us : NowUs()) - from_us) / 1'000'000);
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m", s % 60 == 0 ? "" : absl::StrCat(s % 60, "s"));
  if (s < 172800) return absl::StrCat(s / 3600, "h", (s % 3600) / 60, "m");
  return absl::StrCat(s / 86400, "d", (s % 86400) / 3600, "h");
}

// How long the job waited to be placed (still waiting: until now); -1 when it ended unplaced.
int64_t WaitUs(const json& j) {
  const int64_t created = j.value("created_us", int64_t{0});
  const int64_t scheduled = j.value("scheduled_us", int64_t{0});
  if (scheduled > 0) return scheduled - created;
  if (j.value("state", "") == "queued") return NowUs() - created;
  return -1;
}

std::string Wait(const json& j) {
  const int64_t wait = WaitUs(j);
  return wait < 0 ? "-" : Span(1, 1 + wait);
}

std::string Gpus(const json& spec) {
  const json& r = spec.value("resources", json::object());
  int gpus = r.value("gpus", 0);
  std::string mode = r.value("mode", "exclusive");
  if (mode == "shared") return absl::StrCat(r.value("gpu_compute", "?"), " shared");
  if (mode == "partition") return absl::StrCat(std::max(gpus, 1), "x ", r.value("profile", "?"));
  return gpus == 0 ? "cpu" : absl::StrCat(gpus, "x whole");
}

struct Column {
  const char* name;
  int width;  // 0: the last column, unpadded
  std::string (*value)(const json&);
};

const std::vector<Column>& Columns(bool wide) {
  static const std::vector<Column> kNarrow = {
      {"ID", 6, [](const json& j) { return Text(j, "id"); }},
      {"NAME", 20, [](const json& j) { return Text(j, "name").substr(0, 20); }},
      {"STATE", 10, [](const json& j) { return Text(j, "state"); }},
      {"USER", 10, [](const json& j) { return Text(j, "submitted_by").substr(0, 10); }},
      {"TENANT", 10, [](const json& j) { return Text(j["spec"], "tenant").substr(0, 10); }},
      {"QUEUE", 10, [](const json& j) { return Text(j["spec"], "queue").substr(0, 10); }},
      {"GPUS", 14, [](const json& j) { return Gpus(j["spec"]); }},
      {"NODE", 10,
       [](const json& j) {
         return j["replicas"].empty() ? std::string("-") : j["replicas"][0].value("node", "-");
       }},
      {"AGE", 7, [](const json& j) { return Span(j.value("created_us", int64_t{0}), 0); }},
      {"WAIT", 7, Wait},
      {"REASON", 0, [](const json& j) { return Text(j, "reason"); }},
  };
  static const std::vector<Column> kWide = [] {
    std::vector<Column> w(kNarrow.begin(), kNarrow.end() - 1);
    w.push_back({"PROJECT", 10, [](const json& j) { return Text(j["spec"], "project"); }});
    w.push_back({"KIND", 11, [](const json& j) { return Text(j["spec"], "kind"); }});
    w.push_back({"PRIO", 5, [](const json& j) { return Text(j["spec"], "priority"); }});
    w.push_back({"REPL", 5, [](const json& j) { return Text(j["spec"], "replicas"); }});
    w.push_back({"RUN", 7, [](const json& j) {
                   return Span(j.value("started_us", int64_t{0}), j.value("ended_us", int64_t{0}));
                 }});
    w.push_back(kNarrow.back());
    return w;
  }();
  return wide ? kWide : kNarrow;
}

void PrintRows(const json& jobs, bool header, bool wide) {
  const std::vector<Column>& cols = Columns(wide);
  std::string line;
  auto cell = [&](const Column& col, const std::string& v) {
    absl::StrAppend(&line, col.width == 0 ? v : absl::StrFormat("%-*s ", col.width, v));
  };
  if (header) {
    for (const Column& col : cols) cell(col, col.name);
    std::cout << line << "\n";
  }
  for (const json& j : jobs) {
    line.clear();
    for (const Column& col : cols) cell(col, col.value(j));
    std::cout << line << "\n";
  }
}

// Sort keys for `--sort`; id order is the server's.
bool SortJobs(json& jobs, const std::string& key) {
  auto num = [](const char* field) {
    return [field](const json& a, const json& b) {
      return a.value(field, int64_t{0}) < b.value(field, int64_t{0});
    };
  };
  auto text = [](const char* field, bool in_spec) {
    return [field, in_spec](const json& a, const json& b) {
      return Text(in_spec ? a["spec"] : a, field) < Text(in_spec ? b["spec"] : b, field);
    };
  };
  std::function<bool(const json&, const json&)> less;
  if (key == "id" || key.empty()) return true;
  if (key == "age") less = num("created_us");  // oldest first
  if (key == "wait") less = [](const json& a, const json& b) { return WaitUs(a) > WaitUs(b); };
  if (key == "state") less = text("state", false);
  if (key == "name") less = text("name", false);
  if (key == "user") less = text("submitted_by", false);
  if (key == "queue") less = text("queue", true);
  if (key == "priority") {
    less = [](const json& a, const json& b) {
      return a["spec"].value("priority", int64_t{0}) > b["spec"].value("priority", int64_t{0});
    };
  }
  if (!less) return false;
  std::stable_sort(jobs.begin(), jobs.end(), less);
  return true;
}

struct LsFlags {
  bool all = false, wide = false, watch = false;
  double interval = 2;
  std::string sort;
  Filters filters;
};

void ListOnce(const Connection& c, const LsFlags& f) {
  std::string path = absl::StrCat("/api/v1/jobs?", f.all ? "all=true&" : "", f.filters.Query());
  Connection table = c;
  if (c.output != "table" || !f.sort.empty()) {  // one document: the server streams it
    json jobs = Check(Client(c).Get(path));
    if (!SortJobs(jobs, f.sort)) {
      Die(absl::InvalidArgumentError(absl::StrCat(
          "--sort \"", f.sort, "\": one of id, age, wait, state, name, user, queue, priority")));
    }
    if (Structured(table, jobs)) return;
    PrintRows(jobs, true, f.wide);
    return;
  }
  // A table is printed page by page as they come: `--all` may list millions of jobs.
  constexpr size_t kPage = 500;
  for (int64_t after = 0;;) {
    json jobs = Check(Client(c).Get(absl::StrCat(path, "limit=", kPage, "&after=", after)));
    Structured(table, jobs);  // makes it terminal-safe
    PrintRows(jobs, after == 0, f.wide);
    if (jobs.empty() && after == 0 && f.filters.any()) std::cout << "(no job matches)\n";
    if (jobs.size() < kPage) break;
    after = jobs.back().value("id", int64_t{0});
  }
}

void AddLs(CLI::App& app, std::shared_ptr<Connection> c) {
  auto f = std::make_shared<LsFlags>();
  CLI::App* ls = app.add_subcommand("ls", "List jobs: active ones, or --all, filtered and sorted");
  ls->add_flag("--all,-a", f->all, "Include ended jobs");
  f->filters.Add(ls);
  ls->add_option("--since", f->filters.since,
                 "Only jobs submitted since (24h, 7d, 2026-11-30, ...); includes ended ones");
  ls->add_option(
      "--sort", f->sort,
      "id | age (oldest first) | wait (longest first) | state | name | user | queue | priority");
  ls->add_flag("--wide,-w", f->wide, "More columns: project, kind, priority, replicas, run time");
  ls->add_flag("--watch", f->watch, "Print the list again every --interval seconds");
  ls->add_option("--interval", f->interval, "Seconds between --watch refreshes (default 2)");
  ls->callback([c, f] {
    if (c->output == "wide") {  // `-o wide`, as kubectl writes it
      c->output = "table";
      f->wide = true;
    }
    if (f->interval <= 0) Die(absl::InvalidArgumentError("--interval must be above 0"));
    for (bool first = true; first || f->watch; first = false) {
      if (f->watch) {
        std::cout << "\033[H\033[2J"
                  << "every " << f->interval << "s: carve ls (Ctrl-C stops)\n";
      }
      ListOnce(*c, *f);
      std::cout << std::flush;
      if (f->watch) {
        std::this_thread::sleep_for(
            std::chrono::milliseconds(static_cast<int>(f->interval * 1000)));
      }
    }
  });
}

void AddCancel(CLI::App& app, std::shared_ptr<Connection> c) {
  auto ids = std::make_shared<std::vector<std::string>>();
  auto filters = std::make_shared<Filters>();
  CLI::App* cancel = app.add_subcommand(
      "cancel", "Cancel jobs by id and/or filter, in one request (stops all their processes)");
  cancel->add_option("jobs", *ids, "Job ids");
  filters->Add(cancel);
  cancel->callback([c, ids, filters] {
    json body = json::object();
    if (!ids->empty()) {
      body["ids"] = json::array();
      for (const std::string& id : *ids) body["ids"].push_back(JobId(id));
    }
    if (filters->any()) body["filter"] = filters->Json();
    if (body.empty()) {
      Die(absl::InvalidArgumentError(
          "name the jobs: ids (`carve cancel 3 4`) and/or filters (`--queue q --state queued`)"));
    }
    if (ids->size() == 1 && !filters->any()) {  // one job: its own answer, as precise as it gets
      json job = Check(Client(*c).Post(
          absl::StrCat("/api/v1/jobs/", JobId(ids->front()), "/cancel"), json::object()));
      if (!Structured(*c, job)) {
        std::cout << "job " << ids->front() << ": " << job.value("reason", "") << "\n";
      }
      return;
    }
    json out = Check(Client(*c).Post("/api/v1/jobs/cancel", body));
    // A filter cancels at most 10,000 a request: ask again while more match.
    while (out.value("more", false)) {
      json next = Check(Client(*c).Post("/api/v1/jobs/cancel", json{{"filter", body["filter"]}}));
      for (const json& id : next["cancelled"]) out["cancelled"].push_back(id);
      for (const json& r : next["refused"]) out["refused"].push_back(r);
      out["more"] = next.value("more", false) && !next["cancelled"].empty();
    }
    if (Structured(*c, out)) return;
    std::vector<std::string> done;
    for (const json& id : out["cancelled"]) done.push_back(id.dump());
    std::cout << (done.empty()
                      ? "no job cancelled"
                      : absl::StrCat("cancelled ", done.size(), " job", done.size() == 1 ? "" : "s",
                                     ": ", absl::StrJoin(done, " ")))
              << "\n";
    for (const json& r : out["refused"]) {
      std::cout << "job " << r.value("id", int64_t{0}) << ": " << r.value("reason", "") << "\n";
    }
    if (done.empty() && !out["refused"].empty()) std::exit(1);
  });
}

// The offset from which the last `lines` lines of a log of `size` bytes start: read backwards a
// block at a time until enough newlines are seen.
int64_t TailOffset(ApiClient& api, const std::string& path, int64_t size, int lines) {
  constexpr int64_t kBlock = 64 * 1024;
  int newlines = 0;
  for (int64_t end = size; end > 0;) {
    const int64_t start = std::max<int64_t>(0, end - kBlock);
    auto text = api.GetText(absl::StrCat(path, "&offset=", start, "&limit=", end - start));
    if (!text.ok()) Die(text.status());
    for (int64_t i = static_cast<int64_t>(text->size()) - 1; i >= 0; --i) {
      // The log's last newline ends its last line; it does not start one.
      if ((*text)[i] == '\n' && start + i != size - 1 && ++newlines == lines) return start + i + 1;
    }
    end = start;
  }
  return 0;
}

// While a followed job has not started, says once per change why it waits.
void SayWhyItWaits(const json& job, std::string& said) {
  const std::string state = job.value("state", "");
  std::string why = job.value("explanation", "");
  if (why.empty()) why = job.value("reason", "");
  std::string line = state == "queued" ? absl::StrCat("waiting: ", why) : "";
  if (line == said) return;
  said = line;
  if (!line.empty()) {
    std::cerr << "[job " << job.value("id", int64_t{0}) << " is queued; " << line
              << " (`carve explain " << job.value("id", int64_t{0}) << "`)]\n";
  }
}

void AddLogs(CLI::App& app, std::shared_ptr<Connection> c) {
  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  auto replica = std::make_shared<int>(0);
  auto tail = std::make_shared<int>(-1);
  CLI::App* logs = app.add_subcommand("logs", "A job's output (-f: follow until it ends)");
  logs->add_option("job", *id, "Job id")->required();
  logs->add_flag("-f,--follow", *follow, "Keep printing until the job ends; says why it waits");
  logs->add_option("--replica", *replica, "Replica");
  logs->add_option("--tail", *tail, "Only the last N lines (then follow, with -f)");
  logs->callback([c, id, follow, replica, tail] {
    ApiClient api = Client(*c);
    int64_t job = JobId(*id);
    const std::string path = absl::StrCat("/api/v1/jobs/", job, "/logs?replica=", *replica);
    int64_t offset = 0;
    auto size_of = [](const std::map<std::string, std::string>& headers) {
      int64_t size = 0;
      for (const auto& [name, value] : headers) {
        if (absl::EqualsIgnoreCase(name, "X-Carve-Log-Size")) (void)absl::SimpleAtoi(value, &size);
      }
      return size;
    };
    if (*tail >= 0) {
      std::map<std::string, std::string> headers;
      if (auto probe = api.GetText(path + "&limit=1", &headers); !probe.ok()) Die(probe.status());
      const int64_t size = size_of(headers);
      offset = *tail == 0 ? size : TailOffset(api, path, size, *tail);
    }
    std::string said;
    while (true) {
      std::map<std::string, std::string> headers;
      auto text = api.GetText(absl::StrCat(path, "&offset=", offset), &headers);
      if (!text.ok()) Die(text.status());
      std::cout << *text << std::flush;
      offset += static_cast<int64_t>(text->size());
      // The server answers a page at a time (1 MiB): fetch the next one while there is more.
      if (!text->empty() && offset < size_of(headers)) continue;
      if (!*follow) return;
      json state = Check(api.Get(absl::StrCat("/api/v1/jobs/", job)));
      SayWhyItWaits(state, said);
      const std::optional<JobState> ended = ParseJobState(state.value("state", ""));
      if (ended && IsFinal(*ended) && text->empty()) {
        std::cerr << "[job " << job << " " << state.value("state", "") << ": "
                  << state.value("reason", "") << "]\n";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
}

// What a job used over all its attempts, from its replicas' reclaim records: CPU seconds
// summed, peak memory the largest; negative when none was measured.
std::pair<double, int64_t> Used(const json& job) {
  double cpu = -1;
  int64_t peak = -1;
  auto add = [&](const json& reclaim) {
    const json used = reclaim.is_object() ? reclaim.value("used", json()) : json();
    if (!used.is_object()) return;
    if (used.contains("cpu_seconds")) cpu = std::max(cpu, 0.0) + used["cpu_seconds"].get<double>();
    peak = std::max(peak, used.value("peak_memory_mib", int64_t{-1}));
  };
  for (const json& r : job.value("replicas", json::array())) add(r.value("reclaim", json()));
  for (const json& a : job.value("attempts", json::array())) {
    for (const json& r : a.value("reclaim", json::array())) add(r);
  }
  return {cpu, peak};
}

std::string ExitOf(const json& job) {
  for (const json& r : job.value("replicas", json::array())) {
    if (r.contains("exit_code") && !r["exit_code"].is_null())
      return "exit " + r["exit_code"].dump();
    if (r.contains("signal") && !r["signal"].is_null()) return "signal " + r["signal"].dump();
  }
  return "-";
}

void AddHistory(CLI::App& app, std::shared_ptr<Connection> c) {
  auto filters = std::make_shared<Filters>();
  filters->since = "1d";
  CLI::App* history = app.add_subcommand(
      "history", "Ended jobs, as sacct: start, end, wait, run time, GPUs, CPU time, peak memory");
  filters->Add(history);
  history->add_option("--since", filters->since, "Submitted since (default 1d; 7d, 2026-11-30)");
  history->callback([c, filters] {
    if (filters->states.empty()) {
      filters->states = {"succeeded", "failed", "cancelled", "timed-out", "lost", "preempted"};
    }
    json jobs = Check(Client(*c).Get("/api/v1/jobs?all=true&" + filters->Query()));
    if (Structured(*c, jobs)) return;
    std::cout << absl::StrFormat("%-6s %-18s %-10s %-19s %-7s %-7s %-14s %-9s %-8s %s\n", "ID",
                                 "NAME", "STATE", "START", "WAIT", "RUN", "GPUS", "CPU TIME",
                                 "MAX MEM", "END");
    for (const json& j : jobs) {
      const int64_t started = j.value("started_us", int64_t{0});
      auto [cpu, peak] = Used(j);
      std::cout << absl::StrFormat(
          "%-6d %-18s %-10s %-19s %-7s %-7s %-14s %-9s %-8s %s\n", j.value("id", int64_t{0}),
          Text(j, "name").substr(0, 18), Text(j, "state"), LocalTime(started), Wait(j),
          started > 0 ? Span(started, j.value("ended_us", int64_t{0})) : "-", Gpus(j["spec"]),
          cpu < 0 ? "-" : absl::StrFormat("%.1fs", cpu), peak < 0 ? "-" : absl::StrCat(peak, "Mi"),
          ExitOf(j));
    }
  });
}

}  // namespace

void AddJobsCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  AddLs(app, c);
  AddCancel(app, c);
  AddLogs(app, c);
  AddHistory(app, c);
}

}  // namespace carve::app
