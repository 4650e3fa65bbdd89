#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "adapters/fake_nvml/fake_nvml_fixture.h"
#include "adapters/nvml/nvml_backend.h"
#include "adapters/nvml/nvml_names.h"
#include "core/model/gpu_catalog.h"
#include "ports/devices.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- Simulated backend ---------------------------------------------------------------------------

std::vector<DiscoveredGpu> Discover(const std::string& yaml, const std::string& node = "n1") {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = SimulatedBackendFromYaml(yaml, node);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  EXPECT_EQ((*backend)->name(), "simulated");
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = (*backend)->Discover();
  EXPECT_TRUE(gpus.ok()) << gpus.status();
  return gpus.ok() ? *gpus : std::vector<DiscoveredGpu>{};
}

// The message of the error a description gives; fails the test when it is accepted.
std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = SimulatedBackendFromYaml(yaml, "n1");
  EXPECT_FALSE(backend.ok()) << "accepted:\n" << yaml;
  if (backend.ok()) return "";
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument) << backend.status();
  return std::string(backend.status().message());
}

// The device files: a live process is listed with its memory; a "leak" entry is memory no process
// holds (UsedMemory only); a zombie is listed only when its entry says the driver still holds it
// ("hold"); the owner in a file name is only a name.
TEST(SimulatedBackendTest, DeviceFilesModelProcessesLeaksAndDefunctHolders) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      SimulatedBackendFromYaml("gpus:\n  - {model: H200, count: 1}\n", "n1");
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::string dir = ::testing::TempDir() + "/simgpu-files-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/GPU-sim-n1-0");
  (*backend)->SetStateDir(dir);
  pid_t zombie = fork();
  if (zombie == 0) _exit(0);
  pid_t zombie_plain = fork();
  if (zombie_plain == 0) _exit(0);
  // Both stay zombies until reaped below.
  for (pid_t z : {zombie, zombie_plain}) {
    for (int i = 0; i < 200; ++i) {
      std::string stat;
      std::getline(std::ifstream("/proc/" + std::to_string(z) + "/stat"), stat);
      if (stat.find(") Z") != std::string::npos) break;
      usleep(10000);
    }
  }
  const std::string gpu = dir + "/GPU-sim-n1-0/";
  std::ofstream(gpu + "job-1-r0." + std::to_string(getpid())) << "100\n";
  std::ofstream(gpu + "job-2-r0.0") << "200 leak\n";
  std::ofstream(gpu + "z." + std::to_string(zombie)) << "300 hold\n";
  std::ofstream(gpu + "y." + std::to_string(zombie_plain)) << "400\n";
  absl::StatusOr<std::vector<DeviceProcess>> processes = (*backend)->Processes(0);
  ASSERT_TRUE(processes.ok()) << processes.status();
  std::vector<int64_t> pids;
  for (const DeviceProcess& p : *processes) pids.push_back(p.pid);
  EXPECT_THAT(pids, ::testing::UnorderedElementsAre(getpid(), zombie));
  absl::StatusOr<int64_t> used = (*backend)->UsedMemory(0);
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(*used, 100 + 200 + 300);  // the plain zombie's memory was freed
  EXPECT_FALSE(std::filesystem::exists(gpu + "y." + std::to_string(zombie_plain)));
  waitpid(zombie, nullptr, 0);
  waitpid(zombie_plain, nullptr, 0);
  EXPECT_EQ(*(*backend)->UsedMemory(0), 100 + 200);
  std::filesystem::remove_all(dir);
}

TEST(SimulatedBackendTest, VersionsAreSimulatedUnlessOverridden) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      SimulatedBackendFromYaml("gpus:\n  - {model: H200, count: 1}\n", "n1");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->Versions().driver, "simulated");
  EXPECT_EQ((*backend)->Discover()->front().vbios, "simulated");
  setenv("CARVE_SIM_DRIVER_VERSION", "580.82.07", 1);
  EXPECT_EQ((*backend)->Versions().driver, "580.82.07");
  unsetenv("CARVE_SIM_DRIVER_VERSION");
}

