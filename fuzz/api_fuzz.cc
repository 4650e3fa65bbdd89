// libFuzzer target: the API's JSON bodies into a real control plane (SQLite store in a temporary
// directory): submit as a tenant member, apply and user/token creation as an admin, register and
// heartbeat as an agent, maintenance and re-layouts as an admin. Bodies go through the API's own
// parser (ParseJsonBody: nesting deeper than 64 is refused before a tree is built); the corpus
// holds deep and wide bodies for every case (fuzz/corpus/api/deep-*, wide-*). Beyond crashes it
// checks that a member's accepted job stays in its own tenant and project.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "nlohmann/json.hpp"
#include "runtime/control_plane.h"
#include "runtime/input_limits.h"

namespace {

struct World {
  carve::GpuCatalog catalog = carve::GpuCatalog::BuiltIn();
  std::unique_ptr<carve::Store> store;
  std::unique_ptr<carve::ControlPlane> control;

  World() {
    std::string dir =
        std::filesystem::temp_directory_path() / ("carve-api-fuzz-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = *carve::OpenSqliteStore(dir + "/carve.db");
    carve::ControlPlane::Options options;
    options.log_dir = dir + "/logs";
    control = *carve::ControlPlane::Open(store.get(), &catalog, options, [] {
      return std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    });
    (void)control->Apply(
        nlohmann::json::array({{{"kind", "tenant"}, {"name", "acme"}},
                               {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}}}),
        kAdmin);
  }
  static inline const carve::Principal kAdmin{"admin", carve::Role::kAdmin, "", "", "a"};
  static inline const carve::Principal kMember{"m", carve::Role::kMember, "acme", "vision", "m"};
  static inline const carve::Principal kAgent{"agents", carve::Role::kAgent, "", "", "g"};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World world;
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = carve::ParseJsonBody(text);
  if (!parsed.ok()) return 0;
  nlohmann::json& body = *parsed;
  carve::ControlPlane& cp = *world.control;
  switch (data[0] % 9) {
    case 0: {
      if (!cp.AuthorizeSubmit(body, World::kMember).ok()) break;
      auto job = cp.Submit(body, "", World::kMember);
      if (job.ok() &&
          ((*job)["spec"]["tenant"] != "acme" || (*job)["spec"]["project"] != "vision")) {
        std::abort();  // a member's job left its project
      }
      break;
    }
    case 1:
      (void)cp.Apply(body, World::kAdmin);
      break;
    case 2:
      (void)cp.CreateUser(body, World::kAdmin);
      break;
    case 3:
      (void)cp.CreateToken(body, World::kAdmin);
      break;
    case 4:
      (void)cp.Register(body, World::kAgent);
      break;
    case 5:
      (void)cp.Heartbeat(body, World::kAdmin);  // the join token only registers
      break;
    case 6:
      (void)cp.Maintenance("n", body, World::kAdmin);
      break;
    case 7:
      (void)cp.Relayout("n", 0, body, World::kAdmin);
      break;
    default:
      (void)cp.ScheduleOnce();
      break;
  }
  return 0;
}
