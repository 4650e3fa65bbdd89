// Scenarios for queues, quotas, preemption, gangs and backfill, on the queue simulator (the real
// queueing core on a virtual clock).
#include "sim/queue_sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace carve::sim {
namespace {

constexpr int64_t kSecond = 1'000'000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;

const GpuCatalog& Catalog() {
  static const GpuCatalog* const kCatalog = new GpuCatalog(GpuCatalog::BuiltIn());
  return *kCatalog;
}

Cluster Nodes(int nodes, int gpus) {
  Cluster cluster(&Catalog());
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = absl::StrCat("n", i);
    n.capacity.cpu = CpuMilli(256000);
    n.capacity.memory = MemMib(1 << 20);
    for (int g = 0; g < gpus; ++g) {
      Device d;
      d.index = g;
      d.model = *Catalog().Find("H200");
      n.devices.push_back(d);
    }
    cluster.AddNode(std::move(n));
  }
  return cluster;
}

QueueSimJob Job(int64_t id, const std::string& queue, int gpus, int64_t submit_us,
                int64_t duration_us, int replicas = 1) {
  QueueSimJob j;
  j.id = id;
  j.queue = queue;
  j.submitted_us = submit_us;
  j.duration_us = duration_us;
  j.request.replicas = replicas;
  j.request.replica.gpu = {DeliveryMode::kExclusive, gpus, kWholeGpu, {}, ""};
  j.request.replica.resources.cpu = CpuMilli(1000);
  j.request.replica.resources.memory = MemMib(1024);
  return j;
}

QueueSpec Quota(const std::string& name, const std::string& cohort, int gpus) {
  QueueSpec q;
  q.name = name;
  q.cohort = cohort;
  q.nominal["gpus"] = gpus * 1000;
  return q;
}

int64_t UsedAt(const QueueSimResult& r, const std::string& queue, int64_t t) {
  int64_t used = 0;
  for (const QueueSimSample& s : r.samples) {
    if (s.t_us <= t) used = s.queues.count(queue) ? s.queues.at(queue).gpu_milli : 0;
  }
  return used;
}

TEST(QueueSim, BorrowingAndReclaimBetweenTwoQueuesInACohort) {
  QueueSimOptions options;
  options.cycle_us = kSecond;
  options.stop_delay_us = 5 * kSecond;  // the victims' checkpoint grace
  QueueSim sim(Nodes(1, 8), {Quota("a", "c", 4), Quota("b", "c", 4)}, options);
  for (int i = 0; i < 8; ++i) sim.Add(Job(1 + i, "b", 1, 0, kHour));  // b borrows a's idle 4
  for (int i = 0; i < 4; ++i) sim.Add(Job(100 + i, "a", 1, kMinute, kHour));
  QueueSimResult r = sim.Run();
  ASSERT_TRUE(r.violations.empty()) << r.violations[0];
  EXPECT_EQ(UsedAt(r, "b", 30 * kSecond), 8000);  // borrowing while a is idle
  // a's guarantee is met within one cycle: every preemption it needs happens at its arrival.
  ASSERT_EQ(r.preemptions.size(), 4u);
  std::set<std::string> victim_queues;
  for (const QueueSimPreemption& p : r.preemptions) {
    EXPECT_EQ(p.t_us, kMinute);
    EXPECT_EQ(p.preemption.kind, "reclaim");
    victim_queues.insert(p.preemption.victim_queue);
  }
  EXPECT_THAT(victim_queues, ::testing::ElementsAre("b"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.jobs[100 + i].first_start_us, kMinute + 5 * kSecond);  // once victims stopped
  }
  EXPECT_EQ(UsedAt(r, "a", 2 * kMinute), 4000);
  EXPECT_EQ(UsedAt(r, "b", 2 * kMinute), 4000);  // b keeps its own nominal
}

TEST(QueueSim, NoPreemptionLoopUnderChurn) {
  std::mt19937_64 rng(7);
  QueueSimOptions options;
  options.cycle_us = kSecond;
  options.stop_delay_us = 3 * kSecond;
  QueueSim sim(Nodes(2, 8), {Quota("a", "c", 8), Quota("b", "c", 8)}, options);
  for (int i = 0; i < 400; ++i) {
    QueueSimJob j = Job(i + 1, rng() % 2 ? "a" : "b", 1 + static_cast<int>(rng() % 4),
                        static_cast<int64_t>(rng() % 3600) * kSecond,
                        static_cast<int64_t>(30 + rng() % 600) * kSecond);
    j.priority = static_cast<int64_t>(rng() % 3) * 100;
    sim.Add(j);
  }
  QueueSimResult r = sim.Run();
  ASSERT_TRUE(r.violations.empty()) << r.violations[0];
  ASSERT_FALSE(r.preemptions.empty());  // the churn does exercise preemption
  for (const QueueSimPreemption& p : r.preemptions) {
    // Every preemption makes its preemptor fit: it starts by the time its victims have stopped
    // (earlier when something else ended first), never preempting again meanwhile.
    const std::vector<int64_t>& starts = r.jobs[p.preemption.preemptor].starts;
    EXPECT_TRUE(
        std::any_of(starts.begin(), starts.end(),
                    [&](int64_t s) { return s > p.t_us && s <= p.t_us + options.stop_delay_us; }))
        << "preemptor " << p.preemption.preemptor << " at " << p.t_us;
  }
  for (const auto& [id, o] : r.jobs) EXPECT_GE(o.end_us, 0) << "job " << id << " never ended";
}