TEST(SimulatedBackendTest, ExclusiveAndSharedEntriesNumberGpusAcrossEntries) {
  std::vector<DiscoveredGpu> gpus = Discover(R"(
gpus:
  - model: h200          # alias, any case
    count: 2
    mode: exclusive
  - model: T4
    count: 1
    mode: shared
)");
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].uuid, "GPU-sim-n1-0");
  EXPECT_EQ(gpus[0].model, "H200-141GB");
  EXPECT_EQ(gpus[0].memory_mib, 143771);
  EXPECT_EQ(gpus[0].mode, "exclusive");
  EXPECT_FALSE(gpus[0].mig_enabled);
  EXPECT_TRUE(gpus[0].mig_instances.empty());
  EXPECT_EQ(gpus[0].health, "healthy");
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].uuid, "GPU-sim-n1-1");
  EXPECT_EQ(gpus[2].index, 2);
  EXPECT_EQ(gpus[2].uuid, "GPU-sim-n1-2");
  EXPECT_EQ(gpus[2].model, "T4");
  EXPECT_EQ(gpus[2].memory_mib, 15360);
  EXPECT_EQ(gpus[2].mode, "shared");
}

TEST(SimulatedBackendTest, CountDefaultsToOneAndModeToExclusive) {
  std::vector<DiscoveredGpu> gpus = Discover("gpus:\n  - model: L4\n", "edge-7");
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].uuid, "GPU-sim-edge-7-0");
  EXPECT_EQ(gpus[0].mode, "exclusive");
}

TEST(SimulatedBackendTest, EmptyGpuListIsANodeWithoutGpus) {
  EXPECT_TRUE(Discover("gpus: []\n").empty());
}

TEST(SimulatedBackendTest, DiscoverIsRepeatable) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      SimulatedBackendFromYaml("gpus:\n  - {model: A30, count: 2}\n", "n1");
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::vector<DiscoveredGpu>> first = (*backend)->Discover();
  absl::StatusOr<std::vector<DiscoveredGpu>> second = (*backend)->Discover();
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->size(), 2u);
  ASSERT_EQ(second->size(), 2u);
  EXPECT_EQ((*first)[1].uuid, (*second)[1].uuid);
}

TEST(SimulatedBackendTest, PartitionWithDynamicLayout) {
  std::vector<DiscoveredGpu> gpus = Discover(R"(
gpus:
  - model: H200
    count: 2
    mode: partition
    layout: dynamic
)");
  ASSERT_EQ(gpus.size(), 2u);
  for (const DiscoveredGpu& gpu : gpus) {
    EXPECT_EQ(gpu.mode, "partition");
    EXPECT_TRUE(gpu.mig_enabled);
    EXPECT_TRUE(gpu.dynamic_layout);
    EXPECT_TRUE(gpu.mig_instances.empty());
  }
}

TEST(SimulatedBackendTest, PartitionWithoutLayoutIsDynamic) {
  std::vector<DiscoveredGpu> gpus = Discover("gpus:\n  - {model: A100-80GB, mode: partition}\n");
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_TRUE(gpus[0].dynamic_layout);
}

