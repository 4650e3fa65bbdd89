// One queueing cycle (order, quota, gangs, backfill reservation, preemption search, placement,
// explanations) with many pending jobs across many queues on a large, busy cluster.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/sched/placement/placer.h"
#include "core/sched/queueing/cycle.h"

namespace carve {
namespace {

JobRequest Whole(int gpus, int replicas) {
  JobRequest r;
  r.replicas = replicas;
  r.replica.gpu = {DeliveryMode::kExclusive, gpus, kWholeGpu, {}, ""};
  r.replica.resources.cpu = CpuMilli(4000 * gpus);
  r.replica.resources.memory = MemMib(16384 * gpus);
  return r;
}

// `nodes` nodes of 8 H200; `queues` queues in cohorts of 10 whose nominal quotas add up to the
// cluster; the cluster ~90% full of running jobs; `pending` jobs of 1, 2, 4 or 8 GPUs (some
// gangs of 2 x 8) spread over the queues.
struct Fixture {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  Cluster cluster{&catalog};
  std::unique_ptr<PlacementPolicy> policy = *MakePolicy("best-fit", {});
  CycleInput input;

  Fixture(int nodes, int queues, int pending) {
    std::mt19937_64 rng(42);
    GpuModelId h200 = *catalog.Find("H200");
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.name = absl::StrCat("node-", i);
      n.capacity.cpu = CpuMilli(128000);
      n.capacity.memory = MemMib(1 << 20);
      for (int g = 0; g < 8; ++g) {
        Device d;
        d.index = g;
        d.model = h200;
        n.devices.push_back(d);
      }
      cluster.AddNode(std::move(n));
    }
    int64_t per_queue = int64_t{nodes} * 8 * 1000 / queues;
    for (int q = 0; q < queues; ++q) {
      QueueSpec spec;
      spec.name = absl::StrCat("q", q);
      spec.cohort = absl::StrCat("c", q / 10);
      spec.nominal["gpus"] = per_queue;
      input.queues.push_back(spec);
    }
    Placer placer(&cluster, policy.get(), 1);
    int64_t id = 1;
    const int sizes[] = {1, 1, 2, 4, 8};
    while (cluster.AllocatedGpuMilli() < int64_t{nodes} * 8 * 900) {
      JobRequest r = Whole(sizes[rng() % 5], 1);
      PlaceResult placed = placer.Place(r);
      if (!placed.placed) break;
      input.running.push_back({id++, absl::StrCat("q", rng() % queues), 100, true,
                               static_cast<int64_t>(rng() % 3600) * 1'000'000, 0, r,
                               placed.replicas, false, 0});
    }
    for (int i = 0; i < pending; ++i) {
      JobRequest r = i % 50 == 0 ? Whole(8, 2) : Whole(sizes[rng() % 5], 1);
      PendingJob p;
      p.id = id++;
      p.queue = absl::StrCat("q", rng() % queues);
      p.priority = (rng() % 3) * 100;
      p.submitted_us = static_cast<int64_t>(rng() % 7200) * 1'000'000;
      p.max_runtime_us = static_cast<int64_t>(1 + rng() % 8) * 3600 * 1'000'000;
      p.request = r;
      input.pending.push_back(std::move(p));
    }
    input.policy = policy.get();
    input.now_us = 7200 * int64_t{1'000'000};
  }
};

void ScheduleCycle(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
            static_cast<int>(state.range(2)));
  size_t binds = 0, preemptions = 0, waits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Cluster cluster = f.cluster;  // the cycle applies its binds
    CycleInput input = f.input;
    input.cluster = &cluster;
    state.ResumeTiming();
    Decisions d = Schedule(input);
    binds = d.binds.size();
    preemptions = d.preemptions.size();
    waits = d.waits.size();
    benchmark::DoNotOptimize(d);
  }
  state.counters["running"] = static_cast<double>(f.input.running.size());
  state.counters["binds"] = static_cast<double>(binds);
  state.counters["preemptions"] = static_cast<double>(preemptions);
  state.counters["waits"] = static_cast<double>(waits);
}

BENCHMARK(ScheduleCycle)
    ->Args({5000, 200, 100000})
    ->Args({1000, 50, 10000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace carve
