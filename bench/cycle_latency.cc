// API latency while the scheduler runs a large cycle in a loop (issue 12): N nodes of eight H200,
// Q queues, P queued jobs; the server's scheduling loop runs back to back while C clients submit
// jobs and read them back through the REST API. Prints p50/p99/max of each call and what the
// cycles cost.
//   carve_latency_bench [--nodes 5000] [--queues 200] [--pending 100000] [--clients 8]
//                       [--seconds 20] [--dir DIR]
//   carve_latency_bench --cycles K [--submit-per-cycle M] [--priorities 3] [--preemptible 1] [...]
// The second form runs K cycles directly after the first, with M one-GPU submissions before
// each (the steady state: the cluster full, a trickle of new work), and prints each cycle's
// wall time and the percentiles over the K; no clients, no HTTP. The queued jobs have priorities
// 0, 100, ... (--priorities of them; with more than one, higher ones preempt lower ones), and
// with --preemptible 0 none of them may be preempted (no reclaim across queues either).
// --unpark-by-room 0: a release lets back every parked job whose request fits the released nodes,
// not only as many per queue and request as they take (ControlPlane::Options::unpark_by_room).
// The store is SQLite in DIR (default: the temp directory), fsync'd as in production.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_flags.h"
#include "runtime/api_client.h"
#include "runtime/api_server.h"
#include "runtime/job_spec.h"