TEST(SimulatedBackendTest, PartitionWithStaticLayoutSortedByStart) {
  std::vector<DiscoveredGpu> gpus = Discover(R"(
gpus:
  - model: T4
  - model: H200
    count: 2
    mode: partition
    layout: ["1g.18gb@6", "3g.71gb@0", "2g.35gb@4"]
)");
  ASSERT_EQ(gpus.size(), 3u);
  const DiscoveredGpu& gpu = gpus[2];
  EXPECT_EQ(gpu.index, 2);
  EXPECT_TRUE(gpu.mig_enabled);
  EXPECT_FALSE(gpu.dynamic_layout);
  ASSERT_EQ(gpu.mig_instances.size(), 3u);
  EXPECT_EQ(gpu.mig_instances[0].profile, "3g.71gb");
  EXPECT_EQ(gpu.mig_instances[0].start, 0);
  EXPECT_EQ(gpu.mig_instances[0].uuid, "MIG-sim-n1-2-0");
  EXPECT_EQ(gpu.mig_instances[1].profile, "2g.35gb");
  EXPECT_EQ(gpu.mig_instances[1].start, 4);
  EXPECT_EQ(gpu.mig_instances[1].uuid, "MIG-sim-n1-2-4");
  EXPECT_EQ(gpu.mig_instances[2].profile, "1g.18gb");
  EXPECT_EQ(gpu.mig_instances[2].uuid, "MIG-sim-n1-2-6");
  EXPECT_EQ(gpus[1].mig_instances[0].uuid, "MIG-sim-n1-1-0");
}

TEST(SimulatedBackendTest, StaticLayoutOfA30) {
  std::vector<DiscoveredGpu> gpus = Discover(R"(
gpus:
  - model: A30
    mode: partition
    layout:
      - 2g.12gb@0
      - 1g.6gb@2
      - 1g.6gb+me@3
)");
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_EQ(gpus[0].mig_instances.size(), 3u);
  EXPECT_EQ(gpus[0].mig_instances[2].profile, "1g.6gb+me");
}

TEST(SimulatedBackendTest, ModeMustBeKnown) {
  EXPECT_EQ(ErrorOf("gpus:\n  - model: H200\n  - model: H200\n    mode: shard\n"),
            "<yaml>: gpus[1].mode: \"shard\" is not exclusive, shared or partition");
}

TEST(SimulatedBackendTest, ModelMustBeInTheCatalog) {
  std::string error = ErrorOf("gpus:\n  - model: B200\n");
  EXPECT_THAT(error, StartsWith("<yaml>: gpus[0].model: unknown GPU model \"B200\""));
  EXPECT_THAT(error, HasSubstr("known models: A100-40GB, A100-80GB, H100-80GB, H200-141GB"));
}

TEST(SimulatedBackendTest, ModelIsRequiredAndAString) {
  EXPECT_EQ(ErrorOf("gpus:\n  - count: 2\n"), "<yaml>: gpus[0].model: missing");
  EXPECT_EQ(ErrorOf("gpus:\n  - model: [H200]\n"),
            "<yaml>: gpus[0].model: expected a single value");
}

TEST(SimulatedBackendTest, CountMustBeAPositiveWholeNumber) {
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, count: 0}\n"),
            "<yaml>: gpus[0].count: 0 is not between 1 and 1024");
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, count: -2}\n"),
            "<yaml>: gpus[0].count: -2 is not between 1 and 1024");
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, count: eight}\n"),
            "<yaml>: gpus[0].count: \"eight\" is not a whole number");
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, count: 1.5}\n"),
            "<yaml>: gpus[0].count: \"1.5\" is not a whole number");
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, count: 5000}\n"),
            "<yaml>: gpus[0].count: 5000 is not between 1 and 1024");
}

TEST(SimulatedBackendTest, PartitionNeedsAMigCapableModel) {
  std::string error = ErrorOf("gpus:\n  - {model: T4, mode: partition}\n");
  EXPECT_THAT(error, StartsWith("<yaml>: gpus[0].mode: partition needs a MIG-capable model; T4 "
                                "has no MIG (MIG-capable: A100-40GB"));
}

TEST(SimulatedBackendTest, LayoutOnlyInPartitionMode) {
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, mode: exclusive, layout: dynamic}\n"),
            "<yaml>: gpus[0].layout: only partition mode takes a layout");
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, layout: dynamic}\n"),
            "<yaml>: gpus[0].layout: only partition mode takes a layout");
}

