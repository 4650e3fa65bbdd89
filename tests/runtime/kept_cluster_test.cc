// The cluster the scheduler keeps between cycles stays equal to the one the job records give
// (Options::check_kept_cluster, checked by the fixture) through what changes holdings between
// cycles: dynamic MIG instances created and destroyed, a faulty instance moving a service's
// replica, scaling, node loss, cancellation and ends.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

constexpr int64_t kSecond = 1'000'000;

class KeptClusterTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    ControlPlane::Options options;
    options.node_timeout_us = kSecond;
    options.lost_after_us = kSecond;
    options.reclaim_timeout_us = 3 * kSecond;
    options.full_cycle_every_us = 3600 * kSecond;  // only what changed makes a cycle full
    // Cycles read and explain in small slices; calls come in between (between_).
    options.plan_slice = 16;
    options.explain_slice = 8;
    options.between_slices = [this](const std::string& step) {
      if (between_) between_(step);
    };
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
    // Jobs bigger than any node are part of the mix: queued, not refused.
    auto job = cp_->Submit(spec, "", kAdmin, /*allow_unschedulable=*/true);
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
            report["reclaim"] = VerifiedReclaim();
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
    if (auto fixed = static_.find(node); fixed != static_.end()) {
      for (const auto& [gpu, layout] : fixed->second) {
        json listed = json::array();
        for (json m : layout) {
          std::string key = absl::StrCat(gpu, "/", m["start"].get<int>());
          m["health"] = faulty_.count(node + ":" + key) ? "unhealthy" : "healthy";
          listed.push_back(m);
        }
        gpus.push_back({{"index", gpu}, {"health", "healthy"}, {"mig_instances", listed}});
      }
    } else if (node[0] == 'm') {
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

  // A node whose GPU 0 has seven 1g.18gb instances and GPU 1 two 2g.35gb and a 3g.71gb (a
  // static layout), and a node of two shared H200s.
  void AddStaticAndSharedNodes() {
    json gpus = json::array();
    std::vector<std::vector<std::pair<std::string, int>>> layouts = {
        {{"1g.18gb", 0},
         {"1g.18gb", 1},
         {"1g.18gb", 2},
         {"1g.18gb", 3},
         {"1g.18gb", 4},
         {"1g.18gb", 5},
         {"1g.18gb", 6}},
        {{"2g.35gb", 0}, {"2g.35gb", 2}, {"3g.71gb", 4}}};
    for (int i = 0; i < 2; ++i) {
      json instances = json::array();
      for (const auto& [profile, start] : layouts[i]) {
        instances.push_back({{"uuid", absl::StrCat("MIG-s1-", i, "-", start)},
                             {"profile", profile},
                             {"start", start}});
      }
      static_["s1"][i] = instances;
      gpus.push_back({{"index", i},
                      {"uuid", absl::StrCat("GPU-s1-", i)},
                      {"model", "H200"},
                      {"memory_mib", 143771},
                      {"mode", "partition"},
                      {"mig_enabled", true},
                      {"mig_instances", instances}});
    }
    json shared = json::array();
    for (int i = 0; i < 2; ++i) {
      shared.push_back({{"index", i},
                        {"uuid", absl::StrCat("GPU-sh1-", i)},
                        {"model", "H200"},
                        {"memory_mib", 143771},
                        {"mode", "shared"}});
    }
    for (const auto& [name, list] : {std::pair<std::string, json>{"s1", gpus}, {"sh1", shared}}) {
      auto node = cp_->Register({{"name", name},
                                 {"cpu_milli", 64000},
                                 {"memory_mib", 262144},
                                 {"backend", "simulated"},
                                 {"gpus", list}},
                                kAdmin);
      ASSERT_TRUE(node.ok()) << node.status();
      alive_.push_back(name);
    }
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
  std::function<void(const std::string&)> between_;
  std::map<std::string, std::map<int, json>> static_;  // node -> GPU -> its fixed layout
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

// Static MIG instances and GPU shares, taken by preemptible jobs and preempted by jobs of higher
// priority, a faulty static instance, and cancels: the kept cluster stays true.
TEST_F(KeptClusterTest, PreemptionOfStaticInstancesAndSharesKeepsTheClusterTrue) {
  AddStaticAndSharedNodes();
  auto submit = [&](const json& resources, int priority, bool preemptible, int replicas = 1) {
    return Submit({{"kind", replicas > 1 ? "inference" : "batch"},
                   {"replicas", replicas},
                   {"priority", priority},
                   {"preemptible", preemptible},
                   {"command", {"sleep", "600"}},
                   {"resources", resources}});
  };
  const json small = {{"mode", "partition"}, {"profile", "1g.18gb"}};
  const json mid = {{"mode", "partition"}, {"profile", "2g.35gb"}};
  const json share = {{"mode", "shared"}, {"gpu_compute", "30%"}};
  std::vector<int64_t> low, high;
  for (int i = 0; i < 12; ++i) low.push_back(submit(i % 3 == 0 ? share : small, 10, true));
  low.push_back(submit(mid, 10, true, 2));
  low.push_back(submit({{"gpus", 1}}, 10, true, 2));
  Ticks(4);
  for (int i = 0; i < 8; ++i) high.push_back(submit(i % 2 ? share : mid, 1000, false));
  high.push_back(submit({{"gpus", 2}}, 1000, false));
  Ticks(8);
  faulty_.insert("s1:0/3");
  Ticks(4);
  ASSERT_TRUE(cp_->Cancel(high[0], kAdmin).ok());
  ASSERT_TRUE(cp_->Cancel(low.back(), kAdmin).ok());
  Ticks(4);
  faulty_.clear();
  for (int64_t id : high) exit_.insert(id);
  Ticks(10);
  size_t preempted = 0;
  const json events = cp_->audit().Events(0, 100000).value();
  for (const json& e : events) preempted += e["type"] == "job.preempted";
  EXPECT_GT(preempted, 0u);
  EXPECT_GT(kept_, ticks_ / 2) << "most cycles planned on the kept cluster";
}

// Random work on every kind of device (seeded, so a failure repeats): submissions of every
// shape and priority, ends, cancels, scaling, faulty instances, drains, nodes silent, declared
// dead and back. (Run with other seeds and more rounds while reviewing: no drift.)
TEST_F(KeptClusterTest, RandomWorkKeepsTheClusterTrue) {
  AddStaticAndSharedNodes();
  // CARVE_TEST_SEED=N runs it with another seed.
  const char* seed = std::getenv("CARVE_TEST_SEED");
  std::mt19937 rng(seed != nullptr ? std::atoi(seed) : 20261202);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const std::vector<json> shapes = {{{"mode", "partition"}, {"profile", "1g.18gb"}},
                                    {{"mode", "partition"}, {"profile", "2g.35gb"}},
                                    {{"mode", "partition"}, {"profile", "3g.71gb"}},
                                    {{"mode", "shared"}, {"gpu_compute", "30%"}},
                                    {{"mode", "shared"}, {"gpu_compute", "60%"}},
                                    {{"gpus", 1}},
                                    {{"gpus", 2}}};
  std::vector<int64_t> ids, services;
  // Between slices of a cycle: a node reports (jobs end), a job is cancelled or submitted.
  between_ = [&](const std::string&) {
    int what = pick(8);
    if (what == 0) {
      Beat(alive_[pick(static_cast<int>(alive_.size()))]);
    } else if (what == 1 && !ids.empty()) {
      int64_t id = ids[pick(static_cast<int>(ids.size()))];
      exit_.insert(id);
      (void)cp_->Cancel(id, kAdmin);
    } else if (what == 2) {
      ids.push_back(Submit({{"command", {"sleep", "600"}},
                            {"resources", shapes[pick(static_cast<int>(shapes.size()))]}}));
    }
  };
  for (int round = 0; round < 120; ++round) {
    SCOPED_TRACE(round);
    for (int n = pick(3); n > 0; --n) {
      bool service = pick(4) == 0;
      int64_t id = Submit({{"kind", service ? "inference" : "batch"},
                           {"replicas", service ? 1 + pick(3) : 1},
                           {"priority", pick(2) ? 10 : 1000},
                           {"preemptible", pick(3) != 0},
                           {"command", {"sleep", "600"}},
                           {"resources", shapes[pick(static_cast<int>(shapes.size()))]}});
      ids.push_back(id);
      if (service) services.push_back(id);
    }
    if (!ids.empty() && pick(3) == 0) exit_.insert(ids[pick(static_cast<int>(ids.size()))]);
    if (!ids.empty() && pick(6) == 0)
      (void)cp_->Cancel(ids[pick(static_cast<int>(ids.size()))], kAdmin);
    if (!services.empty() && pick(5) == 0) {
      (void)cp_->Scale(services[pick(static_cast<int>(services.size()))], 1 + pick(4), kAdmin);
    }
    if (pick(10) == 0) {
      std::string node = pick(2) ? "s1" : "m1";
      faulty_.insert(absl::StrCat(node, ":", pick(2), "/", pick(7)));
    }
    if (pick(10) == 0) faulty_.clear();
    if (round == 40) alive_.erase(std::find(alive_.begin(), alive_.end(), "m2"));
    if (round == 60) alive_.push_back("m2");
    if (round == 80) alive_.erase(std::find(alive_.begin(), alive_.end(), "s1"));
    if (round == 95) (void)cp_->DeclareDead("s1", kAdmin);
    if (round == 115) alive_.push_back("s1");
    if (round % 37 == 0) (void)cp_->Cordon("sh1", "drain", -1, kAdmin);
    if (round % 37 == 5) (void)cp_->Cordon("sh1", "uncordon", -1, kAdmin);
    Tick();
  }
  EXPECT_GT(kept_, ticks_ / 3) << "cycles planned on the kept cluster";
}

}  // namespace
}  // namespace carve
