// Sharing quota charges and verdicts between equal requests (CycleOptions::share_quota_verdicts)
// must change no decision: randomized cycles run with and without it and compare everything.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/sched/queueing/cycle.h"
#include "fixture.h"

namespace carve {
namespace {

using testing_queueing::Gpus;
using testing_queueing::H200Cluster;
using testing_queueing::OneCycle;
using testing_queueing::Pending;
using testing_queueing::Queue;

std::string Render(const Decisions& d) {
  std::string out;
  for (const Bind& b : d.binds) {
    absl::StrAppend(&out, "bind ", b.job, " backfilled ", b.backfilled, ":");
    for (const ReplicaPlacement& p : b.replicas) {
      absl::StrAppend(&out, " n", p.node.value(), "[");
      for (const DeviceGrant& g : p.grants) absl::StrAppend(&out, g.device, ",");
      absl::StrAppend(&out, "]");
    }
    for (const auto& [resource, amount] : b.charge) absl::StrAppend(&out, " ", resource, amount);
    absl::StrAppend(&out, "\n");
  }
  for (const Preemption& p : d.preemptions) {
    absl::StrAppend(&out, "preempt ", p.victim, " for ", p.preemptor, " ", p.victim_queue, " ",
                    p.kind, " ", p.reason, "\n");
  }
  for (const WaitExplanation& w : d.waits) {
    absl::StrAppend(&out, "wait ", w.job, " at ", w.position, " ", w.Signature(), " | ", w.fix,
                    " settled ", w.settled, " reserved ", w.reserved, " ", w.reserved_start_us);
    for (const AheadOf& a : w.ahead) absl::StrAppend(&out, " ahead ", a.job, " ", a.why);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "reserved ", d.reserved_job, " from ", d.reserved_start_us, "\n");
  return out;
}

// A cluster half full of running jobs of four queues in one cohort and one alone, and pending
// jobs of a few shapes and priorities: equal requests meet the quota before and after charges.
void Fill(std::mt19937_64& rng, Cluster& cluster, CycleInput& input) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const std::vector<std::string> names = {"a", "b", "c", "d", "solo"};
  input.queues = {Queue("a", "co", 8 + pick(16)), Queue("b", "co", 8 + pick(16), 4),
                  Queue("c", "co", 4 + pick(8), -1, 2), Queue("d", "co", 4),
                  Queue("solo", "", 8 + pick(8))};
  const int shapes[] = {1, 2, 4, 8};
  auto policy = *MakePolicy("first-fit", {});
  Placer placer(&cluster, policy.get(), 0);
  for (int64_t id = 1000; id < 1000 + 6 + pick(10); ++id) {
    JobRequest request = Gpus(shapes[pick(3)]);
    PlaceResult r = placer.Place(request);
    if (!r.placed) continue;
    RunningJob j;
    j.id = id;
    j.queue = names[static_cast<size_t>(pick(5))];
    j.priority = 100 * pick(3);
    j.max_runtime_us = pick(2) * 3'600'000'000;
    j.request = request;
    j.replicas = r.replicas;
    input.running.push_back(std::move(j));
  }
  for (int64_t id = 1; id <= 40 + pick(60); ++id) {
    PendingJob p = Pending(id, names[static_cast<size_t>(pick(5))],
                           Gpus(shapes[pick(4)], 1 + pick(2) * pick(2)), 100 * pick(3));
    p.max_runtime_us = pick(2) * 600'000'000;
    p.quota_held = pick(10) == 0;
    input.pending.push_back(std::move(p));
  }
  input.now_us = 1'000'000;
}

TEST(SharedVerdicts, RandomizedCyclesDecideTheSameWithAndWithoutSharing) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    Cluster base = H200Cluster(3 + static_cast<int>(seed % 6), 8);
    CycleInput input;
    Fill(rng, base, input);
    Cluster shared_cluster = base;
    Cluster plain_cluster = base;
    OneCycle shared(&shared_cluster);
    OneCycle plain(&plain_cluster);
    shared.input = input;
    plain.input = input;
    plain.input.options.share_quota_verdicts = false;
    ASSERT_EQ(Render(shared.Run()), Render(plain.Run())) << "seed " << seed;
  }
}

}  // namespace
}  // namespace carve
