// What the controller's periodic work costs as finished jobs pile up: a node's heartbeat and a
// scheduling cycle, with 0 .. 1,000,000 finished jobs in the store and one node running one job;
// and a restart (ControlPlane::Open) of a store with 1,000,000 jobs of which 100,000 are active.
//   carve_control_bench [--benchmark_filter=...]
// Heartbeat and cycle should cost the same whatever the history (issue 12: every heartbeat walked
// every job ever submitted, and every cycle converted each one to a placement request); finished
// jobs are not even in memory (kind job.done), so a restart loads the active ones only.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/store/sqlite_store.h"
#include "runtime/control_plane.h"
#include "runtime/job_spec.h"
#include "store_fill.h"

namespace carve {
namespace {

using json = nlohmann::json;

const Principal kAdmin{"bench", Role::kAdmin};
const Principal kNode{"n1", Role::kNode};

// Writes `count` running jobs with ids from `first`, each holding GPU 0 of one of 1,000 other
// nodes (o0 .. o999).
void FillRunning(Store& store, int first, int count) {
  JobRecord job;
  job.spec =
      *JobSpecFromJson({{"name", "other"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  job.state = JobState::kRunning;
  ReplicaRecord rep;
  rep.state = ReplicaState::kRunning;
  GrantRecord whole;
  whole.compute_milli = 1000;
  rep.grants.push_back(whole);
  job.replicas = {rep};
  StoreBatch batch;
  for (int i = first; i < first + count; ++i) {
    job.id = i;
    job.replicas[0].node = absl::StrCat("o", i % 1000);
    batch.puts.push_back({"job", absl::StrFormat("%012d", i), job.ToJson().dump()});
  }
  if (!batch.empty() && !store.Commit(std::move(batch)).ok()) std::abort();
}

// A control plane whose store holds `finished` succeeded jobs, `queued` queued ones and `running`
// ones on other nodes, one registered node with eight H200s, and one running job on it.
struct Fixture {
  std::filesystem::path dir;
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store;
  std::unique_ptr<ControlPlane> cp;
  int64_t now = 1'700'000'000'000'000;

  explicit Fixture(int finished, int queued = 0, int running = 0) {
    char tmpl[] = "/tmp/carve-control-bench-XXXXXX";
    dir = mkdtemp(tmpl);
    store = *OpenSqliteStore((dir / "carve.db").string());
    Fill(*store, 1, finished, JobState::kSucceeded);
    Fill(*store, finished + 1, queued, JobState::kQueued);
    FillRunning(*store, finished + queued + 1, running);
    ControlPlane::Options options;
    options.log_dir = (dir / "logs").string();
    options.node_timeout_us = 3600 * 1'000'000LL;
    cp = *ControlPlane::Open(store.get(), &catalog, options, [this] { return now; });
    json gpus = json::array();
    for (int i = 0; i < 8; ++i) {
      gpus.push_back({{"index", i},
                      {"uuid", absl::StrCat("GPU-", i)},
                      {"model", "H200"},
                      {"memory_mib", 143771},
                      {"mode", "exclusive"}});
    }
    if (!cp->Register({{"name", "n1"},
                       {"cpu_milli", 64000},
                       {"memory_mib", 262144},
                       {"backend", "simulated"},
                       {"gpus", gpus}},
                      Principal{"n1", Role::kAdmin})
             .ok() ||
        !cp->Submit({{"name", "live"}, {"command", {"sleep", "1"}}, {"resources", {{"gpus", 1}}}},
                    "", kAdmin)
             .ok() ||
        !cp->ScheduleOnce().ok()) {
      std::abort();
    }
  }
  ~Fixture() {
    cp.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

// One fixture per history size, shared by the benchmarks (filling 1,000,000 rows takes a while).
std::map<int, std::unique_ptr<Fixture>>& Fixtures() {
  static auto* fixtures = new std::map<int, std::unique_ptr<Fixture>>;
  return *fixtures;
}
Fixture& FixtureFor(int finished) {
  auto& f = Fixtures()[finished];
  if (!f) f = std::make_unique<Fixture>(finished);
  return *f;
}

void Heartbeat(benchmark::State& state) {
  Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  json body = {{"node", "n1"}, {"replicas", json::array()}};
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->Heartbeat(body, kNode));
  state.counters["finished_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(Heartbeat)->Arg(0)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

// A node's heartbeat while `range(0)` jobs run on 1,000 other nodes: it walked every placed job
// twice (assignments, GPU activity); it walks only its own node's now (replicas by node).
void HeartbeatAmongRunning(benchmark::State& state) {
  static auto* fixtures = new std::map<int, std::unique_ptr<Fixture>>;
  auto& f = (*fixtures)[static_cast<int>(state.range(0))];
  if (!f) f = std::make_unique<Fixture>(0, 0, static_cast<int>(state.range(0)));
  json body = {
      {"node", "n1"},
      {"replicas", json::array()},
      {"gpus", json::array({{{"index", 0}, {"health", "healthy"}, {"utilization_pct", 50}}})}};
  for (auto _ : state) benchmark::DoNotOptimize(f->cp->Heartbeat(body, kNode));
  state.counters["running_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(HeartbeatAmongRunning)->Arg(0)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void SchedulingCycle(benchmark::State& state) {
  Fixture& f = FixtureFor(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->ScheduleOnce());
  state.counters["finished_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(SchedulingCycle)->Arg(0)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

// What a reader of the controller's state costs with `range(0)` queued jobs: /metrics, the queue
// status, the node list and usage. Each holds the control plane's lock for about its whole
// duration, so every other call waits that long behind it.
std::map<int, std::unique_ptr<Fixture>>& QueuedFixtures() {
  static auto* fixtures = new std::map<int, std::unique_ptr<Fixture>>;
  return *fixtures;
}
Fixture& QueuedFixture(int queued) {
  auto& f = QueuedFixtures()[queued];
  if (!f) f = std::make_unique<Fixture>(0, queued);
  return *f;
}

void ReadMetrics(benchmark::State& state) {
  Fixture& f = QueuedFixture(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->Metrics(kAdmin));
  state.counters["queued_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(ReadMetrics)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

void ReadQueueStatus(benchmark::State& state) {
  Fixture& f = QueuedFixture(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->QueueStatus(kAdmin));
  state.counters["queued_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(ReadQueueStatus)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

void ReadUsage(benchmark::State& state) {
  Fixture& f = QueuedFixture(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(f.cp->Usage("tenant", 0, 0, kAdmin));
  state.counters["queued_jobs"] = static_cast<double>(state.range(0));
}
BENCHMARK(ReadUsage)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

// How long a call that takes the control plane's lock (JobsInMemory: nothing but the lock) waits
// while another thread reads every 20 ms (range(0): 0 /metrics, 1 queue status, 2 usage) with
// 100,000 queued jobs: the time a reader makes every other call wait. Mean per call; max_us the
// longest wait seen.
void WaitBehindReader(benchmark::State& state) {
  Fixture& f = QueuedFixture(100000);
  std::atomic<bool> stop{false};
  const int reader = static_cast<int>(state.range(0));
  std::thread loop([&] {
    while (!stop) {
      if (reader == 0) benchmark::DoNotOptimize(f.cp->Metrics(kAdmin));
      if (reader == 1) benchmark::DoNotOptimize(f.cp->QueueStatus(kAdmin));
      if (reader == 2) benchmark::DoNotOptimize(f.cp->Usage("tenant", 0, 0, kAdmin));
      // A pause between reads (a scraper's interval, shortened): back to back, the reader would
      // take the lock again at once and starve the caller (std::mutex is not fair).
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  double max_us = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(f.cp->JobsInMemory());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    max_us = std::max(max_us, s * 1e6);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a call every millisecond
  }
  stop = true;
  loop.join();
  state.counters["max_us"] = max_us;
  state.SetLabel(reader == 0 ? "metrics" : reader == 1 ? "queue status" : "usage");
}
BENCHMARK(WaitBehindReader)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Iterations(500)
    ->Unit(benchmark::kMicrosecond);

// A server restart: open the store and load it, with `range(0)` jobs in the store of which
// `range(1)` are active (queued; the rest succeeded). Wall time of ControlPlane::Open.
void Restart(benchmark::State& state) {
  const int total = static_cast<int>(state.range(0));
  const int active = static_cast<int>(state.range(1));
  char tmpl[] = "/tmp/carve-restart-bench-XXXXXX";
  std::filesystem::path dir = mkdtemp(tmpl);
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  {
    auto store = *OpenSqliteStore((dir / "carve.db").string());
    Fill(*store, 1, total - active, JobState::kSucceeded);
    Fill(*store, total - active + 1, active, JobState::kQueued);
  }
  ControlPlane::Options options;
  options.log_dir = (dir / "logs").string();
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    auto store = *OpenSqliteStore((dir / "carve.db").string());
    auto cp = ControlPlane::Open(store.get(), &catalog, options, [] { return int64_t{0}; });
    if (!cp.ok() || (*cp)->JobsInMemory() != static_cast<size_t>(active)) std::abort();
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cp->reset();
  }
  state.counters["jobs"] = total;
  state.counters["active"] = active;
  std::filesystem::remove_all(dir);
}
BENCHMARK(Restart)
    ->Args({100000, 100000})
    ->Args({1000000, 100000})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace carve

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  carve::Fixtures().clear();  // removes their stores
  carve::QueuedFixtures().clear();
  return 0;
}
