// Placement and release on synthetic mixed clusters of 1k, 5k and 20k nodes, held near 70% GPU
// load: each iteration places one trace-shaped job and gives it back.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "core/sched/placement/placer.h"
#include "sim/synth.h"

namespace carve {
namespace {

struct Fixture {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  Cluster cluster{&catalog};
  std::vector<JobRequest> jobs;
  std::unique_ptr<PlacementPolicy> policy;
  std::unique_ptr<Placer> placer;

  Fixture(int nodes, const std::string& name, Placer::Strategy strategy) {
    std::mt19937_64 rng(42);
    for (Node& n : sim::SyntheticNodes(nodes, 8, catalog, rng)) cluster.AddNode(std::move(n));
    for (int i = 0; i < 4096; ++i) jobs.push_back(sim::SyntheticJob(catalog, rng));
    policy = *MakePolicy(name, PolicyOptions{sim::WorkloadOf(jobs)});
    placer = std::make_unique<Placer>(&cluster, policy.get(), 1, strategy);
    int64_t target = cluster.total_gpus() * 700;  // 70% of GPU milli
    for (size_t i = 0; cluster.AllocatedGpuMilli() < target && i < 40 * jobs.size(); i += 64) {
      for (int k = 0; k < 64; ++k) placer->Place(jobs[(i + k) % jobs.size()]);
    }
  }
};

void PlaceAndRelease(benchmark::State& state, const std::string& policy,
                     Placer::Strategy strategy) {
  Fixture f(static_cast<int>(state.range(0)), policy, strategy);
  size_t i = 0;
  int64_t placed = 0;
  for (auto _ : state) {
    PlaceResult r = f.placer->Place(f.jobs[i++ % f.jobs.size()]);
    if (r.placed) {
      ++placed;
      f.placer->Release(r.replicas);
    }
  }
  state.counters["placed_pct"] =
      100.0 * static_cast<double>(placed) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
}

void BM_PlaceReleaseCarve(benchmark::State& s) {
  PlaceAndRelease(s, "carve", Placer::Strategy::kIndexed);
}
void BM_PlaceReleaseFgd(benchmark::State& s) {
  PlaceAndRelease(s, "fgd", Placer::Strategy::kIndexed);
}
void BM_PlaceReleaseBestFit(benchmark::State& s) {
  PlaceAndRelease(s, "best-fit", Placer::Strategy::kIndexed);
}
void BM_PlaceReleaseCarveScan(benchmark::State& s) {
  PlaceAndRelease(s, "carve", Placer::Strategy::kScan);
}

// Release alone: place untimed, time the release.
void BM_Release(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)), "carve", Placer::Strategy::kIndexed);
  size_t i = 0;
  for (auto _ : state) {
    state.PauseTiming();
    PlaceResult r = f.placer->Place(f.jobs[i++ % f.jobs.size()]);
    state.ResumeTiming();
    if (r.placed) f.placer->Release(r.replicas);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_PlaceReleaseCarve)->Arg(1000)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlaceReleaseFgd)->Arg(1000)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlaceReleaseBestFit)->Arg(1000)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlaceReleaseCarveScan)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Release)->Arg(1000)->Arg(5000)->Arg(20000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace carve

BENCHMARK_MAIN();
