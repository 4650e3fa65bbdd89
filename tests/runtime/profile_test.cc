// The workload profile from usage rows: groups per kind and queue, nearest-rank percentiles,
// failure and preemption rates per job (not per attempt), and what is not measured said so.
#include "runtime/profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using json = nlohmann::json;

json Row(int64_t job, int attempt, const std::string& kind, const std::string& end,
         int64_t queued_s, int64_t started_s, int64_t ended_s, double gpus, int replicas = 1,
         const std::string& reason = "") {
  json devices = json::array();
  for (int i = 0; i < replicas; ++i) devices.push_back({{"gpus", gpus}, {"model", "H200"}});
  return {{"job", job},
          {"attempt", attempt},
          {"kind", kind},
          {"queue", "q"},
          {"mode", gpus < 1 ? "shared" : "exclusive"},
          {"replicas", replicas},
          {"end", end},
          {"end_reason", reason},
          {"queued_us", queued_s * 1'000'000},
          {"started_us", started_s * 1'000'000},
          {"held_from_us", started_s * 1'000'000},
          {"held_to_us", ended_s * 1'000'000},
          {"ended_us", ended_s * 1'000'000},
          {"devices", devices}};
}

TEST(WorkloadProfileTest, GroupsPerKindAndQueueWithRatesPerJob) {
  json rows = json::array({
      Row(1, 0, "training", "retried", 0, 10, 3610, 1, 2, "preempted by job 9"),
      Row(1, 1, "training", "succeeded", 0, 4000, 7600, 1, 2),
      Row(2, 0, "training", "failed", 100, 130, 200, 1),
      Row(3, 0, "batch", "succeeded", 0, 1, 2, 0.25),
  });
  json p = WorkloadProfile(rows);
  ASSERT_EQ(p["groups"].size(), 2u);
  const json& batch = p["groups"][0];
  const json& training = p["groups"][1];
  EXPECT_EQ(batch["kind"], "batch");
  EXPECT_EQ(batch["gpus_per_replica"], (json{{"0.25", 1}}));
  EXPECT_EQ(training["jobs"], 2);
  EXPECT_EQ(training["attempts"], 3);
  // Waits of first attempts only (10 s and 30 s); runs of every attempt (3600, 3600, 70).
  EXPECT_EQ(training["wait_s"]["p50"], 10.0);
  EXPECT_EQ(training["wait_s"]["p95"], 30.0);
  EXPECT_EQ(training["run_s"]["p50"], 3600.0);
  EXPECT_EQ(training["failed"], 1);
  EXPECT_EQ(training["failure_rate"], 0.5);
  EXPECT_EQ(training["preempted"], 1);
  EXPECT_EQ(training["preemption_rate"], 0.5);
  EXPECT_EQ(training["gpus_per_replica"], (json{{"1", 3}}));
  EXPECT_NEAR(training["gpu_hours"].get<double>(), 2 * 1.0 + 2 * 1.0 + 70.0 / 3600, 1e-9);
  EXPECT_EQ(p["not_measured"].size(), 3u);
}

TEST(WorkloadProfileTest, NoRowsGiveNoGroupsAndNoFigures) {
  json p = WorkloadProfile(json::array());
  EXPECT_TRUE(p["groups"].empty());
  EXPECT_EQ(p["rows"], 0);
}

}  // namespace
}  // namespace carve
