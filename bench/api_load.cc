// Durable submissions per second through the REST API with concurrent clients (p50/p99
// latency), and the server's restart time with many jobs in the store.
//   carve_api_bench [--clients 16] [--jobs 4000] [--restart-jobs 100000] [--dir DIR]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_flags.h"
#include "runtime/api_client.h"
#include "runtime/api_server.h"

namespace carve {
namespace {

using Clock = std::chrono::steady_clock;

using bench::Flag;
using bench::NowUs;

// A control plane over the SQLite file `db`, as the server opens it, with an admin token.
struct Controller {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> store;
  std::unique_ptr<ControlPlane> control;

  Controller(const std::string& dir, const std::string& db) {
    store = *OpenSqliteStore(dir + "/" + db);
    ControlPlane::Options options;
    options.log_dir = dir + "/logs";
    control = *ControlPlane::Open(store.get(), &catalog, options, NowUs);
    (void)control->AddToken("bench-token", "bench", Role::kAdmin);
  }
};

void Submissions(const std::string& dir, int clients, int jobs) {
  Controller c(dir, "submit.db");
  auto* cp = &c.control;
  // No scheduling during the run: this measures the durable submission path alone.
  ApiServer server(cp->get(), {"127.0.0.1", 0, 3'600'000});
  if (!server.Start().ok()) std::exit(1);
  std::string url = absl::StrCat("http://127.0.0.1:", server.port());
  std::vector<std::vector<double>> latencies(clients);
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      ApiClient api(url, "bench-token");
      nlohmann::json spec = {{"command", {"true"}}, {"resources", {{"gpus", 1}}}};
      for (int i = c; i < jobs; i += clients) {
        auto t0 = Clock::now();
        auto r = api.Post("/api/v1/jobs", spec, {{"Idempotency-Key", absl::StrCat("k", i)}});
        latencies[c].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!r.ok()) std::cerr << r.status() << "\n";
      }
    });
  }
  for (std::thread& t : threads) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::cout << absl::StrFormat(
      "submissions: %d durable (fsync'd) submissions from %d clients in %.2f s = %.0f/s; latency "
      "p50 %.2f ms, p99 %.2f ms\n",
      jobs, clients, seconds, jobs / seconds, all[all.size() / 2], all[all.size() * 99 / 100]);
  server.Stop();
}

void Restart(const std::string& dir, int jobs) {
  {
    // Fill through the control plane so the stored documents are what a real server writes.
    Controller c(dir, "restart.db");
    auto* cp = &c.control;
    Principal who{"bench", Role::kAdmin};
    std::vector<std::thread> threads;
    for (int c = 0; c < 16; ++c) {
      threads.emplace_back([&, c] {
        nlohmann::json spec = {{"command", {"true"}}, {"resources", {{"gpus", 1}}}};
        for (int i = c; i < jobs; i += 16) (void)(*cp)->Submit(spec, "", who);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  auto t0 = Clock::now();
  Controller reopened(dir, "restart.db");
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  size_t listed = 0;  // every job, read back page by page
  for (int64_t after = 0, next = 0;; after = next) {
    auto page =
        reopened.control->JobsPage(true, {}, Principal{"bench", Role::kAdmin}, after, 10000, &next);
    if (!page.ok()) std::abort();
    listed += page->size();
    if (next == 0) break;
  }
  std::cout << absl::StrFormat("restart: %d jobs in the store, open + load took %.2f s (%d jobs)\n",
                               jobs, seconds, listed);
}

}  // namespace
}  // namespace carve

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path() / absl::StrCat("carve-bench-", getpid());
  std::filesystem::create_directories(dir);
  carve::Submissions(dir, carve::Flag(argc, argv, "--clients", 16),
                     carve::Flag(argc, argv, "--jobs", 4000));
  carve::Restart(dir, carve::Flag(argc, argv, "--restart-jobs", 100000));
  std::filesystem::remove_all(dir);
  return 0;
}
