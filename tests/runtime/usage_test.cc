// Usage records and the utilization matrix on a real control plane and SQLite store with a
// controlled clock, so every figure has an exact expected value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1'800'000'000'000'000;  // a whole minute
constexpr int64_t kMin = 60'000'000;
const Principal kAdmin{"admin", Role::kAdmin, "", "", "t-admin"};
const Principal kAgent{"n1", Role::kNode, "", "", "t-node"};  // n1's node credential

class UsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("usage-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open();
    ASSERT_TRUE(cp_->AccrueUtilization().ok());  // the ledger starts at kT0
    json gpus = json::array();
    for (int i = 0; i < 2; ++i) {
      gpus.push_back({{"index", i},
                      {"uuid", absl::StrCat("GPU-h", i)},
                      {"model", "H200"},
                      {"memory_mib", 143771},
                      {"mode", "exclusive"}});
    }
    gpus.push_back({{"index", 2},
                    {"uuid", "GPU-a"},
                    {"model", "A100-80GB"},
                    {"memory_mib", 81920},
                    {"mode", "partition"},
                    {"mig_enabled", true},
                    {"dynamic_layout", true}});
    auto node = cp_->Register({{"name", "n1"},
                               {"cpu_milli", 64000},
                               {"memory_mib", 262144},
                               {"backend", "simulated"},
                               {"labels", {{"pool", "train"}}},
                               {"gpus", gpus}},
                              kAgent);
    ASSERT_TRUE(node.ok()) << node.status();
    ASSERT_TRUE(cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                        {{"kind", "tenant"}, {"name", "globex"}}}),
                           kAdmin)
                    .ok());
  }

  void Open() {
    cp_.reset();
    store_.reset();
    store_ = *OpenSqliteStore((dir_ / "carve.db").string());
    ControlPlane::Options options;
    options.log_dir = (dir_ / "logs").string();
    options.node_timeout_us = node_timeout_us_;
    cp_ = *ControlPlane::Open(store_.get(), &catalog_, options, [this] { return now_; });
  }

  int64_t SubmitJob(json spec) {
    spec["command"] = {"true"};
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }

  // The agent reports the job's replica exited with `code` and its devices came back.
  void End(int64_t job, int code) {
    json report = {
        {"job", job},        {"replica", 0},      {"state", "exited"},           {"pid", 100 + job},
        {"started_us", kT0}, {"exit_code", code}, {"reclaim", VerifiedReclaim()}};
    ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}, {"replicas", {report}}}, kAgent).ok());
  }

  // A one-H200 job that holds its GPU for a minute until n1 is drained, and is queued to run
  // again.
  int64_t RetriedAfterAMinute() {
    int64_t a = SubmitJob({{"tenant", "acme"},
                           {"kind", "batch"},
                           {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
    EXPECT_EQ(*cp_->ScheduleOnce(), 1);
    now_ = kT0 + kMin;
    EXPECT_TRUE(cp_->Cordon("n1", "drain", -1, kAdmin).ok());  // stops it; it runs again
    End(a, 143);
    return a;
  }

  static const json& Row(const json& matrix, const std::string& pool, const std::string& model) {
    for (const json& r : matrix["rows"]) {
      if (r["pool"] == pool && r["model"] == model) return r;
    }
    static const json kNone;
    ADD_FAILURE() << "no row " << pool << "/" << model << " in " << matrix.dump(1);
    return kNone;
  }

  static double Figure(const json& row, const std::string& name) {
    for (const json& f : row["figures"]) {
      if (f["figure"] == name) return f["value"].is_null() ? -1 : f["value"].get<double>();
    }
    ADD_FAILURE() << "no figure " << name;
    return -2;
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  std::filesystem::path dir_;
  int64_t now_ = kT0;
  int64_t node_timeout_us_ = 3600 * 1'000'000LL;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ControlPlane> cp_;
};

// What the denominators leave out, minute by minute. n1 (2 H200, an A100) heartbeats; n2 (one
// H200) falls silent. Minute 1: the A100 is under a MIG re-layout, n2 is not ready. Minute 2: n1
// is in an active maintenance window, and n2 was declared dead. Before, a declared-dead node
// counted as online and schedulable, and a window or a re-layout as schedulable.
TEST_F(UsageTest, DenominatorsLeaveOutMaintenanceRelayoutsAndDeadNodes) {
  node_timeout_us_ = 30'000'000;
  Open();
  ASSERT_TRUE(cp_->AccrueUtilization().ok());  // the ledger starts at kT0 again
  auto n2 = cp_->Register({{"name", "n2"},
                           {"cpu_milli", 64000},
                           {"memory_mib", 262144},
                           {"backend", "simulated"},
                           {"labels", {{"pool", "train"}}},
                           {"gpus",
                            {{{"index", 0},
                              {"uuid", "GPU-n2"},
                              {"model", "H200"},
                              {"memory_mib", 143771},
                              {"mode", "exclusive"}}}}},
                          kAdmin);
  ASSERT_TRUE(n2.ok()) << n2.status();
  auto relayout = cp_->Relayout("n1", 2, {{"layout", {"3g.40gb@0"}}}, kAdmin);
  ASSERT_TRUE(relayout.ok()) << relayout.status();
  auto beat = [&] { ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}}, kAgent).ok()); };
  now_ = kT0 + kMin;
  beat();
  ASSERT_TRUE(cp_->ScheduleOnce().ok());  // n2 silent for a minute: not ready
  ASSERT_TRUE(cp_->AccrueUtilization().ok());
  ASSERT_TRUE(cp_->DeclareDead("n2", kAdmin).ok());
  auto window = cp_->Maintenance("n1", {{"starts_in", "0s"}, {"lasts", "1h"}}, kAdmin);
  ASSERT_TRUE(window.ok()) << window.status();
  now_ = kT0 + 2 * kMin;
  beat();
  ASSERT_TRUE(cp_->ScheduleOnce().ok());  // the window starts
  ASSERT_EQ(cp_->ListNodes()[0]["maintenance"]["phase"], "active");
  ASSERT_TRUE(cp_->AccrueUtilization().ok());

  json per_minute = *cp_->Utilization(kT0, kT0 + 2 * kMin, kMin);
  ASSERT_EQ(per_minute["series"].size(), 2u);
  const double h = 3600;
  auto hours = [&](int minute, const char* model) {
    return Row(per_minute["series"][minute], "train", model)["gpu_hours"];
  };
  // Minute 1: n2 not ready; the A100 under its re-layout.
  EXPECT_DOUBLE_EQ(hours(0, "H200-141GB")["installed"].get<double>(), 180 / h);
  EXPECT_DOUBLE_EQ(hours(0, "H200-141GB")["online"].get<double>(), 120 / h);
  EXPECT_DOUBLE_EQ(hours(0, "H200-141GB")["schedulable"].get<double>(), 120 / h);
  EXPECT_DOUBLE_EQ(hours(0, "A100-80GB")["online"].get<double>(), 60 / h);
  EXPECT_DOUBLE_EQ(hours(0, "A100-80GB")["schedulable"].get<double>(), 0);
  // Minute 2: n2 declared dead (not online); n1 in its window (nothing schedulable).
  EXPECT_DOUBLE_EQ(hours(1, "H200-141GB")["installed"].get<double>(), 180 / h);
  EXPECT_DOUBLE_EQ(hours(1, "H200-141GB")["online"].get<double>(), 120 / h);
  EXPECT_DOUBLE_EQ(hours(1, "H200-141GB")["schedulable"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(hours(1, "A100-80GB")["schedulable"].get<double>(), 0);
  // The gauges say the same now.
  const std::string metrics = cp_->Metrics(kAdmin);
  EXPECT_THAT(metrics,
              HasSubstr("carve_gpus{model=\"H200-141GB\",pool=\"train\",state=\"online\"} 2"));
  EXPECT_THAT(metrics, Not(HasSubstr("state=\"schedulable\"")));
}

// Two minutes: a whole H200 for job A (acme, succeeds after one minute), a 3g.40gb MIG instance
// of the A100 for job B (globex, fails after two); H200 GPU 1 cordoned in the second minute; the
// agent reports H200 GPU 0 half busy throughout.
TEST_F(UsageTest, MatrixAndUsageHaveExactFigures) {
  int64_t a = SubmitJob({{"name", "a"},
                         {"tenant", "acme"},
                         {"kind", "training"},
                         {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}});
  int64_t b = SubmitJob({{"name", "b"},
                         {"tenant", "globex"},
                         {"kind", "evaluation"},
                         {"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}});
  ASSERT_EQ(*cp_->ScheduleOnce(), 2);
  ASSERT_TRUE(
      cp_->Heartbeat({{"node", "n1"}, {"gpus", {{{"index", 0}, {"utilization_pct", 50}}}}}, kAgent)
          .ok());
  now_ = kT0 + kMin;
  ASSERT_TRUE(cp_->AccrueUtilization().ok());
  End(a, 0);
  ASSERT_TRUE(cp_->Cordon("n1", "cordon", 1, kAdmin).ok());
  now_ = kT0 + 2 * kMin;
  ASSERT_TRUE(cp_->AccrueUtilization().ok());
  End(b, 1);
  ASSERT_EQ((*cp_->GetJob(a))["state"], "succeeded");
  ASSERT_EQ((*cp_->GetJob(b))["state"], "failed");

  // Figures survive a restart: the ledger is in the store.
  Open();
  json m = *cp_->Utilization(kT0, kT0 + 2 * kMin);
  EXPECT_EQ(m["from_us"], kT0);
  EXPECT_EQ(m["to_us"], kT0 + 2 * kMin);
  const double h = 3600;
  const json& h200 = Row(m, "train", "H200-141GB")["gpu_hours"];
  EXPECT_DOUBLE_EQ(h200["installed"].get<double>(), 240 / h);  // 2 GPUs x 120 s
  EXPECT_DOUBLE_EQ(h200["online"].get<double>(), 240 / h);
  EXPECT_DOUBLE_EQ(h200["schedulable"].get<double>(), 180 / h);  // GPU 1 cordoned 60 s
  EXPECT_DOUBLE_EQ(h200["allocated"].get<double>(), 60 / h);     // job A, 60 s
  EXPECT_DOUBLE_EQ(h200["productive"].get<double>(), 60 / h);    // A succeeded
  EXPECT_DOUBLE_EQ(h200["busy"].get<double>(), 60 / h);          // 0.5 x 120 s
  EXPECT_DOUBLE_EQ(h200["busy_reported"].get<double>(), 120 / h);
  const json& a100 = Row(m, "train", "A100-80GB")["gpu_hours"];
  EXPECT_DOUBLE_EQ(a100["installed"].get<double>(), 120 / h);
  EXPECT_DOUBLE_EQ(a100["schedulable"].get<double>(), 120 / h);
  EXPECT_NEAR(a100["allocated"].get<double>(), 3.0 / 7 * 120 / h, 1e-12);  // 3 of 7 slices
  EXPECT_DOUBLE_EQ(a100["productive"].get<double>(), 0);                   // B failed
  EXPECT_DOUBLE_EQ(Figure(Row(m, "train", "H200-141GB"), "allocated/installed"), 0.25);
  EXPECT_DOUBLE_EQ(Figure(Row(m, "train", "H200-141GB"), "allocated/schedulable"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(Figure(Row(m, "train", "H200-141GB"), "busy/online"), 0.25);
  EXPECT_NEAR(Figure(Row(m, "train", "A100-80GB"), "allocated/installed"), 3.0 / 7, 1e-12);
  EXPECT_NEAR(Figure(Row(m, "*", "*"), "allocated/installed"), (60 + 3.0 / 7 * 120) / 360, 1e-12);
  EXPECT_NEAR(Figure(Row(m, "train", "*"), "productive/allocated"), 60 / (60 + 3.0 / 7 * 120),
              1e-12);
  for (const json& f : Row(m, "*", "*")["figures"]) {
    EXPECT_EQ(f["figure"], absl::StrCat(f["numerator"].get<std::string>(), "/",
                                        f["denominator"].get<std::string>()));
  }

  // Minute by minute (the dashboard's chart): each piece has its own figures, and the range's
  // are the same as without a step.
  json per_minute = *cp_->Utilization(kT0, kT0 + 2 * kMin, kMin);
  EXPECT_EQ(per_minute["rows"], m["rows"]);
  ASSERT_EQ(per_minute["series"].size(), 2u);
  EXPECT_EQ(per_minute["series"][1]["from_us"], kT0 + kMin);
  const json& first = Row(per_minute["series"][0], "train", "H200-141GB")["gpu_hours"];
  const json& second = Row(per_minute["series"][1], "train", "H200-141GB")["gpu_hours"];
  EXPECT_DOUBLE_EQ(first["allocated"].get<double>(), 60 / h);  // job A, the first minute only
  EXPECT_DOUBLE_EQ(second["allocated"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(first["schedulable"].get<double>(), 120 / h);
  EXPECT_DOUBLE_EQ(second["schedulable"].get<double>(), 60 / h);  // GPU 1 cordoned
  EXPECT_NEAR(
      Row(per_minute["series"][1], "train", "A100-80GB")["gpu_hours"]["allocated"].get<double>(),
      3.0 / 7 * 60 / h, 1e-12);
  EXPECT_FALSE(cp_->Utilization(kT0, kT0 + 2 * kMin, kMin / 2).ok());  // not whole minutes
  EXPECT_FALSE(cp_->Utilization(kT0 - 2000 * kMin, kT0, kMin).ok());   // too many pieces
  // A step longer than the range is one piece (no overflow at the largest whole minute).
  const int64_t huge = std::numeric_limits<int64_t>::max() / kMin * kMin;
  auto one = cp_->Utilization(kT0, kT0 + 2 * kMin, huge);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->at("series").size(), 1u);
  EXPECT_EQ(one->at("series")[0]["to_us"], one->at("to_us"));  // wrapped negative before

  // Usage by tenant over the whole range, and clipped to [0:30, 1:30).
  auto by_tenant = cp_->Usage("tenant", kT0, kT0 + 2 * kMin, kAdmin);
  ASSERT_TRUE(by_tenant.ok());
  std::map<std::string, json> rows;
  for (const json& r : (*by_tenant)["rows"]) rows[r["tenant"]] = r;
  EXPECT_DOUBLE_EQ(rows["acme"]["gpu_hours"].get<double>(), 60 / h);
  EXPECT_DOUBLE_EQ(rows["acme"]["productive_gpu_hours"].get<double>(), 60 / h);
  EXPECT_DOUBLE_EQ(rows["acme"]["cpu_core_hours"].get<double>(), 60 / h);  // 1 CPU, 60 s
  EXPECT_DOUBLE_EQ(rows["acme"]["memory_gib_hours"].get<double>(), 60 / h);
  EXPECT_NEAR(rows["globex"]["gpu_hours"].get<double>(), 3.0 / 7 * 120 / h, 1e-12);
  EXPECT_DOUBLE_EQ(rows["globex"]["productive_gpu_hours"].get<double>(), 0);
  EXPECT_EQ(rows["acme"]["jobs"], 1);
  auto clipped = cp_->Usage("model", kT0 + kMin / 2, kT0 + 3 * kMin / 2, kAdmin);
  ASSERT_TRUE(clipped.ok());
  std::map<std::string, double> by_model;
  for (const json& r : (*clipped)["rows"]) by_model[r["model"]] = r["gpu_hours"];
  EXPECT_DOUBLE_EQ(by_model["H200-141GB"], 30 / h);
  EXPECT_NEAR(by_model["A100-80GB"], 3.0 / 7 * 60 / h, 1e-12);

  // One record per job: who, where, what it got, when, how it ended.
  json records = cp_->UsageRecords(0, 0, kAdmin);
  ASSERT_EQ(records.size(), 2u);
  const json& ra = records[0];
  EXPECT_EQ(ra["job"], a);
  EXPECT_EQ(ra["user"], "admin");
  EXPECT_EQ(ra["tenant"], "acme");
  EXPECT_EQ(ra["kind"], "training");
  EXPECT_EQ(ra["end"], "succeeded");
  EXPECT_EQ(ra["queued_us"], kT0);
  EXPECT_EQ(ra["held_from_us"], kT0);
  EXPECT_EQ(ra["held_to_us"], kT0 + kMin);
  EXPECT_EQ(ra["devices"][0]["node"], "n1");
  EXPECT_EQ(ra["devices"][0]["model"], "H200-141GB");
  EXPECT_DOUBLE_EQ(ra["gpu_seconds"].get<double>(), 60);
  EXPECT_EQ(records[1]["devices"][0]["mig_profile"], "3g.40gb");
  EXPECT_EQ(records[1]["end"], "failed");
  // A tenant's view holds only its own records.
  Principal acme{"ann", Role::kTenantAdmin, "acme", "", "t-ann"};
  EXPECT_EQ(cp_->UsageRecords(0, 0, acme).size(), 1u);
  EXPECT_FALSE(cp_->Usage("colour", 0, 0, kAdmin).ok());
}

// A job the platform ran again keeps the earlier attempt's device time in its usage.
TEST_F(UsageTest, EarlierAttemptsCountInUsage) {
  int64_t a = 0;
  ASSERT_NO_FATAL_FAILURE(a = RetriedAfterAMinute());
  ASSERT_EQ((*cp_->GetJob(a))["state"], "queued");
  json records = cp_->UsageRecords(0, kT0 + 2 * kMin, kAdmin);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["end"], "retried");
  EXPECT_THAT(records[0]["end_reason"].get<std::string>(), HasSubstr("drain"));
  EXPECT_DOUBLE_EQ(records[0]["gpu_seconds"].get<double>(), 60);
  // The attempt's row was written when it ended, while its job still waits to run again (it was
  // written only when the job ended, and recomputed from the job's record until then).
  auto stored = store_->Load("usage");
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(json::parse((*stored)[0].json)["attempt"], 0);

  // The second attempt runs for a minute and succeeds: two rows, one per attempt, and the
  // utilization matrix counts both minutes once.
  ASSERT_EQ(*cp_->ScheduleOnce(), 0);  // n1 is drained: nowhere to go
  ASSERT_TRUE(cp_->Cordon("n1", "uncordon", -1, kAdmin).ok());
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  now_ = kT0 + 2 * kMin;
  End(a, 0);
  records = cp_->UsageRecords(0, kT0 + 3 * kMin, kAdmin);
  ASSERT_EQ(records.size(), 2u) << records.dump(1);
  EXPECT_EQ(records[1]["end"], "succeeded");
  EXPECT_DOUBLE_EQ(records[1]["gpu_seconds"].get<double>(), 60);
  json matrix = *cp_->Utilization(kT0, kT0 + 3 * kMin);
  EXPECT_NEAR(Row(matrix, "train", "H200-141GB")["gpu_hours"]["allocated"].get<double>(), 2.0 / 60,
              1e-9);
}

// A job's record from before attempts had their own usage rows (written only when the job
// ended): the restart writes its earlier attempts' rows.
TEST_F(UsageTest, ARestartWritesTheRowsOfEarlierAttemptsStoredBefore) {
  int64_t a = 0;
  ASSERT_NO_FATAL_FAILURE(a = RetriedAfterAMinute());
  StoreBatch erase;  // as an older server left it: no row until the job ends
  auto rows = store_->Load("usage");
  ASSERT_TRUE(rows.ok()) << rows.status();
  for (const StoredRecord& r : *rows) erase.deletes.push_back({"usage", r.id});
  ASSERT_TRUE(store_->Commit(std::move(erase)).ok());
  Open();
  auto stored = store_->Load("usage");
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(json::parse((*stored)[0].json)["job"], a);
  EXPECT_EQ(cp_->UsageRecords(0, 0, kAdmin).size(), 1u);
}

}  // namespace
}  // namespace carve