TEST(SimulatedBackendTest, LayoutItemsMustBeProfileAtStart) {
  const std::string head = "gpus:\n  - model: H200\n    mode: partition\n    layout: ";
  EXPECT_EQ(ErrorOf(head + "static\n"),
            "<yaml>: gpus[0].layout: \"static\" is neither dynamic nor a list of profile@start");
  EXPECT_EQ(ErrorOf(head + "[\"3g.71gb\"]\n"),
            "<yaml>: gpus[0].layout[0]: \"3g.71gb\" is not profile@start (e.g. \"1g.18gb@0\")");
  EXPECT_EQ(ErrorOf(head + "[\"3g.71gb@0\", \"3g.71gb@x\"]\n"),
            "<yaml>: gpus[0].layout[1]: \"3g.71gb@x\" is not profile@start (e.g. \"1g.18gb@0\")");
  EXPECT_EQ(ErrorOf(head + "[\"@0\"]\n"),
            "<yaml>: gpus[0].layout[0]: \"@0\" is not profile@start (e.g. \"1g.18gb@0\")");
  EXPECT_THAT(ErrorOf(head + "[\"3g.40gb@0\"]\n"),
              StartsWith("<yaml>: gpus[0].layout[0]: GPU model H200-141GB has no MIG profile "
                         "\"3g.40gb\"; its profiles: 1g.18gb, "));
  EXPECT_EQ(ErrorOf(head + "{a: b}\n"),
            "<yaml>: gpus[0].layout: expected dynamic or a list of profile@start");
}

TEST(SimulatedBackendTest, LayoutMustBeValidForTheModel) {
  const std::string head = "gpus:\n  - model: H200\n    mode: partition\n    layout: ";
  EXPECT_EQ(ErrorOf(head + "[3g.71gb@0, 4g.71gb@0]\n"),
            "<yaml>: gpus[0].layout: 4g.71gb@0 overlaps 3g.71gb@0");
  EXPECT_EQ(ErrorOf(head + "[3g.71gb@2]\n"),
            "<yaml>: gpus[0].layout: 3g.71gb cannot start at memory slice 2 on H200-141GB");
  EXPECT_EQ(ErrorOf(head + "[4g.71gb@0, 4g.71gb@4]\n"),
            "<yaml>: gpus[0].layout: 4g.71gb cannot start at memory slice 4 on H200-141GB");
  EXPECT_EQ(ErrorOf(head + "[4g.71gb@0, 3g.71gb@4, 1g.18gb@6]\n"),
            "<yaml>: gpus[0].layout: 1g.18gb@6 overlaps 3g.71gb@4");
}

TEST(SimulatedBackendTest, UnknownAndRepeatedKeysAreErrors) {
  EXPECT_EQ(ErrorOf("gpus:\n  - {model: H200, modle: shared}\n"),
            "<yaml>: gpus[0].modle: unknown key (expected model, count, mode, layout)");
  EXPECT_EQ(ErrorOf("gpus: []\nnodes: 3\n"), "<yaml>: nodes: unknown key (expected gpus)");
  EXPECT_EQ(ErrorOf("gpus:\n  - model: H200\n    model: T4\n"),
            "<yaml>: gpus[0].model: given twice");
}

TEST(SimulatedBackendTest, ShapeErrors) {
  EXPECT_EQ(ErrorOf(""), "<yaml>: expected a map with a \"gpus\" list");
  EXPECT_EQ(ErrorOf("- model: H200\n"), "<yaml>: expected a map with a \"gpus\" list");
  EXPECT_EQ(ErrorOf("gpus: H200\n"), "<yaml>: gpus: expected a list of GPU entries");
  EXPECT_EQ(ErrorOf("gpus:\n  - H200\n"),
            "<yaml>: gpus[0]: expected a map with model, count, mode, layout");
}

TEST(SimulatedBackendTest, MalformedYamlIsAnErrorWithItsPosition) {
  EXPECT_THAT(ErrorOf("gpus:\n  - {model: H200\n"), StartsWith("<yaml>: line "));
  EXPECT_THAT(ErrorOf("gpus: [\n"), StartsWith("<yaml>: line "));
}

