// Operations on the fleet beyond cordon and drain: MIG re-layouts and service scaling.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client_common.h"

namespace carve::app {

using json = nlohmann::json;

namespace {

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
    std::cout << "GPU " << *relayout_gpu << " of " << *relayout_node << ": " << r.value("phase", "")
              << " for layout " << absl::StrJoin(r["layout"].get<std::vector<std::string>>(), ", ")
              << "; jobs moved: " << r["jobs_moved"].dump() << "\n";
  });
}

}  // namespace

void AddOperationsCommands(CLI::App& app, std::shared_ptr<Connection> c) { AddRelayout(app, c); }

}  // namespace carve::app
