// Fills a server's data directory with a large job history for bench/dashboard-jobs: `done`
// finished jobs (kind job.done) and `queued` queued ones, named and kinded in rotation so that
// filters have something to find.
//   carve_dashboard_fill --data DIR [--done 100000] [--queued 1000]
#include <filesystem>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "adapters/store/sqlite_store.h"
#include "bench_flags.h"
#include "store_fill.h"

int main(int argc, char** argv) {
  std::string dir;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--data") dir = argv[i + 1];
  }
  if (dir.empty()) {
    std::cerr << "usage: carve_dashboard_fill --data DIR [--done N] [--queued N]\n";
    return 2;
  }
  const int done = carve::bench::Flag(argc, argv, "--done", 100000);
  const int queued = carve::bench::Flag(argc, argv, "--queued", 1000);
  std::filesystem::create_directories(dir);
  auto store = carve::OpenSqliteStore(dir + "/carve.db");
  if (!store.ok()) {
    std::cerr << store.status() << "\n";
    return 1;
  }
  static const char* kKinds[] = {"training", "inference", "batch", "evaluation"};
  auto vary = [](carve::JobRecord& job) {
    job.spec.name = absl::StrCat("run-", job.id % 997);
    job.spec.kind = kKinds[job.id % 4];
    job.created_us = 1'790'000'000'000'000 + job.id * 1'000'000;
  };
  carve::Fill(**store, 1, done, carve::JobState::kSucceeded, vary);
  carve::Fill(**store, done + 1, queued, carve::JobState::kQueued, vary);
  std::cout << "wrote " << done << " finished and " << queued << " queued jobs to " << dir << "\n";
  return 0;
}