TEST(SimulatedBackendTest, NodeNameIsRequired) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      SimulatedBackendFromYaml("gpus: []\n", "");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
}

class SimulatedBackendFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

 private:
  std::vector<std::string> paths_;
};

TEST_F(SimulatedBackendFileTest, ReadsAFile) {
  std::string path = Write("carve_sim_ok.yaml", "gpus:\n  - {model: A100-40GB, count: 4}\n");
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = OpenSimulatedBackend(path, "w3");
  ASSERT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = (*backend)->Discover();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 4u);
  EXPECT_EQ((*gpus)[3].uuid, "GPU-sim-w3-3");
}

TEST_F(SimulatedBackendFileTest, ErrorsNameTheFile) {
  std::string path = Write("carve_sim_bad.yaml",
                           "gpus:\n  - {model: H200}\n  - {model: H200, "
                           "mode: shard}\n");
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = OpenSimulatedBackend(path, "w3");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().message(),
            path + ": gpus[1].mode: \"shard\" is not exclusive, shared or partition");
}

TEST_F(SimulatedBackendFileTest, MissingFileIsNotFound) {
  std::string path = ::testing::TempDir() + "carve_no_such_file.yaml";
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = OpenSimulatedBackend(path, "w3");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(backend.status().message()), StartsWith(path + ": cannot open"));
}

// --- NVML names
// ------------------------------------------------------------------------------------

TEST(NvmlNamesTest, NormalizesDriverProductNames) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  struct Case {
    const char* nvml;
    int64_t memory_mib;
    const char* model;
  };
  for (const Case& c : std::vector<Case>{
           {"NVIDIA H200", 143771, "H200-141GB"},
           {"NVIDIA H100 80GB HBM3", 81559, "H100-80GB"},
           {"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
           {"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
           {"NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"},
           {"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
           {"NVIDIA H100 PCIe", 81559, "H100-80GB"},
           {"NVIDIA H200 NVL", 143771, "H200-141GB"},
           {"NVIDIA A30", 24576, "A30-24GB"},
           {"Tesla T4", 15360, "T4"},
           {"Tesla V100-SXM2-16GB", 16160, "V100M16"},
           {"NVIDIA L40S", 46068, "L40S"},
           {"  nvidia h200  ", 0, "H200-141GB"},
       }) {
    NvmlModelName name = NormalizeNvmlGpuName(catalog, c.nvml, c.memory_mib);
    EXPECT_TRUE(name.known) << c.nvml;
    EXPECT_EQ(name.model, c.model) << c.nvml;
  }
}

TEST(NvmlNamesTest, UnknownNamesAreKeptAsReported) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  for (const char* nvml : {"NVIDIA GeForce RTX 4090", "NVIDIA B200", "NVIDIA A10G", ""}) {
    NvmlModelName name = NormalizeNvmlGpuName(catalog, nvml, 24000);
    EXPECT_FALSE(name.known) << nvml;
    EXPECT_EQ(name.model, nvml);
  }
}

TEST(NvmlNamesTest, LeadingWordsMatchMustAgreeOnMemory) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  // The 94 GB H100 NVL is not an H100-80GB.
  EXPECT_FALSE(NormalizeNvmlGpuName(catalog, "NVIDIA H100 NVL", 95830).known);
  // Without memory the leading words decide.
  EXPECT_EQ(NormalizeNvmlGpuName(catalog, "NVIDIA H100 NVL").model, "H100-80GB");
  // An exact alias needs no memory check.
  EXPECT_EQ(NormalizeNvmlGpuName(catalog, "NVIDIA H100 80GB HBM3", 1).model, "H100-80GB");
}

