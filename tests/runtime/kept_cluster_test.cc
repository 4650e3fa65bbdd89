// The cluster the scheduler keeps between cycles stays equal to the one the job records give
// (Options::check_kept_cluster, checked by the fixture) through what changes holdings between
// cycles: dynamic MIG instances created and destroyed, a faulty instance moving a service's
// replica, scaling, node loss, cancellation and ends.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

constexpr int64_t kT0 = 1'800'000'000'000'000;
constexpr int64_t kSecond = 1'000'000;
const Principal kAdmin{"admin", "admin", "", "", "t-admin"};

class KeptClusterTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlane::Options options;
    options.node_timeout_us = kSecond;
    options.lost_after_us = kSecond;
    options.reclaim_timeout_us = 3 * kSecond;
    options.full_cycle_every_us = 3600 * kSecond;  // only what changed makes a cycle full
    OpenPlane("kept-cluster", options, [this] { return now_; });
    for (std::string name : {"m1", "m2"}) {
      json gpus = json::array();
      for (int i = 0; i < 2; ++i) {
        gpus.push_back({{"index", i},
                        {"uuid", absl::StrCat("GPU-", name, "-", i)},
                        {"model", "H200"},
                        {"memory_mib", 143771},
                        {"mode", "partition"},
                        {"mig_enabled", true},
                        {"dynamic_layout", true}});
      }
      auto node = cp_->Register({{"name", name},
                                 {"cpu_milli", 64000},
                                 {"memory_mib", 262144},
                                 {"backend", "simulated"},
                                 {"gpus", gpus}},
                                kAdmin);
      ASSERT_TRUE(node.ok()) << node.status();
      alive_.push_back(name);
    }
    RegisterH200Node("w1", 2, kAdmin);
    alive_.push_back("w1");
  }

  int64_t Submit(const json& spec) {
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }
  int64_t Mig(const std::string& profile, const std::string& kind = "batch", int replicas = 1) {
    return Submit({{"kind", kind},
                   {"replicas", replicas},
                   {"command", {"sleep", "600"}},
                   {"resources", {{"mode", "partition"}, {"profile", profile}}}});
  }
  json Job(int64_t id) { return *cp_->GetJob(id); }

  // What the agent of `node` reports: every replica placed there running (or exited, with its
  // reclaim, for jobs in `exit`), and its dynamic instances, `faulty` ones unhealthy.
  void Beat(const std::string& node) {
    json reports = json::array();
    std::map<int, json> instances;
    for (const json& job : Jobs(false)) {
      int64_t id = job["id"];
      for (size_t r = 0; r < job["replicas"].size(); ++r) {
        const json& rep = job["replicas"][r];
        if (rep["node"] != node || rep["state"] == "retired") continue;
        bool ends = exit_.count(id) || (rep.contains("retire") && rep["state"] != "lost") ||
                    job.value("cancel_requested", false) || !job.value("displaced", "").empty();
        if (rep["state"] != "lost") {
          json report = {{"job", id}, {"replica", r}, {"pid", 1000 + r}, {"started_us", now_}};
          if (ends) {
            report["state"] = "exited";
            report["exit_code"] = 0;
            report["reclaim"] = {{"status", "verified"}, {"checks", json::array()}};
          } else {
            report["state"] = "running";
          }
          reports.push_back(report);
        }
        for (const json& g : rep.value("grants", json::array())) {
          if (!g.contains("profile")) continue;
          int start = g.value("start", 0);
          std::string key = absl::StrCat(g.value("device", 0), "/", start);
          json m = {{"uuid", absl::StrCat("MIG-", node, "-", key)},
                    {"profile", g["profile"]},
                    {"start", start},
                    {"health", faulty_.count(node + ":" + key) ? "unhealthy" : "healthy"}};
          if (!ends) instances[g.value("device", 0)].push_back(m);
        }
      }
    }
    json gpus = json::array();
    if (node != "w1") {
      for (int i = 0; i < 2; ++i) {
        gpus.push_back({{"index", i},
                        {"health", "healthy"},
                        {"mig_instances", instances.count(i) ? instances[i] : json::array()}});
      }
    }
    json body = {{"node", node}, {"replicas", reports}};
    if (!gpus.empty()) body["gpus"] = gpus;
    auto hb = cp_->Heartbeat(body, kAdmin);
    ASSERT_TRUE(hb.ok()) << node << ": " << hb.status();
  }

  void Tick() {
    now_ += kSecond / 4;
    for (const std::string& node : alive_) Beat(node);
    ASSERT_TRUE(cp_->ScheduleOnce().ok());
    ASSERT_EQ(cp_->LastCycle().cluster_drift, 0) << "after tick " << ticks_;
    kept_ += cp_->LastCycle().cluster_kept;
    ++ticks_;
  }
  void Ticks(int n) {
    for (int i = 0; i < n; ++i) Tick();
  }

  int64_t now_ = kT0;
  int ticks_ = 0;
  int kept_ = 0;
  std::vector<std::string> alive_;
  std::set<int64_t> exit_;
  std::set<std::string> faulty_;
};

TEST_F(KeptClusterTest, HoldingsChangedBetweenCyclesKeepTheClusterTrue) {
  std::vector<int64_t> batch;
  for (const char* p : {"1g.18gb", "2g.35gb", "3g.71gb", "1g.18gb", "1g.35gb"}) {
    batch.push_back(Mig(p));
  }
  int64_t service = Mig("1g.18gb", "inference", 3);
  int64_t whole = Submit({{"kind", "inference"},
                          {"replicas", 2},
                          {"command", {"sleep", "600"}},
                          {"resources", {{"gpus", 1}}}});
  Ticks(4);
  EXPECT_EQ(Job(service)["state"], "running") << Job(service).dump(2);
  // Jobs end, freeing dynamic instances; more wait.
  exit_.insert(batch[0]);
  exit_.insert(batch[2]);
  for (int i = 0; i < 6; ++i) batch.push_back(Mig(i % 2 ? "2g.35gb" : "1g.18gb"));
  Ticks(4);
  // A service replica's instance turns faulty: it is replaced.
  json rep = Job(service)["replicas"][0];
  faulty_.insert(absl::StrCat(rep["node"].get<std::string>(), ":",
                              rep["grants"][0]["device"].get<int>(), "/",
                              rep["grants"][0]["start"].get<int>()));
  Ticks(6);
  // Scaled up, then down.
  ASSERT_TRUE(cp_->Scale(service, 5, kAdmin).ok());
  Ticks(4);
  ASSERT_TRUE(cp_->Scale(service, 2, kAdmin).ok());
  Ticks(4);
  ASSERT_TRUE(cp_->Scale(whole, 3, kAdmin).ok());
  Ticks(3);
  // A cancel, and a node lost.
  ASSERT_TRUE(cp_->Cancel(batch[1], kAdmin).ok());
  Ticks(3);
  alive_.erase(std::find(alive_.begin(), alive_.end(), "m2"));
  Ticks(12);
  ASSERT_TRUE(cp_->DeclareDead("m2", kAdmin).ok());
  Ticks(6);
  alive_.push_back("m2");
  Ticks(6);
  faulty_.clear();
  for (int64_t id : batch) exit_.insert(id);
  Ticks(10);
  EXPECT_EQ(cp_->LastCycle().cluster_drift, 0);
  EXPECT_GT(kept_, ticks_ / 2) << "most cycles planned on the kept cluster";
}

}  // namespace
}  // namespace carve