TEST(QueueSim, GangOfEightIsNeverPartiallyPlaced) {
  std::mt19937_64 rng(3);
  QueueSimOptions options;
  QueueSim sim(Nodes(4, 4), {}, options);
  for (int i = 0; i < 60; ++i) {
    bool gang = i % 5 == 0;
    sim.Add(Job(i + 1, "q", gang ? 1 : 1 + static_cast<int>(rng() % 3),
                static_cast<int64_t>(rng() % 600) * kSecond,
                static_cast<int64_t>(60 + rng() % 300) * kSecond, gang ? 8 : 1));
  }
  QueueSimResult r = sim.Run();
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];
  for (int i = 0; i < 60; i += 5) EXPECT_GE(r.jobs[i + 1].first_start_us, 0) << "gang " << i + 1;
}

TEST(QueueSim, BackfillNeverDelaysTheReservedJob) {
  std::mt19937_64 rng(11);
  QueueSimOptions options;
  options.cycle_us = kSecond;
  QueueSim sim(Nodes(2, 8), {}, options);
  int64_t id = 1;
  // Jobs declare their max runtime and keep to it; big ones wait for whole nodes.
  for (int i = 0; i < 300; ++i) {
    bool big = i % 10 == 0;
    QueueSimJob j = Job(id++, "q", big ? 8 : 1 + static_cast<int>(rng() % 2),
                        static_cast<int64_t>(rng() % 1800) * kSecond,
                        static_cast<int64_t>(60 + rng() % 900) * kSecond);
    j.max_runtime_us = j.duration_us + static_cast<int64_t>(rng() % 300) * kSecond;
    j.priority = big ? 200 : 100;
    j.preemptible = false;
    sim.Add(j);
  }
  QueueSimResult r = sim.Run();
  int reserved = 0;
  for (const auto& [job, o] : r.jobs) {
    if (o.reserved_start_us < 0) continue;
    ++reserved;
    // Ends come at declared times at the latest; a cycle may run up to one interval late.
    EXPECT_LE(o.first_start_us, o.reserved_start_us + options.cycle_us) << "job " << job;
  }
  EXPECT_GT(reserved, 5);
  int backfilled = 0;
  for (const auto& [job, o] : r.jobs) backfilled += o.first_start_us >= 0;
  EXPECT_EQ(backfilled, 300);
}

// A low-priority 8-GPU job against an endless flood of small higher-priority jobs that keeps
// every GPU busy (ten 1-GPU, 10-minute jobs arrive per 10 minutes on 8 GPUs).
QueueSimResult Flood(const AgingOptions& aging) {
  QueueSimOptions options;
  options.cycle_us = kSecond;
  options.horizon_us = 3 * kHour;
  options.cycle.aging = aging;
  QueueSim sim(Nodes(1, 8), {}, options);
  QueueSimJob big = Job(1, "q", 8, 10 * kSecond, 10 * kMinute);
  big.priority = 0;
  big.max_runtime_us = 10 * kMinute;
  sim.Add(big);
  for (int i = 0; i < 3 * 60; ++i) {
    QueueSimJob j = Job(100 + i, "q", 1, i * kMinute, 10 * kMinute);
    j.max_runtime_us = 10 * kMinute;
    j.priority = 100;
    j.preemptible = false;
    sim.Add(j);
  }
  return sim.Run();
}

TEST(QueueSim, StarvationFreeUnderAFloodOfHighPrioritySmallJobs) {
  QueueSimResult aged = Flood({10 * kSecond, 1});  // one point per 10 s waited
  ASSERT_GE(aged.jobs[1].first_start_us, 0) << "the 8-GPU job starved";
  // It overtakes the oldest waiting flood job once it has waited 1000 s longer than that one
  // (the flood's backlog ages too), then the reservation keeps backfill from taking what it
  // needs: it starts once the jobs running then have ended.
  EXPECT_LE(aged.jobs[1].first_start_us, 45 * kMinute);
  QueueSimResult unaged = Flood({0, 0});  // the control: without aging it never starts
  EXPECT_LT(unaged.jobs[1].first_start_us, 0);
}

}  // namespace
}  // namespace carve::sim