TEST(NvmlNamesTest, MatchesMigProfilesBySlicesMemoryAndId) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  const GpuModel& h200 = catalog.model(*catalog.Find("H200"));
  auto name = [&](int slices, int64_t memory, int id) {
    int p = MatchMigProfile(h200, slices, memory, id);
    return p < 0 ? std::string("-") : h200.mig_profiles[p].name;
  };
  EXPECT_EQ(name(3, 71 * 1024, -1), "3g.71gb");
  EXPECT_EQ(name(4, 71 * 1024, -1), "4g.71gb");
  EXPECT_EQ(name(7, 140 * 1024, -1), "7g.141gb");
  EXPECT_EQ(name(1, 16 * 1024 + 512, -1), "1g.18gb");
  EXPECT_EQ(name(1, 16 * 1024 + 512, 20), "1g.18gb+me");  // only the id tells +me apart
  EXPECT_EQ(name(1, 33 * 1024, -1), "1g.35gb");
  EXPECT_EQ(name(2, 33 * 1024, 14), "2g.35gb");
  EXPECT_EQ(name(3, 71 * 1024, 14), "3g.71gb");  // an id that contradicts the shape is ignored
  EXPECT_EQ(name(-1, -1, 9), "3g.71gb");         // the id alone
  EXPECT_EQ(name(3, 10 * 1024, -1), "-");        // no 3-slice profile has 10 GiB
  EXPECT_EQ(name(5, 71 * 1024, -1), "-");
  EXPECT_EQ(name(-1, -1, -1), "-");
}

TEST(NvmlNamesTest, FallbackProfileName) {
  EXPECT_EQ(FallbackMigProfileName(3, 72704), "3g.71gb");
  EXPECT_EQ(FallbackMigProfileName(1, 9728), "1g.10gb");
}

// --- NVML backend
// ----------------------------------------------------------------------------------

TEST(NvmlBackendTest, ThisMachineEitherHasNvmlOrSaysWhyNot) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = OpenNvmlBackend();
  if (backend.ok()) {  // a machine with a driver and a GPU
    EXPECT_EQ((*backend)->name(), "nvml");
    absl::StatusOr<std::vector<DiscoveredGpu>> gpus = (*backend)->Discover();
    ASSERT_TRUE(gpus.ok()) << gpus.status();
    EXPECT_FALSE(gpus->empty());
    return;
  }
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  EXPECT_THAT(std::string(backend.status().message()), StartsWith("NVML unavailable: "));
}

TEST(NvmlBackendTest, MissingLibraryIsUnavailable) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      OpenNvmlBackendFromLibrary("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(backend.status().message()),
              StartsWith("NVML unavailable: cannot load /nonexistent/libnvidia-ml.so.1 ("));
}

TEST(NvmlBackendTest, LibraryWithoutNvmlIsUnavailable) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = OpenNvmlBackendFromLibrary("libm.so.6");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend.status().message(),
            "NVML unavailable: libm.so.6 has no nvmlInit_v2 (driver too old?)");
}

TEST_F(FakeNvmlTest, InitFailureIsUnavailable) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  Fn<void (*)(int)>("FakeNvmlSetInitResult")(9);
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      OpenNvmlBackendFromLibrary(CARVE_FAKE_NVML);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend.status().message(),
            "NVML unavailable: nvmlInit_v2 failed: Driver Not Loaded (9)");
}

TEST_F(FakeNvmlTest, NoGpusIsUnavailableAndShutsNvmlDown) {
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      OpenNvmlBackendFromLibrary(CARVE_FAKE_NVML);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend.status().message(), "NVML unavailable: the driver reports no GPUs");
  EXPECT_EQ(Initialized(), 0);
}

TEST_F(FakeNvmlTest, WholeGpus) {
  AddGpu("NVIDIA H200", "GPU-aaaa", 143771, false);
  AddGpu("NVIDIA H100 80GB HBM3", "GPU-bbbb", 81559, false);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].uuid, "GPU-aaaa");
  EXPECT_EQ(gpus[0].model, "H200-141GB");
  EXPECT_EQ(gpus[0].memory_mib, 143771);
  EXPECT_EQ(gpus[0].mode, "exclusive");
  EXPECT_FALSE(gpus[0].mig_enabled);
  EXPECT_EQ(gpus[0].health, "healthy");
  EXPECT_EQ(gpus[0].health_reason, "");
  EXPECT_EQ(gpus[1].model, "H100-80GB");
  EXPECT_EQ(Initialized(), 0);  // the backend is gone: nvmlShutdown was called
}

