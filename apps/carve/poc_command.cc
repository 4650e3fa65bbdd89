// `carve poc run` and `carve poc verify`: the acceptance kit (runtime/poc/poc.h, docs/poc.md).
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client_common.h"
#include "runtime/job_spec.h"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_cluster.h"
#include "runtime/poc/poc_compare.h"
#include "runtime/poc/poc_html.h"
#include "runtime/profile.h"

namespace carve::app {

using json = nlohmann::json;

namespace {

// This binary, for the probe jobs: the nodes are expected to have `carve` at the same path.
std::string OwnBinary() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "carve" : self.string();
}

// The workload profile of the usage rows from `since_us` on.
absl::StatusOr<json> Profile(ApiClient& api, int64_t since_us) {
  auto rows = api.Get(absl::StrCat("/api/v1/usage/records?since_us=", since_us));
  if (!rows.ok()) return rows.status();
  return WorkloadProfile(*rows);
}

// Ctrl-C or SIGTERM during `poc run`: the running test stops and cleans up, the rest are not
// run, and the records are written.
std::atomic<bool> interrupted{false};
void Interrupt(int) { interrupted.store(true); }

void CatchInterrupts() {
  struct sigaction sa = {};
  sa.sa_handler = Interrupt;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

std::string Figure(const json& v) {
  return v.is_number() ? absl::StrFormat("%.1f", v.get<double>()) : "-";
}

std::string Counts(const json& counts) {
  std::vector<std::string> out;
  for (const auto& [k, n] : counts.items()) out.push_back(absl::StrCat(k, ":", n.dump()));
  return out.empty() ? "-" : absl::StrJoin(out, " ");
}

void PrintProfile(const json& p) {
  std::cout << absl::StrFormat("%-12s %-14s %5s %8s %19s %19s %6s %6s %9s  %s\n", "KIND", "QUEUE",
                               "JOBS", "ATTEMPTS", "WAIT P50/P95 (S)", "RUN P50/P95 (S)", "FAILED",
                               "PREEMPT", "GPU-HOURS", "GPUS/REPLICA  MODES");
  for (const json& g : p["groups"]) {
    std::cout << absl::StrFormat(
        "%-12s %-14s %5d %8d %19s %19s %6d %6d %9.3f  %s  %s\n", g.value("kind", ""),
        g.value("queue", ""), g.value("jobs", 0), g.value("attempts", 0),
        Figure(g["wait_s"]["p50"]) + " / " + Figure(g["wait_s"]["p95"]),
        Figure(g["run_s"]["p50"]) + " / " + Figure(g["run_s"]["p95"]), g.value("failed", 0),
        g.value("preempted", 0), g.value("gpu_hours", 0.0), Counts(g["gpus_per_replica"]),
        Counts(g["modes"]));
  }
  std::cout << "not measured:\n";
  for (const json& n : p["not_measured"]) std::cout << "  " << n.get<std::string>() << "\n";
}

struct RunFlags {
  poc::Options options;
  std::string out = "poc";
  bool no_keep = false;
};

// Keeps the report on the server with the kit's own re-check of it (docs/poc.md, "Kept by the
// server"); the dashboard lists it. A server that cannot keep it is said, not fatal: the files
// are written.
void Keep(ApiClient& api, const std::string& out, const json& meta,
          const std::vector<poc::Record>& records) {
  json body = {{"meta", meta}, {"records", json::array()}, {"verify", json::array()}};
  for (const poc::Record& r : records) body["records"].push_back(poc::ToJson(r));
  auto checks = poc::Verify(api, out);
  int held = 0;
  if (checks.ok()) {
    for (const poc::Check& c : *checks) {
      held += c.ok ? 1 : 0;
      body["verify"].push_back(
          {{"name", c.name}, {"ok", c.ok}, {"expected", c.expected}, {"observed", c.observed}});
    }
  }
  auto kept = api.Post("/api/v1/poc/reports", body);
  if (!kept.ok()) {
    std::cout << "not kept on the server: " << kept.status().message() << "\n";
    return;
  }
  const json& server = (*kept)["server_checks"];
  std::cout << "kept on the server as acceptance report " << kept->value("id", int64_t{0}) << ": "
            << server.value("held", 0) << " of " << server.value("of", 0)
            << " server checks hold; the kit's re-check: "
            << (checks.ok() ? absl::StrCat(held, " of ", checks->size(), " claims hold")
                            : std::string(checks.status().message()))
            << " (the dashboard's Audit & usage page)\n";
}

void Run(const Connection& c, RunFlags& f) {
  ApiClient api = Client(c);
  json who = Check(api.Get("/api/v1/whoami"));
  f.options.submitted_by = who.value("name", "");
  f.options.server = ServerUrl(c);
  f.options.ca = c.ca.empty() && std::getenv("CARVE_CA") ? std::getenv("CARVE_CA") : c.ca;
  if (f.options.owner.empty()) f.options.owner = f.options.submitted_by;
  if (f.options.probe.empty()) f.options.probe = OwnBinary();
  f.options.interrupted = &interrupted;
  CatchInterrupts();
  json version = Check(api.Get("/api/v1/version"));
  std::cout << "carve poc: suite " << f.options.suite << " against " << ServerUrl(c) << " (carve "
            << version.value("version", "?") << "), owner " << f.options.owner << " (jobs as "
            << f.options.submitted_by << "), probe " << f.options.probe << "\n"
            << std::flush;
  auto records = poc::Run(api, f.options, std::cout);
  if (!records.ok()) Die(records.status());
  json meta = {{"server", ServerUrl(c)},
               {"server_version", version.value("version", "")},
               {"owner", f.options.owner},
               {"submitted_by", f.options.submitted_by},
               {"suite", f.options.suite},
               {"probe", f.options.probe},
               {"tolerance", f.options.tolerance},
               {"seconds", f.options.seconds},
               {"job_memory_mib", f.options.job_memory_mib},
               {"written_us", poc::NowUs()}};
  auto profile = Profile(api, poc::NowUs() - 30LL * 24 * 3600 * 1'000'000);
  if (profile.ok()) {
    meta["profile"] = *profile;
    meta["profile_since"] = "30d";
  } else {
    meta["profile_error"] = profile.status().message();
  }
  if (absl::Status st = poc::Write(f.out, meta, *records); !st.ok()) Die(st);
  if (!f.no_keep) Keep(api, f.out, meta, *records);
  int failed = 0;
  int passed = 0;
  for (const poc::Record& r : *records) {
    passed += r.verdict == poc::Verdict::kPass;
    failed += r.verdict == poc::Verdict::kFail;
  }
  std::cout << passed << " passed, " << failed << " failed, "
            << records->size() - static_cast<size_t>(passed + failed)
            << " inconclusive or not run; records in " << f.out << "/records.jsonl and " << f.out
            << "/records.csv, the report in " << f.out << "/report.html; `carve poc verify "
            << f.out << "` re-checks it\n";
  if (interrupted.load()) {
    std::cout << "interrupted: the running test's jobs were cancelled, the rest not run\n";
    std::exit(130);
  }
  // 1: a test failed; 3: none passed (the cluster could show nothing); 0 otherwise.
  std::exit(failed > 0 ? 1 : passed == 0 ? 3 : 0);
}

void Verify(const Connection& c, const std::string& dir) {
  ApiClient api = Client(c);
  auto checks = poc::Verify(api, dir);
  if (!checks.ok()) Die(checks.status());
  int failed = 0;
  for (const poc::Check& ch : *checks) {
    failed += !ch.ok;
    std::cout << (ch.ok ? "ok    " : "FAIL  ") << ch.name
              << (ch.ok ? "" : absl::StrCat(": expected ", ch.expected, ", observed ", ch.observed))
              << "\n";
  }
  std::cout << checks->size() - failed << " of " << checks->size() << " claims hold\n";
  std::exit(failed > 0 ? 1 : 0);
}

struct CompareFlags {
  poc::Options options;
  std::string workload;
  std::string modes = "exclusive,shared,partition";
  std::string out = "poc-compare";
};

void PrintCompare(const json& result) {
  std::cout << absl::StrFormat("%-10s %10s %8s %17s %11s %17s %6s  %s\n", "MODE", "MAKESPAN",
                               "JOBS/MIN", "WAIT P50/P95 (S)", "GPU-SECONDS", "SLOWDOWN MEAN/MAX",
                               "FAILED", "REQUESTS");
  for (const json& m : result["modes"]) {
    if (m.contains("skipped") || m.contains("error")) {
      const bool error = m.contains("error");
      std::cout << absl::StrFormat("%-10s %s: %s\n", m.value("mode", ""),
                                   error ? "could not finish" : "skipped",
                                   m.value(error ? "error" : "skipped", ""));
      continue;
    }
    std::cout << absl::StrFormat(
        "%-10s %10s %8s %17s %11s %17s %6d  %s\n", m.value("mode", ""), Figure(m["makespan_s"]),
        Figure(m["throughput_per_min"]), Figure(m["wait_p50_s"]) + " / " + Figure(m["wait_p95_s"]),
        Figure(m["gpu_seconds"]), Figure(m["mean_slowdown"]) + " / " + Figure(m["max_slowdown"]),
        m.value("failed", 0), Counts(m["requests"]));
  }
}

void RunCompare(const Connection& c, CompareFlags& f) {
  auto doc = YamlToJson(ReadFileOrDie(f.workload));
  if (!doc.ok()) Die(doc.status());
  auto jobs = poc::ParseWorkload(*doc);
  if (!jobs.ok())
    Die(absl::InvalidArgumentError(absl::StrCat(f.workload, ": ", jobs.status().message())));
  ApiClient api = Client(c);
  if (f.options.probe.empty()) f.options.probe = OwnBinary();
  f.options.interrupted = &interrupted;
  CatchInterrupts();
  auto result = poc::Compare(api, f.options, *jobs, absl::StrSplit(f.modes, ',', absl::SkipEmpty()),
                             std::cout);
  if (!result.ok()) Die(result.status());
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  std::ofstream(std::filesystem::path(f.out) / "compare.json") << poc::Dump(*result, 2) << "\n";
  std::ofstream(std::filesystem::path(f.out) / "compare.html") << poc::RenderCompare(*result);
  PrintCompare(*result);
  std::cout << "written: " << f.out << "/compare.json, " << f.out << "/compare.html\n";
}

}  // namespace

void AddPocCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* poc = app.add_subcommand(
      "poc", "The acceptance kit: a buyer's tests against this cluster, with records and a report");
  poc->require_subcommand(1);
  auto f = std::make_shared<RunFlags>();
  CLI::App* run = poc->add_subcommand(
      "run", "Run the acceptance tests through the API with probe jobs; write records and report");
  run->add_option("--suite", f->options.suite, "software | partition | recovery | all")
      ->capture_default_str();
  run->add_option("--out", f->out, "Directory for records.jsonl, records.csv, report.html")
      ->capture_default_str();
  run->add_option("--owner", f->options.owner,
                  "Who is responsible for the tests, recorded beside the token's user (default: "
                  "the token's user)");
  run->add_option("--probe", f->options.probe,
                  "Path of `carve` on the nodes, for the probe jobs (default: this binary)");
  run->add_option("--only", f->options.only,
                  "Run only these tests of the suite, e.g. recovery.service-drain (the rest are "
                  "recorded as not run)")
      ->delimiter(',');
  run->add_option("--gpu-model", f->options.gpu_model,
                  "Test shared GPUs of this model (default: the first found)");
  run->add_option("--tolerance", f->options.tolerance,
                  "Share of its solo rate a neighbour must keep (0-1)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  run->add_option("--seconds", f->options.seconds, "Compute seconds of each probe")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--job-memory-mib", f->options.job_memory_mib, "Host memory of each probe job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--timeout", f->options.timeout_s, "Longest wait for one outcome, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--fault-command", f->options.fault_command,
                  "Injects faults for partition.device-faults: run as CMD ACTION NODE [GPU_UUID "
                  "[START]] (docs/poc.md; carve dev: scripts/poc-dev-faults)");
  run->add_flag("--no-keep", f->no_keep,
                "Do not keep the report on the server (by default it is kept, with the kit's "
                "re-check, and the dashboard lists it)");
  run->callback([c, f] { Run(*c, *f); });
  auto dir = std::make_shared<std::string>();
  CLI::App* verify = poc->add_subcommand(
      "verify", "Re-check a report against the server: its jobs exist, the chain covers it");
  verify->add_option("dir", *dir, "The directory `carve poc run` wrote")->required();
  verify->callback([c, dir] { Verify(*c, *dir); });

