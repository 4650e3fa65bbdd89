// `carve probe` (runtime/probe.h): the limits it reads from its own cgroup on v1, v2 and hybrid
// machines, and the memory it takes on a simulated GPU, step by step.
#include "runtime/probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/probe_kernel.h"

namespace carve {
namespace {

using json = nlohmann::json;

ProbeHost FakeHost(std::map<std::string, std::string> files,
                   std::map<std::string, std::string> env = {}) {
  ProbeHost host;
  host.read_file = [files](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    return it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  host.env = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  return host;
}

const char kHybridMounts[] =
    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\n"
    "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\n"
    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

TEST(ProbeTest, AHybridMachinesLimitsAreTheTightestOfV1AndV2) {
  ProbeHost host = FakeHost({
      {"/proc/self/mounts", kHybridMounts},
      {"/proc/self/cgroup",
       "5:pids:/carve/n-job-1-r0\n4:memory:/carve/n-job-1-r0\n"
       "3:cpu,cpuacct:/carve/n-job-1-r0\n0::/carve/n-job-1-r0\n"},
      {"/sys/fs/cgroup/memory/carve/n-job-1-r0/memory.limit_in_bytes", "268435456\n"},
      {"/sys/fs/cgroup/cpu,cpuacct/carve/n-job-1-r0/cpu.cfs_quota_us", "50000\n"},
      {"/sys/fs/cgroup/cpu,cpuacct/carve/n-job-1-r0/cpu.cfs_period_us", "100000\n"},
      {"/sys/fs/cgroup/pids/carve/n-job-1-r0/pids.max", "max\n"},
      {"/sys/fs/cgroup/unified/carve/n-job-1-r0/pids.max", "512\n"},
      {"/sys/fs/cgroup/unified/carve/n-job-1-r0/memory.max", "max\n"},
  });
  json limits = OwnCgroupLimits(host);
  EXPECT_EQ(limits["memory_max_bytes"], 268435456) << limits.dump(2);
  EXPECT_EQ(limits["cpu_max_milli"], 500);
  EXPECT_EQ(limits["pids_max"], 512);
  // Every file read is named with what it said, limits or not.
  EXPECT_EQ(limits["read"].size(), 6u) << limits.dump(2);
  EXPECT_EQ(limits["read"][0]["file"], "/sys/fs/cgroup/unified/carve/n-job-1-r0/memory.max");
  EXPECT_EQ(limits["read"][0]["value"], "max");
}

TEST(ProbeTest, APureV2MachineAndAnUnlimitedGroup) {
  ProbeHost host = FakeHost({
      {"/proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"},
      {"/proc/self/cgroup", "0::/carve/n-job-2-r0\n"},
      {"/sys/fs/cgroup/carve/n-job-2-r0/memory.max", "1073741824\n"},
      {"/sys/fs/cgroup/carve/n-job-2-r0/cpu.max", "200000 100000\n"},
      {"/sys/fs/cgroup/carve/n-job-2-r0/pids.max", "16384\n"},
  });
  json limits = OwnCgroupLimits(host);
  EXPECT_EQ(limits["memory_max_bytes"], 1073741824);
  EXPECT_EQ(limits["cpu_max_milli"], 2000);
  EXPECT_EQ(limits["pids_max"], 16384);

  ProbeHost unlimited = FakeHost({
      {"/proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"},
      {"/proc/self/cgroup", "0::/\n"},
      {"/sys/fs/cgroup/cpu.max", "max 100000\n"},
  });
  limits = OwnCgroupLimits(unlimited);
  EXPECT_TRUE(limits["memory_max_bytes"].is_null()) << limits.dump(2);
  EXPECT_TRUE(limits["cpu_max_milli"].is_null());
  EXPECT_TRUE(limits["pids_max"].is_null());
}

std::vector<json> Lines(const std::string& text) {
  std::vector<json> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    out.push_back(json::parse(line));
  }
  return out;
}

// On a simulated GPU the probe takes memory through the device file, step by step, says what it
// reached, and gives it back when it ends.
TEST(ProbeTest, TakesMemoryOnASimulatedGpuInStepsAndGivesItBack) {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("probe-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "GPU-a");
  ProbeHost host = FakeHost({}, {{"CARVE_SIM_GPU_DIR", dir.string()},
                                 {"CUDA_VISIBLE_DEVICES", "GPU-a"},
                                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=8192M"}});
  std::stringstream out;
  ProbeOptions options;
  options.memory_mib = 600;
  options.step_mib = 256;
  ASSERT_EQ(RunProbe(options, host, out), 0);
  std::vector<json> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 6u) << out.str();
  EXPECT_EQ(lines[0]["probe"], "sees");
  EXPECT_EQ(lines[0]["visible_devices"], "GPU-a");
  EXPECT_EQ(lines[0]["devices"][0]["source"], "simulated");
  EXPECT_EQ(lines[0]["mps"]["pinned_device_mem_limit"], "0=8192M");
  EXPECT_EQ(lines[1]["mib"], 256);
  EXPECT_EQ(lines[2]["mib"], 512);
  EXPECT_EQ(lines[3]["mib"], 600);
  EXPECT_EQ(lines[4]["probe"], "memory-reached");
  EXPECT_EQ(lines[4]["mib"], 600);
  EXPECT_EQ(lines[5]["probe"], "done");
  EXPECT_TRUE(std::filesystem::is_empty(dir / "GPU-a")) << "the device file stays after the probe";
  std::filesystem::remove_all(dir);
}

TEST(ProbeTest, AskingForMemoryWithoutADeviceFails) {
  std::stringstream out;
  ProbeOptions options;
  options.memory_mib = 10;
  ProbeHost host = FakeHost({}, {{"CARVE_SIM_GPU_DIR", "/nonexistent"}});
  EXPECT_EQ(RunProbe(options, host, out), 1);
  EXPECT_THAT(out.str(), ::testing::HasSubstr("no device to take memory on"));
}

// On a simulated GPU there is no kernel to run: the probe computes on the CPU, and its lines say
// so (a kit's rate under contention is then the CPU's, as docs/poc.md says).
TEST(ProbeTest, ASimulatedGpuComputesOnTheCpuAndSaysSo) {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("probe-cpu-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "GPU-a");
  ProbeHost host =
      FakeHost({}, {{"CARVE_SIM_GPU_DIR", dir.string()}, {"CUDA_VISIBLE_DEVICES", "GPU-a"}});
  std::stringstream out;
  ProbeOptions options;
  options.seconds = 1;
  ASSERT_EQ(RunProbe(options, host, out), 0);
  std::vector<json> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[1]["probe"], "progress");
  EXPECT_EQ(lines[1]["kind"], "cpu-loop");
  EXPECT_GT(lines[1]["iterations"], 0);
  EXPECT_EQ(lines[2]["kind"], "cpu-loop");
  std::filesystem::remove_all(dir);
}

// The GPU kernel is PTX the driver compiles at run time, so no build here compiles it: ptxas
// (CUDA's assembler) does, for each architecture the probe is meant for, where a CUDA toolkit is
// installed ($CARVE_PTXAS, ptxas on the PATH, or /usr/local/cuda/bin/ptxas).
TEST(ProbeKernelTest, ThePtxAssemblesForTuringAmpereHopperAndBlackwell) {
  std::string ptxas;
  if (const char* env = std::getenv("CARVE_PTXAS"); env != nullptr) ptxas = env;
  if (ptxas.empty() && std::system("command -v ptxas >/dev/null 2>&1") == 0) ptxas = "ptxas";
  if (ptxas.empty() && std::filesystem::exists("/usr/local/cuda/bin/ptxas")) {
    ptxas = "/usr/local/cuda/bin/ptxas";
  }
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas (CUDA toolkit) on this machine";
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("ptx-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "probe.ptx") << kProbeKernelPtx;
  for (const char* arch : {"sm_75", "sm_80", "sm_90", "sm_100"}) {
    const std::string log = (dir / "ptxas.log").string();
    const std::string command =
        absl::StrCat(ptxas, " -arch=", arch, " -v ", (dir / "probe.ptx").string(), " -o ",
                     (dir / "probe.cubin").string(), " >", log, " 2>&1");
    const int status = std::system(command.c_str());
    std::stringstream said;
    said << std::ifstream(log).rdbuf();
    EXPECT_EQ(status, 0) << arch << ":\n" << said.str();
    // ptxas names the entry it compiled.
    EXPECT_THAT(said.str(), ::testing::HasSubstr(kProbeKernelName)) << arch;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace carve
