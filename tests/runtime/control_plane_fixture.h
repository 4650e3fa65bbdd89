// A control plane on a real SQLite store in a fresh directory per test, and an H200 node for it:
// the set-up the runtime tests share.
#ifndef CARVE_TESTS_RUNTIME_CONTROL_PLANE_FIXTURE_H_
#define CARVE_TESTS_RUNTIME_CONTROL_PLANE_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"

namespace carve {

// `gpus` exclusive H200s of node `name`, as an agent registers them.
inline nlohmann::json H200Gpus(const std::string& name, int gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < gpus; ++i) {
    list.push_back({{"index", i},
                    {"uuid", absl::StrCat("GPU-", name, "-", i)},
                    {"model", "H200"},
                    {"memory_mib", 143771},
                    {"mode", "exclusive"}});
  }
  return list;
}

// A reclaim record as an agent sends it when every check passed: processes gone, and no process
// or memory left on GPUs 0..gpus-1 (the server holds a "verified" record to these checks).
inline nlohmann::json VerifiedReclaim(int gpus = 8) {
  nlohmann::json checks = {{{"name", "processes-gone"}, {"ok", true}, {"observed", "empty"}}};
  for (int d = 0; d < gpus; ++d) {
    for (const char* name : {"device-processes", "device-memory"}) {
      checks.push_back({{"name", name}, {"ok", true}, {"device", d}, {"observed", "clean"}});
    }
  }
  return {{"status", "verified"}, {"checks", checks}};
}

class ControlPlaneFixture : public ::testing::Test {
 protected:
  // An admin caller, and a start for tests on a virtual clock (a whole minute).
  static inline const Principal kAdmin{"admin", Role::kAdmin, "", "", "t-admin"};
  static constexpr int64_t kT0 = 1'800'000'000'000'000;

  // A fresh directory named after `name`, its store, and a control plane with `options` (its
  // log directory inside) on `clock`.
  void OpenPlane(const std::string& name, ControlPlane::Options options,
                 ControlPlane::Clock clock) {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat(name, "-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = *OpenSqliteStore((dir_ / "carve.db").string());
    options.log_dir = (dir_ / "logs").string();
    options.check_kept_cluster = true;
    auto cp = ControlPlane::Open(store_.get(), &catalog_, std::move(options), std::move(clock));
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = *std::move(cp);
  }
  void TearDown() override {
    // The cluster the scheduler kept between cycles always matched the job records.
    if (cp_) {
      EXPECT_EQ(cp_->LastCycle().cluster_drift, 0);
    }
    cp_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // The jobs an admin sees (with `all`, ended ones too), one page of up to 10,000.
  nlohmann::json Jobs(bool all) {
    int64_t next = 0;
    auto page = cp_->JobsPage(all, {}, kAdmin, 0, 10000, &next);
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? *page : nlohmann::json::array();
  }
  // Registers `name` with `gpus` exclusive H200s and `labels`, as `who`.
  void RegisterH200Node(const std::string& name, int gpus, const Principal& who,
                        const nlohmann::json& labels = nlohmann::json::object()) {
    auto node = cp_->Register({{"name", name},
                               {"cpu_milli", 64000},
                               {"memory_mib", 262144},
                               {"backend", "simulated"},
                               {"labels", labels},
                               {"gpus", H200Gpus(name, gpus)}},
                              who);
    ASSERT_TRUE(node.ok()) << node.status();
  }

  std::filesystem::path dir_;
  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store_;
  std::unique_ptr<ControlPlane> cp_;
};

}  // namespace carve

#endif  // CARVE_TESTS_RUNTIME_CONTROL_PLANE_FIXTURE_H_