  auto cf = std::make_shared<CompareFlags>();
  CLI::App* compare = poc->add_subcommand(
      "compare", "Run one workload under each delivery mode and compare them side by side");
  compare
      ->add_option("--workload", cf->workload,
                   "YAML or JSON: {jobs: [{name, count, seconds, gpu}]}")
      ->required();
  compare->add_option("--modes", cf->modes, "Comma-separated: exclusive, shared, partition")
      ->capture_default_str();
  compare->add_option("--out", cf->out, "Directory for compare.json and compare.html")
      ->capture_default_str();
  compare->add_option("--probe", cf->options.probe, "Path of `carve` on the nodes");
  compare->add_option("--timeout", cf->options.timeout_s, "Longest wait for one outcome, seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  compare->callback([c, cf] { RunCompare(*c, *cf); });

  auto since = std::make_shared<std::string>("30d");
  CLI::App* profile = app.add_subcommand(
      "profile", "The workload profile per kind and queue: waits, run times, sizes, failures");
  profile->add_option("--since", *since, "From (time or 30d ago)")->capture_default_str();
  profile->callback([c, since] {
    ApiClient api = Client(*c);
    json p = Check(Profile(api, TimeFlag("--since", *since)));
    if (!Structured(*c, p)) PrintProfile(p);
  });
}

}  // namespace carve::app
