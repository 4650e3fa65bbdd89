// Queues and explanations: `carve queues` and `carve explain JOB`.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client_common.h"

namespace carve::app {

using json = nlohmann::json;

namespace {

std::string Field(const json& j, const char* key) {
  if (!j.contains(key)) return "-";
  const json& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

void PrintQueues(const json& queues) {
  std::cout << absl::StrFormat("%-16s %-12s %-18s %8s %8s %9s %8s %10s %8s %8s\n", "QUEUE",
                               "COHORT", "RESOURCE", "QUOTA", "USED", "BORROWED", "LENT",
                               "BORROWABLE", "PENDING", "RUNNING");
  for (const json& q : queues) {
    const json resources = q.value("resources", json::object());
    std::string cohort = q.value("cohort", "");
    if (cohort.empty()) cohort = "-";
    bool first = true;
    auto row = [&](const std::string& resource, const json& r) {
      std::cout << absl::StrFormat(
          "%-16s %-12s %-18s %8s %8s %9s %8s %10s %8s %8s\n", first ? q.value("name", "") : "",
          first ? cohort : "", resource, Field(r, "quota"), Field(r, "used"), Field(r, "borrowed"),
          Field(r, "lent"), Field(r, "borrowable"), first ? Field(q, "pending") : "",
          first ? Field(q, "running") : "");
      first = false;
    };
    if (resources.empty()) row("-", json::object());
    for (const auto& [resource, r] : resources.items()) row(resource, r);
  }
}

// Where a placed job went and what it waited for first.
void PrintPlacement(const json& e) {
  const json placement = e.value("placement", json::array());
  for (size_t i = 0; i < placement.size(); ++i) {
    std::vector<std::string> devices;
    for (const json& d : placement[i].value("devices", json::array())) devices.push_back(d.dump());
    std::cout << "replica " << i << " on " << placement[i].value("node", "")
              << (devices.empty() ? ", no GPU"
                                  : absl::StrCat(devices.size() == 1 ? ", GPU " : ", GPUs ",
                                                 absl::StrJoin(devices, ",")))
              << "\n";
  }
  if (placement.empty()) return;
  const int64_t waited = e.value("scheduled_us", int64_t{0}) - e.value("created_us", int64_t{0});
  const std::string why = e.value("waited_for", "");
  std::cout << "placed " << (waited >= 0 ? absl::StrCat(waited / 1000, " ms after submission") : "")
            << (why.empty() ? " in its first scheduling cycle" : "; it had waited because: " + why)
            << "\n";
}

// One line per gate with its facts, then what would make it fit.
void PrintExplanation(const json& e) {
  std::cout << "job " << e.value("id", int64_t{0}) << " is " << e.value("state", "") << ": "
            << e.value("reason", "") << "\n";
  std::cout << "queue " << e.value("queue", "") << ", class " << e.value("priority_class", "")
            << ", priority " << Field(e, "priority")
            << (e.value("preemptible", true) ? ", preemptible" : ", not preemptible") << "\n";
  if (e.contains("preempted_by")) {
    std::cout << "preempted: " << e.value("preemption", "") << "\n";
  }
  for (const json& v : e.value("victims", json::array())) {
    std::cout << "preempted job " << Field(v, "job") << ": " << v.value("reason", "") << "\n";
  }
  const json gates = e.value("gates", json::array());
  for (size_t i = 0; i < gates.size(); ++i) {
    std::cout << absl::StrFormat("gate %d %-10s %s\n", i + 1, gates[i].value("gate", ""),
                                 gates[i].value("summary", ""));
  }
  const json ahead = e.value("ahead", json::array());
  if (!ahead.empty()) {
    std::vector<std::string> parts;
    for (const json& a : ahead) {
      parts.push_back(absl::StrCat("job ", Field(a, "job"), " (", a.value("why", ""), ")"));
    }
    std::cout << "position " << Field(e, "position") << "; ahead: " << absl::StrJoin(parts, ", ")
              << "\n";
  }
  if (e.value("reserved", false)) {
    std::cout << "holds the backfill reservation; later jobs start only if they cannot delay it\n";
  }
  if (!e.value("fix", "").empty()) std::cout << "to fit: " << e.value("fix", "") << "\n";
  if (e.contains("placement")) PrintPlacement(e);
}

}  // namespace

void AddQueueCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* queues = app.add_subcommand(
      "queues", "Queues: quota, used, borrowed, lent and borrowable per resource; jobs pending");
  queues->callback([c] {
    json list = Check(Client(*c).Get("/api/v1/queues/status"));
    if (!Structured(*c, list)) PrintQueues(list);
  });
  auto id = std::make_shared<std::string>();
  CLI::App* explain =
      app.add_subcommand("explain", "Why a job waits, gate by gate, or where it runs");
  explain->add_option("job", *id, "Job id")->required();
  explain->callback([c, id] {
    json e = Check(Client(*c).Get(absl::StrCat("/api/v1/jobs/", JobId(*id), "/explain")));
    if (!Structured(*c, e)) PrintExplanation(e);
  });
}

}  // namespace carve::app
