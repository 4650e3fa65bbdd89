// Operations on the fleet beyond cordon and drain: MIG re-layouts, service scaling, maintenance,
// nodes declared dead, node credentials revoked, node labels and reservations.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client_common.h"
#include "runtime/labels.h"

namespace carve::app {

using json = nlohmann::json;

namespace {

// "no job was moved", "job 4 was moved off it ...", "jobs 4, 7 were moved off it ...".
std::string JobList(const json& ids, const std::string& what) {
  std::vector<std::string> list;
  for (const json& id : ids)
    list.push_back(id.is_object() ? id.value("job", json()).dump() : id.dump());
  if (list.empty()) return "no job had to move";
  return absl::StrCat(list.size() == 1 ? "job " : "jobs ", absl::StrJoin(list, ", "),
                      list.size() == 1 ? " was " : " were ", what);
}

void AddRelayout(CLI::App& app, std::shared_ptr<Connection> c) {
  auto relayout_node = std::make_shared<std::string>();
  auto relayout_gpu = std::make_shared<int>(-1);
  auto layout = std::make_shared<std::string>();
  CLI::App* relayout = app.add_subcommand(
      "relayout", "Change one GPU's MIG layout: drain it, verify, apply, verify, return it");
  relayout->add_option("node", *relayout_node, "Node name")->required();
  relayout->add_option("--gpu", *relayout_gpu, "GPU index")->required();
  relayout->add_option("--layout", *layout, "Instances, e.g. 3g.40gb@0,2g.20gb,1g.10gb")
      ->required();
  relayout->callback([c, relayout_node, relayout_gpu, layout] {
    json slots = json::array();
    for (absl::string_view s : absl::StrSplit(*layout, ',', absl::SkipEmpty())) {
      slots.push_back(std::string(s));
    }
    json r = Check(Client(*c).Post(
        absl::StrCat("/api/v1/nodes/", *relayout_node, "/gpus/", *relayout_gpu, "/layout"),
        json{{"layout", slots}}));
    if (Structured(*c, r)) return;
    std::cout << "GPU " << *relayout_gpu << " of " << *relayout_node << " is "
              << r.value("phase", "") << " for the layout "
              << absl::StrJoin(r["layout"].get<std::vector<std::string>>(), ", ") << "; "
              << JobList(r.value("jobs_moved", json::array()),
                         "moved off it by their recovery policy")
              << ". `carve nodes` shows when it is back.\n";
  });
}

void AddScale(CLI::App& app, std::shared_ptr<Connection> c) {
  auto job = std::make_shared<std::string>();
  auto replicas = std::make_shared<int>(0);
  CLI::App* scale = app.add_subcommand(
      "scale", "Set a running service's replica count (removed replicas are reclaimed)");
  scale->add_option("job", *job, "Job id")->required();
  scale->add_option("--replicas", *replicas, "Replicas to keep running")->required();
  scale->callback([c, job, replicas] {
    json j = Check(Client(*c).Post(absl::StrCat("/api/v1/jobs/", JobId(*job), "/scale"),
                                   json{{"replicas", *replicas}}));
    if (Structured(*c, j)) return;
    std::cout << "job " << *job << " now keeps " << *replicas
              << " replica(s) running: " << j.value("reason", "") << "\n";
  });
}

void AddMaintenance(CLI::App& app, std::shared_ptr<Connection> c) {
  struct Flags {
    std::string node, starts_in = "0s", lasts, reason;
    bool cancel = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "maintenance", "Plan a node's maintenance window (drained while it lasts) or cancel it");
  cmd->add_option("node", f->node, "Node name")->required();
  cmd->add_option("--in", f->starts_in, "Starts in, e.g. 30m (default now)");
  cmd->add_option("--for", f->lasts, "Lasts, e.g. 2h");
  cmd->add_option("--reason", f->reason, "Why (recorded)");
  cmd->add_flag("--cancel", f->cancel, "Cancel the planned window");
  cmd->callback([c, f] {
    json body = f->cancel
                    ? json{{"cancel", true}}
                    : json{{"starts_in", f->starts_in}, {"lasts", f->lasts}, {"reason", f->reason}};
    json n = Check(Client(*c).Post("/api/v1/nodes/" + f->node + "/maintenance", body));
    if (Structured(*c, n)) return;
    const json w = n.value("maintenance", json());
    if (!w.is_object()) {
      std::cout << "node " << f->node << " has no maintenance window\n";
      return;
    }
    std::cout << "node " << f->node << ": maintenance " << w.value("phase", "") << " from "
              << LocalTime(w.value("start_us", int64_t{0}), true) << " to "
              << LocalTime(w.value("end_us", int64_t{0}), true) << " (" << w.value("reason", "")
              << ", by " << w.value("by", "") << "); "
              << (w.value("phase", "") == "active"
                      ? "it takes no work until then"
                      : "until it starts only jobs that end before it land there")
              << "\n";
  });
}

void AddDeclareDead(CLI::App& app, std::shared_ptr<Connection> c) {
  auto node = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "declare-dead", "Declare a silent node dead: its jobs are lost and its devices unfenced");
  cmd->add_option("node", *node, "Node name")->required();
  cmd->callback([c, node] {
    json n = Check(Client(*c).Post("/api/v1/nodes/" + *node + "/dead", json::object()));
    if (!Structured(*c, n)) std::cout << "node " << *node << ": " << n.value("state", "") << "\n";
  });
}

void AddRevokeNodeCredential(CLI::App& app, std::shared_ptr<Connection> c) {
  auto node = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "revoke-node-credential",
      "Revoke a node's credential (admins): the join token may then register the name again");
  cmd->add_option("node", *node, "Node name")->required();
  cmd->callback([c, node] {
    json r =
        Check(Client(*c).Post("/api/v1/nodes/" + *node + "/credential/revoke", json::object()));
    if (!Structured(*c, r)) {
      std::cout << "node " << *node << ": credential " << r["revoked"].dump()
                << " revoked; restart its agent to join again\n";
    }
  });
}