namespace carve {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

using bench::Flag;
using bench::NowUs;

const Principal kAdmin{"bench", Role::kAdmin};

// `pending` queued jobs of 1, 2, 4 or 8 GPUs spread over the queues, written straight into the
// store as a server stores them (submitting 100,000 through the API takes minutes here).
void FillQueued(Store& store, int pending, int queues, int priorities, bool preemptible) {
  std::mt19937_64 rng(7);
  StoreBatch batch;
  for (int i = 1; i <= pending; ++i) {
    int gpus = 1 << (rng() % 4);
    JobRecord job;
    job.id = i;
    job.spec = *JobSpecFromJson({{"name", absl::StrCat("j", i)},
                                 {"queue", absl::StrCat("q", rng() % queues)},
                                 {"priority", static_cast<int>(rng() % priorities) * 100},
                                 {"max_runtime", "2h"},
                                 {"preemptible", preemptible},
                                 {"command", {"sleep", "3600"}},
                                 {"resources", {{"gpus", gpus}, {"gpu_model", {"H200"}}}}});
    job.state = JobState::kQueued;
    job.created_us = NowUs();
    batch.puts.push_back({"job", absl::StrFormat("%012d", i), job.ToJson().dump()});
    if (batch.puts.size() == 10000 || i == pending) {
      if (!store.Commit(std::move(batch)).ok()) std::abort();
      batch = StoreBatch{};
    }
  }
}

void Setup(ControlPlane& cp, int nodes, int queues) {
  json docs = json::array();
  int quota = std::max(1, nodes * 8 / queues);
  for (int q = 0; q < queues; ++q) {
    docs.push_back({{"kind", "queue"},
                    {"name", absl::StrCat("q", q)},
                    {"cohort", absl::StrCat("c", q % 20)},
                    {"quota", {{"gpus", quota}}}});
  }
  if (!cp.Apply(docs, kAdmin).ok()) std::abort();
  json gpus = json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back(
        {{"index", i}, {"model", "H200"}, {"memory_mib", 143771}, {"mode", "exclusive"}});
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int n = t; n < nodes; n += 16) {
        json g = gpus;
        for (json& d : g) d["uuid"] = absl::StrCat("GPU-", n, "-", d["index"].get<int>());
        std::string name = absl::StrCat("n", n);
        if (!cp.Register({{"name", name},
                          {"cpu_milli", 224000},
                          {"memory_mib", 2097152},
                          {"backend", "simulated"},
                          {"gpus", g}},
                         Principal{name, Role::kAdmin})
                 .ok()) {
          std::abort();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

struct Latencies {
  std::vector<double> submit, get;
};

std::string Summary(const std::string& what, std::vector<double> v) {
  if (v.empty()) return what + ": none";
  std::sort(v.begin(), v.end());
  return absl::StrFormat("%s: %d calls, p50 %.1f ms, p99 %.1f ms, max %.1f ms", what, v.size(),
                         v[v.size() / 2], v[v.size() * 99 / 100], v.back());
}

// K cycles back to back, M submissions before each: each cycle's wall time.
void SteadyCycles(ControlPlane& cp, int queues, int cycles, int per_cycle) {
  std::vector<double> ms;
  for (int k = 0; k < cycles; ++k) {
    for (int i = 0; i < per_cycle; ++i) {
      json spec = {{"queue", absl::StrCat("q", (k * per_cycle + i) % queues)},
                   {"command", {"true"}},
                   {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
      if (!cp.Submit(spec, absl::StrCat("steady-", k, "-", i), kAdmin).ok()) std::abort();
    }
    auto c0 = Clock::now();
    if (!cp.ScheduleOnce().ok()) std::abort();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c0).count());
    CycleStats st = cp.LastCycle();
    std::cout << absl::StrFormat(
                     "cycle %d: %.1f ms, %s (%s), %d planned, %d parked, %d explanations recorded, "
                     "cluster %s (drift %d)\n",
                     k + 1, ms.back(), st.full ? "full" : "incremental", st.why, st.planned,
                     st.parked, st.explained, st.cluster_kept ? "kept" : "rebuilt",
                     st.cluster_drift)
              << std::flush;
  }
  std::sort(ms.begin(), ms.end());
  std::cout << absl::StrFormat("steady cycles: %d, p50 %.1f ms, p90 %.1f ms, max %.1f ms\n",
                               ms.size(), ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back());
}

void Run(const std::string& dir, int nodes, int queues, int pending, int clients, int seconds,
         int steady, int per_cycle, int priorities, bool preemptible, bool unpark_by_room) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store = *OpenSqliteStore(dir + "/latency.db");
  FillQueued(*store, pending, queues, std::max(priorities, 1), preemptible);
  ControlPlane::Options options;
  options.log_dir = dir + "/logs";
  options.node_timeout_us = int64_t{3600} * 1'000'000;  // the nodes never heartbeat
  options.unpark_by_room = unpark_by_room;
  auto t0 = Clock::now();
  std::unique_ptr<ControlPlane> cp = *ControlPlane::Open(store.get(), &catalog, options, NowUs);
  (void)cp->AddToken("bench-token", "bench", Role::kAdmin);
  Setup(*cp, nodes, queues);
  std::cout << absl::StrFormat("setup: %d nodes, %d queues, %d queued jobs in %.1f s\n", nodes,
                               queues, pending,
                               std::chrono::duration<double>(Clock::now() - t0).count());
  auto first = Clock::now();
  (void)cp->ScheduleOnce();  // fills the cluster: the loop below runs in steady state
  std::cout << absl::StrFormat(
      "first cycle (fills the cluster): %.0f ms\n",
      std::chrono::duration<double, std::milli>(Clock::now() - first).count());
  if (steady > 0) return SteadyCycles(*cp, queues, steady, per_cycle);
  ApiServer server(cp.get(), {"127.0.0.1", 0, 1});  // cycles back to back
  if (!server.Start().ok()) std::abort();
  std::string url = absl::StrCat("http://127.0.0.1:", server.port());
  std::vector<Latencies> lat(clients);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ApiClient api(url, "bench-token");
      json spec = {{"queue", absl::StrCat("q", c % queues)},
                   {"command", {"true"}},
                   {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
      std::mt19937_64 rng(c);
      for (int i = 0; !stop; ++i) {
        auto s0 = Clock::now();
        auto r = api.Post("/api/v1/jobs", spec, {{"Idempotency-Key", absl::StrCat(c, "-", i)}});
        auto s1 = Clock::now();
        lat[c].submit.push_back(std::chrono::duration<double, std::milli>(s1 - s0).count());
        if (!r.ok()) std::cerr << r.status() << "\n";
        auto g = api.Get(absl::StrCat("/api/v1/jobs/", 1 + rng() % pending));
        lat[c].get.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s1).count());
        if (!g.ok()) std::cerr << g.status() << "\n";
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));  // the run's length, not a wait
  stop = true;
  for (std::thread& t : threads) t.join();
  int64_t cycles = server.cycles(), cycle_us = server.cycle_us_total();
  server.Stop();
  Latencies all;
  for (const Latencies& l : lat) {
    all.submit.insert(all.submit.end(), l.submit.begin(), l.submit.end());
    all.get.insert(all.get.end(), l.get.begin(), l.get.end());
  }
  std::cout << Summary("POST /api/v1/jobs", all.submit) << "\n"
            << Summary("GET /api/v1/jobs/{id}", all.get) << "\n"
            << absl::StrFormat("scheduling cycles: %d, mean %.0f ms\n", cycles,
                               cycles > 0 ? cycle_us / 1000.0 / cycles : 0.0);
}

}  // namespace
}  // namespace carve

int main(int argc, char** argv) {
  std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("carve-latency-", getpid());
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--dir") dir = argv[i + 1];
  }
  std::filesystem::create_directories(dir);
  carve::Run(
      dir, carve::Flag(argc, argv, "--nodes", 5000), carve::Flag(argc, argv, "--queues", 200),
      carve::Flag(argc, argv, "--pending", 100000), carve::Flag(argc, argv, "--clients", 8),
      carve::Flag(argc, argv, "--seconds", 20), carve::Flag(argc, argv, "--cycles", 0),
      carve::Flag(argc, argv, "--submit-per-cycle", 8), carve::Flag(argc, argv, "--priorities", 3),
      carve::Flag(argc, argv, "--preemptible", 1) != 0,
      carve::Flag(argc, argv, "--unpark-by-room", 1) != 0);
  std::filesystem::remove_all(dir);
  return 0;
}