TEST_F(FakeNvmlTest, MigDevicesWithPlacementsWhenPrivileged) {
  int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-cccc", 81920, true);
  // Index 0 is empty; the GPU instance at slice 4 is listed before the one at slice 0.
  AddMig(gpu, 1, "MIG-bbbb", 3, 40192, 9, 4);
  AddMig(gpu, 2, "MIG-aaaa", 1, 9728, 20, 0);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].model, "A100-80GB");
  EXPECT_EQ(gpus[0].mode, "partition");
  EXPECT_TRUE(gpus[0].mig_enabled);
  EXPECT_FALSE(gpus[0].dynamic_layout);
  ASSERT_EQ(gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(gpus[0].mig_instances[0].uuid, "MIG-aaaa");
  EXPECT_EQ(gpus[0].mig_instances[0].profile, "1g.10gb+me");
  EXPECT_EQ(gpus[0].mig_instances[0].start, 0);
  EXPECT_EQ(gpus[0].mig_instances[1].uuid, "MIG-bbbb");
  EXPECT_EQ(gpus[0].mig_instances[1].profile, "3g.40gb");
  EXPECT_EQ(gpus[0].mig_instances[1].start, 4);
  EXPECT_EQ(gpus[0].health, "healthy");
}

TEST_F(FakeNvmlTest, MigDevicesWithoutPlacementsWhenUnprivileged) {
  int gpu = AddGpu("NVIDIA H200", "GPU-dddd", 143771, true);
  AddMig(gpu, 0, "MIG-1", 3, 71 * 1024, 9, 0);
  AddMig(gpu, 1, "MIG-2", 1, 16 * 1024 + 512, 20, 4);
  Fn<void (*)(int)>("FakeNvmlSetPrivileged")(0);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_EQ(gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(gpus[0].mig_instances[0].profile, "3g.71gb");
  EXPECT_EQ(gpus[0].mig_instances[0].start, -1);
  EXPECT_EQ(gpus[0].mig_instances[1].profile, "1g.18gb");  // +me needs the profile id
  EXPECT_EQ(gpus[0].mig_instances[1].start, -1);
  EXPECT_EQ(gpus[0].health, "healthy");
}

TEST_F(FakeNvmlTest, UnknownModelKeepsTheDriverNameAndNamesMigByShape) {
  int gpu = AddGpu("NVIDIA B200", "GPU-eeee", 183359, true);
  AddMig(gpu, 0, "MIG-3", 2, 45 * 1024, 14, 0);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].model, "NVIDIA B200");
  EXPECT_EQ(gpus[0].memory_mib, 183359);
  ASSERT_EQ(gpus[0].mig_instances.size(), 1u);
  EXPECT_EQ(gpus[0].mig_instances[0].profile, "2g.45gb");
}

TEST_F(FakeNvmlTest, LostGpuIsUnhealthyAndTheOthersAreStillListed) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  int lost = AddGpu("NVIDIA H200", "GPU-2", 143771, false);
  int remap = AddGpu("NVIDIA H200", "GPU-3", 143771, false);
  Fn<void (*)(int)>("FakeNvmlSetLost")(lost);
  Fn<void (*)(int)>("FakeNvmlSetRemapPending")(remap);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].health, "healthy");
  EXPECT_EQ(gpus[1].health, "unhealthy");
  EXPECT_THAT(gpus[1].health_reason, HasSubstr("nvmlDeviceGetUUID: GPU is lost (15)"));
  EXPECT_EQ(gpus[1].uuid, "");
  EXPECT_EQ(gpus[2].health, "suspect");
  EXPECT_EQ(gpus[2].health_reason, "row remapping pending a GPU reset");
}

}  // namespace
}  // namespace carve
