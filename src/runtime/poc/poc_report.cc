// The kit's evidence on disk: records.jsonl (the source), records.csv and report.html, one
// self-contained page (Chart.js inlined, no network needed to view it).
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "runtime/csv.h"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_html.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

const std::vector<std::string> kCsvColumns = {"id",
                                              "title",
                                              "suite",
                                              "verdict",
                                              "verdict_reason",
                                              "owner",
                                              "started",
                                              "ended",
                                              "jobs",
                                              "events_after",
                                              "events_through",
                                              "chain_start_hash",
                                              "chain_end_hash",
                                              "nodes",
                                              "pass_condition",
                                              "failure_handling"};

// The events a record covers: "a–b", or "none".
std::string EventRange(const Record& r) {
  if (r.chain_end.seq <= r.chain_start.seq) return "none";
  return absl::StrCat(r.chain_start.seq + 1, "–", r.chain_end.seq);
}

std::string Time(int64_t us) {
  if (us == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

std::vector<std::string> NodeNames(const Record& r) {
  std::vector<std::string> out;
  for (const auto& [name, versions] : r.nodes.items()) out.push_back(name);
  return out;
}

std::string JobsText(const Record& r) { return absl::StrJoin(r.jobs, " "); }

// The acceptance table: one row per test.
std::string Table(const std::vector<Record>& records) {
  std::string out =
      "<table id=\"acceptance\"><thead><tr><th>test</th><th>verdict</th><th>why</th>"
      "<th>started</th><th>seconds</th><th>jobs</th><th>events</th></tr></thead><tbody>\n";
  for (const Record& r : records) {
    absl::StrAppend(
        &out, "<tr class=\"", VerdictName(r.verdict), "\"><td><a href=\"#", Escape(r.id), "\">",
        Escape(r.id), "</a><br>", Escape(r.title), "</td><td class=\"verdict\">",
        VerdictName(r.verdict), "</td><td>", Escape(r.verdict_reason), "</td><td>",
        Time(r.started_us), "</td><td>",
        r.ended_us > r.started_us ? absl::StrCat((r.ended_us - r.started_us) / 1000000) : "-",
        "</td><td>", Escape(JobsText(r)), "</td><td>", EventRange(r), "</td></tr>\n");
  }
  return out + "</tbody></table>\n";
}

// What was proven per delivery mode, under which versions, and what was not.
std::string Boundaries(const std::vector<Record>& records) {
  std::map<std::string, std::vector<std::string>> proven, unproven;
  std::set<std::string> versions;
  bool simulated = false;
  std::set<std::string> computes;  // what the probes' rates counted
  for (const Record& r : records) {
    if (const json c = r.observed.value("compute", json()); c.is_string()) computes.insert(c);
    (r.verdict == Verdict::kPass ? proven : unproven)[r.suite].push_back(
        absl::StrCat(r.id, " (", VerdictName(r.verdict), ")"));
    for (const auto& [node, v] : r.nodes.items()) {
      versions.insert(absl::StrCat(node, ": driver ", v.value("driver", "?"), ", CUDA ",
                                   v.value("cuda_driver", "?"), ", carve ", v.value("carve", "?"),
                                   ", kernel ", v.value("kernel", "?")));
      simulated = simulated || v.value("driver", "") == "simulated";
    }
  }
  std::string out = "<ul id=\"boundaries\">\n";
  for (const char* suite : {"software", "partition", "recovery"}) {
    absl::StrAppend(
        &out, "<li><b>", suite, "</b>: proven: ",
        Escape(proven[suite].empty() ? "nothing" : absl::StrJoin(proven[suite], ", ")),
        "; not proven: ",
        Escape(unproven[suite].empty() ? "nothing" : absl::StrJoin(unproven[suite], ", ")),
        "</li>\n");
  }
  absl::StrAppend(&out, "<li>under versions: ",
                  Escape(versions.empty() ? "none recorded" : absl::StrJoin(versions, "; ")),
                  "</li>\n");
  if (simulated) {
    out +=
        "<li>simulated GPUs: device isolation and device memory were not measured on hardware; "
        "caps are enforced by the simulated MPS twin</li>\n";
  }
  out +=
      "<li>MPS: one GPU context server per GPU; a client fault can affect the other clients on "
      "the same GPU on real hardware</li>\n";
  if (computes.count("cpu-loop")) {
    out +=
        "<li>the probe computed on the CPU (no GPU kernel ran): those progress rates measure "
        "host-side isolation, not GPU SM contention</li>\n";
  }
  if (computes.count("gpu-kernel")) {
    out +=
        "<li>the probe computed with its GPU kernel: progress rates are kernel launches per "
        "second, so they show GPU SM contention</li>\n";
  }
  return out + "</ul>\n";
}

std::string Checks(const Record& r) {
  std::string out =
      "<table class=\"checks\"><thead><tr><th>check</th><th>expected</th><th>observed</th>"
      "<th></th></tr></thead><tbody>\n";
  for (const Check& c : r.checks) {
    absl::StrAppend(&out, "<tr class=\"", c.ok ? "pass" : "fail", "\"><td>", Escape(c.name),
                    "</td><td>", Escape(c.expected), "</td><td>", Escape(c.observed), "</td><td>",
                    c.ok ? "ok" : "FAIL", "</td></tr>\n");
  }
  return out + "</tbody></table>\n";
}

std::string Section(const Record& r, int* chart) {
  std::string out = absl::StrCat(
      "<section id=\"", Escape(r.id), "\"><h2>", Escape(r.id), ": ", Escape(r.title),
      " — <span class=\"", VerdictName(r.verdict), "\">", VerdictName(r.verdict),
      "</span></h2>\n<p><b>Passes when</b> ", Escape(r.pass_condition), "</p>\n<p><b>Owner</b> ",
      Escape(r.owner), "; <b>from</b> ", Time(r.started_us), " <b>to</b> ", Time(r.ended_us),
      "; <b>jobs</b> ", Escape(JobsText(r)), " as ", Escape(r.submitted_by),
      " (logs: <code>carve logs ID</code>); <b>nodes</b> ",
      Escape(absl::StrJoin(NodeNames(r), ", ")), "</p>\n<p><b>Event chain</b> from seq ",
      r.chain_start.seq, " (<code>", Escape(r.chain_start.hash), "</code>) to seq ",
      r.chain_end.seq, " (<code>", Escape(r.chain_end.hash), "</code>)</p>\n");
  if (!r.verdict_reason.empty()) {
    absl::StrAppend(&out, "<p><b>Verdict</b> ", Escape(r.verdict_reason), "</p>\n");
  }
  if (!r.checks.empty()) out += Checks(r);
  for (const json& c : r.observed.value("charts", json::array())) {
    out += ChartFigure(c, (*chart)++);
  }
  absl::StrAppend(&out, "<p><b>When it fails</b> ", Escape(r.failure_handling),
                  "</p>\n<p><b>What it proves</b> ", Escape(r.boundary),
                  "</p>\n<details><summary>observed</summary><pre>", Escape(Dump(r.observed, 2)),
                  "</pre></details>\n<details><summary>input (the job specs)</summary><pre>",
                  Escape(Dump(r.input, 2)), "</pre></details>\n</section>\n");
  return out;
}

// The workload profile the kit read beside its tests (runtime/profile.h).
std::string ProfileSection(const json& profile, const std::string& since) {
  std::string out = absl::StrCat(
      "<h2>Workload profile</h2>\n<p>The cluster's work over the last ", Escape(since),
      ", per kind and queue, from its usage rows (", profile.value("rows", 0),
      " attempts), the kit's own jobs included.</p>\n<table id=\"profile\"><thead><tr>"
      "<th>kind</th><th>queue</th><th>jobs</th><th>attempts</th><th>wait p50 / p95 s</th>"
      "<th>run p50 / p95 s</th><th>GPUs per replica</th><th>modes</th><th>failure rate</th>"
      "<th>preemption rate</th><th>GPU-hours</th></tr></thead><tbody>\n");
  for (const json& g : profile.value("groups", json::array())) {
    absl::StrAppend(&out, "<tr><td>", Escape(g.value("kind", "")), "</td><td>",
                    Escape(g.value("queue", "")), "</td><td>", g.value("jobs", 0), "</td><td>",
                    g.value("attempts", 0), "</td><td>", Fixed2(g["wait_s"]["p50"]), " / ",
                    Fixed2(g["wait_s"]["p95"]), "</td><td>", Fixed2(g["run_s"]["p50"]), " / ",
                    Fixed2(g["run_s"]["p95"]), "</td><td>", Escape(Dump(g["gpus_per_replica"])),
                    "</td><td>", Escape(Dump(g["modes"])), "</td><td>", Fixed2(g["failure_rate"]),
                    "</td><td>", Fixed2(g["preemption_rate"]), "</td><td>", Fixed2(g["gpu_hours"]),
                    "</td></tr>\n");
  }
  out += "</tbody></table>\n<p>Not measured:</p><ul>";
  for (const json& n : profile.value("not_measured", json::array())) {
    absl::StrAppend(&out, "<li>", Escape(n.get<std::string>()), "</li>");
  }
  return out + "</ul>\n";
}

}  // namespace

std::string RenderReport(const json& meta, const std::vector<Record>& records) {
  int passed = 0;
  for (const Record& r : records) passed += r.verdict == Verdict::kPass;
  std::string out = absl::StrCat(
      "<p>Server ", Escape(meta.value("server", "")), " (carve ",
      Escape(meta.value("server_version", "?")), "); owner ", Escape(meta.value("owner", "")),
      "; suite ", Escape(meta.value("suite", "")), "; written ",
      Time(meta.value("written_us", int64_t{0})), "; ", passed, " of ", records.size(),
      " tests passed. Re-check it against the server with <code>carve poc verify DIR</code>.</p>\n",
      Table(records), "<h2>Boundary conclusions</h2>\n", Boundaries(records));
  int chart = 0;
  for (const Record& r : records) out += Section(r, &chart);
  if (meta.contains("profile")) {
    out += ProfileSection(meta["profile"], meta.value("profile_since", ""));
  }
  return Page("Carve acceptance report", out);
}

std::string RecordsCsv(const std::vector<Record>& records) {
  std::string out = absl::StrJoin(kCsvColumns, ",") + "\n";
  for (const Record& r : records) {
    json row = {{"id", r.id},
                {"title", r.title},
                {"suite", r.suite},
                {"verdict", VerdictName(r.verdict)},
                {"verdict_reason", r.verdict_reason},
                {"owner", r.owner},
                {"started", Time(r.started_us)},
                {"ended", Time(r.ended_us)},
                {"jobs", JobsText(r)},
                {"events_after", r.chain_start.seq},
                {"events_through", r.chain_end.seq},
                {"chain_start_hash", r.chain_start.hash},
                {"chain_end_hash", r.chain_end.hash},
                {"nodes", absl::StrJoin(NodeNames(r), " ")},
                {"pass_condition", r.pass_condition},
                {"failure_handling", r.failure_handling}};
    out += CsvRow(row, kCsvColumns);
  }
  return out;
}

absl::Status Write(const std::string& dir, const json& meta, const std::vector<Record>& records) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  std::string jsonl;
  for (const Record& r : records) jsonl += Dump(ToJson(r)) + "\n";
  const std::pair<const char*, std::string> files[] = {{"records.jsonl", jsonl},
                                                       {"records.csv", RecordsCsv(records)},
                                                       {"report.html", RenderReport(meta, records)},
                                                       {"meta.json", Dump(meta, 2) + "\n"}};
  for (const auto& [name, text] : files) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace carve::poc