// KEY=VALUE sets a label, KEY- removes it: the `labels:` of a `kind: node` document.
json LabelChanges(const std::vector<std::string>& args) {
  json labels = json::object();
  for (const std::string& arg : args) {
    if (arg.size() > 1 && arg.back() == '-' && arg.find('=') == std::string::npos) {
      const std::string key = arg.substr(0, arg.size() - 1);
      if (absl::Status s = CheckLabelKey(key); !s.ok()) Die(s);
      labels[key] = nullptr;
      continue;
    }
    auto kv = ParseLabel(arg);
    if (!kv.ok()) {
      Die(absl::InvalidArgumentError(
          absl::StrCat(kv.status().message(), " (KEY- removes a label)")));
    }
    labels[kv->first] = kv->second;
  }
  return labels;
}

void AddLabel(CLI::App& app, std::shared_ptr<Connection> c) {
  auto node = std::make_shared<std::string>();
  auto args = std::make_shared<std::vector<std::string>>();
  CLI::App* label = app.add_subcommand(
      "label",
      "Set (KEY=VALUE) or remove (KEY-) a node's labels; kept when its agent registers again");
  label->add_option("node", *node, "Node name")->required();
  label->add_option("labels", *args, "KEY=VALUE or KEY- (pool=NAME puts the node in a pool)")
      ->required();
  label->callback([c, node, args] {
    json doc = {{"kind", "node"}, {"name", *node}, {"labels", LabelChanges(*args)}};
    Check(Client(*c).Post("/api/v1/apply", json::array({doc})));
    json labelled;
    for (json& n : Check(Client(*c).Get("/api/v1/nodes"))) {
      if (n.value("name", "") == *node) labelled = std::move(n);
    }
    if (Structured(*c, labelled)) return;
    std::vector<std::string> shown;
    const json labels = labelled.value("labels", json::object());
    for (const auto& [k, v] : labels.items()) {
      shown.push_back(absl::StrCat(k, "=", v.is_string() ? v.get<std::string>() : v.dump()));
    }
    std::cout << "node " << *node << ": labels "
              << (shown.empty() ? "none" : absl::StrJoin(shown, ", ")) << " (pool "
              << labelled.value("pool", "default") << ")\n";
  });
}

// "1.5" GPUs from milli-GPUs.
std::string Gpus(int64_t milli) {
  return milli % 1000 == 0 ? absl::StrCat(milli / 1000) : absl::StrFormat("%.2f", milli / 1000.0);
}

void AddReservations(CLI::App& app, std::shared_ptr<Connection> c) {
  CLI::App* list = app.add_subcommand(
      "reservations",
      "Reservations (kind: reservation): window, nodes, and the GPUs the holder, borrowers or "
      "others use there now");
  list->callback([c] {
    json r = Check(Client(*c).Get("/api/v1/reservations/status"));
    if (Structured(*c, r)) return;
    if (r["reservations"].empty()) {
      std::cout << "no reservations (kind: reservation, docs/operations.md)\n";
      return;
    }
    std::cout << absl::StrFormat("%-18s %-12s %-7s %-21s %-21s %5s %7s %9s %5s  %s\n", "NAME",
                                 "HOLDER", "PHASE", "START", "END", "GPUS", "HOLDER", "OTHERS",
                                 "IDLE", "NODES");
    for (const json& x : r["reservations"]) {
      const json use = x.value("use", json::object());
      const std::string holder =
          x.value("tenant", "") + (x.value("queue", "").empty() ? "" : "/" + x.value("queue", ""));
      const int64_t others =
          use.value("borrowed_milli", int64_t{0}) + use.value("others_milli", int64_t{0});
      std::vector<std::string> nodes = x.value("nodes", std::vector<std::string>{});
      std::string held = x.value("pool", "").empty() ? "" : " (pool " + x.value("pool", "") + ")";
      if (const json g = x.value("gpus", json()); g.is_object()) {  // a reservation of gpus
        const int64_t covered = g.value("covered", int64_t{0}),
                      asked = g.value("count", int64_t{0});
        absl::StrAppend(&held, " [", g.value("asked", ""),
                        covered < asked && x.value("phase", "") != "over"
                            ? absl::StrCat(": only ", covered, " ", g.value("unit", ""), " held")
                            : "",
                        "]");
      }
      std::cout << absl::StrFormat(
          "%-18s %-12s %-7s %-21s %-21s %5s %7s %9s %5s  %s%s\n", x.value("name", ""), holder,
          x.value("phase", ""), x.value("start", ""), x.value("end", ""),
          Gpus(x.value("gpu_milli", int64_t{0})), Gpus(use.value("holder_milli", int64_t{0})),
          Gpus(others) + (x.value("borrowable", false) ? " (b)" : ""),
          Gpus(use.value("idle_milli", int64_t{0})), absl::StrJoin(nodes, ","), held);
    }
    std::cout << "(b): borrowable; OTHERS are borrowers while active, jobs that end before the "
                 "start while ahead\n";
  });
}

}  // namespace

void AddOperationsCommands(CLI::App& app, std::shared_ptr<Connection> c) {
  AddDeclareDead(app, c);
  AddRevokeNodeCredential(app, c);
  AddRelayout(app, c);
  AddScale(app, c);
  AddMaintenance(app, c);
  AddLabel(app, c);
  AddReservations(app, c);
}

}  // namespace carve::app
