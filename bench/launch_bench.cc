// What starting a replica costs the process that starts it, against how much memory that process
// has touched (issue 12: in `carve dev` the agents run inside the server, and fork() of the large
// multithreaded server put most of its samples in page-table copies and copy-on-write faults).
//   carve_launch_bench [--benchmark_filter=...]
// Each case launches `true` and waits for its end, from this process with 0, 1 or 4 GiB of heap
// written page by page first:
//   BM_LaunchTrue          PosixLauncher::Launch without a cgroup, waitpid, Cleanup
//   BM_LaunchTrueInCgroup  the same in a cgroup of its own (created, joined, removed; needs root)
//   BM_ForkExecTrue        bare fork + execve("/bin/true") + waitpid, for reference
// Copy-on-write faults the parent takes on its next writes after a fork are not counted here.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "adapters/cgroups/cgroups.h"
#include "adapters/process/posix_launcher.h"

namespace carve {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Heap this process has written: kept across cases (writing 4 GiB takes seconds), grown or
// replaced when a case wants another size.
class Ballast {
 public:
  static void Hold(int64_t bytes) {
    static Ballast ballast;
    if (ballast.bytes_ == bytes) return;
    if (ballast.data_ != nullptr) munmap(ballast.data_, static_cast<size_t>(ballast.bytes_));
    ballast.data_ = nullptr;
    ballast.bytes_ = bytes;
    if (bytes == 0) return;
    void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      ballast.bytes_ = 0;
      return;
    }
    madvise(data, static_cast<size_t>(bytes), MADV_NOHUGEPAGE);  // one page-table entry a page
    std::memset(data, 1, static_cast<size_t>(bytes));
    ballast.data_ = data;
  }

 private:
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

std::string TempDir() {
  char dir[] = "/tmp/carve-launch-bench-XXXXXX";
  return mkdtemp(dir) != nullptr ? dir : "/tmp";
}

void RunLaunches(benchmark::State& state, std::unique_ptr<ProcessLauncher> launcher) {
  Ballast::Hold(state.range(0) * kGiB);
  const std::string dir = TempDir();
  LaunchSpec spec;
  spec.argv = {"true"};
  spec.log_path = dir + "/true.log";
  spec.group_name = "launch-bench";
  for (auto _ : state) {
    absl::StatusOr<ProcessHandle> handle = launcher->Launch(spec);
    if (!handle.ok()) {
      state.SkipWithError(std::string(handle.status().message()).c_str());
      break;
    }
    waitpid(handle->pid, nullptr, 0);
    if (!launcher->Cleanup(*handle).ok()) {
      state.SkipWithError("cleanup failed");
      break;
    }
  }
  state.SetLabel(absl::StrCat(state.range(0), " GiB touched"));
  std::filesystem::remove_all(dir);
}

void BM_LaunchTrue(benchmark::State& state) {
  RunLaunches(state, MakePosixLauncherWithCgroups(Cgroups::DetectFromMounts("carve-bench", "")));
}

void BM_LaunchTrueInCgroup(benchmark::State& state) {
  const std::string root = absl::StrCat("carve-bench-", getpid());
  std::unique_ptr<Cgroups> cgroups = Cgroups::Detect(root);
  if (cgroups->available()) {
    RunLaunches(state, MakePosixLauncherWithCgroups(std::move(cgroups)));
  } else {
    state.SkipWithError(cgroups->summary().c_str());
  }
  // Detect made <mount>/<root> in each hierarchy it probed.
  std::ifstream mounts("/proc/self/mounts");
  std::string device, mount, type, rest;
  while (mounts >> device >> mount >> type && std::getline(mounts, rest)) {
    if (type == "cgroup" || type == "cgroup2") rmdir(absl::StrCat(mount, "/", root).c_str());
  }
}

void BM_ForkExecTrue(benchmark::State& state) {
  Ballast::Hold(state.range(0) * kGiB);
  char path[] = "/bin/true";
  char* argv[] = {path, nullptr};
  char* envp[] = {nullptr};
  for (auto _ : state) {
    pid_t pid = fork();
    if (pid == 0) {
      execve(path, argv, envp);
      _exit(127);
    }
    waitpid(pid, nullptr, 0);
  }
  state.SetLabel(absl::StrCat(state.range(0), " GiB touched"));
}

BENCHMARK(BM_LaunchTrue)->Arg(0)->Arg(1)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchTrueInCgroup)
    ->Arg(0)
    ->Arg(1)
    ->Arg(4)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ForkExecTrue)->Arg(0)->Arg(1)->Arg(4)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace carve

BENCHMARK_MAIN();
