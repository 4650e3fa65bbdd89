// The NVML backend's processes, utilization, XID events and MIG re-layout, against the fake
// libnvidia-ml (tests/adapters/fake_nvml). Discovery itself is tested in devices_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "adapters/fake_nvml/fake_nvml_fixture.h"
#include "adapters/nvml/nvml_api.h"
#include "adapters/nvml/nvml_names.h"
#include "ports/devices.h"

namespace carve {
namespace {

using ::testing::HasSubstr;

// The fixture with the fake's activity and MIG scenario setters.
class FakeNvmlActivityTest : public FakeNvmlTest {
 protected:
  void AddProcess(int gpu, int mig, unsigned int pid, long long mib) {
    Fn<void (*)(int, int, unsigned int, long long)>("FakeNvmlAddProcess")(gpu, mig, pid, mib);
  }
  void InjectXid(int gpu, unsigned long long xid, int gpu_instance = -1) {
    Fn<void (*)(int, unsigned long long, int)>("FakeNvmlInjectXid")(gpu, xid, gpu_instance);
  }
  void SetPrivileged(bool privileged) {
    Fn<void (*)(int)>("FakeNvmlSetPrivileged")(privileged ? 1 : 0);
  }
  // An A100-80GB in MIG mode holding one 7g.80gb instance (GPU instance 1).
  int MigGpu() {
    int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-mig", 81920, true);
    AddMig(gpu, 0, "MIG-old", 7, 80896, 0, 0);
    return gpu;
  }
  static std::vector<std::string> Layout(const DiscoveredGpu& gpu) {
    std::vector<std::string> out;
    for (const DiscoveredMigInstance& m : gpu.mig_instances) {
      out.push_back(m.profile + "@" + std::to_string(m.start));
    }
    return out;
  }
  static std::vector<DiscoveredMigInstance> Want(
      const std::vector<std::pair<std::string, int>>& instances) {
    std::vector<DiscoveredMigInstance> out;
    for (const auto& [profile, start] : instances) out.push_back({"", profile, start});
    return out;
  }
  std::vector<std::string> LayoutNow(DeviceBackend& backend) {
    absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend.Discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status();
    return gpus.ok() && !gpus->empty() ? Layout(gpus->front()) : std::vector<std::string>{};
  }
};

// --- Processes -----------------------------------------------------------------------------------

TEST_F(FakeNvmlActivityTest, ProcessesOfAWholeGpuWithTheirMemory) {
  int gpu = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  AddProcess(gpu, -1, 1234, 512);
  AddProcess(gpu, -1, 77, -1);  // the driver does not say how much
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::StatusOr<std::vector<DeviceProcess>> processes = backend->Processes(0);
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 2u);
  EXPECT_EQ((*processes)[0].pid, 77);
  EXPECT_EQ((*processes)[0].memory_mib, -1);
  EXPECT_EQ((*processes)[1].pid, 1234);
  EXPECT_EQ((*processes)[1].memory_mib, 512);
  EXPECT_EQ((*processes)[1].owner, "");
}

TEST_F(FakeNvmlActivityTest, NoProcessesIsAnEmptyList) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::StatusOr<std::vector<DeviceProcess>> processes = backend->Processes(0);
  ASSERT_TRUE(processes.ok()) << processes.status();
  EXPECT_TRUE(processes->empty());
}

TEST_F(FakeNvmlActivityTest, AProcessStartingBetweenSizingAndReadingIsRead) {
  int gpu = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  AddProcess(gpu, -1, 10, 100);
  Fn<void (*)(int, unsigned int, long long)>("FakeNvmlAddProcessAfterSizing")(gpu, 11, 200);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::StatusOr<std::vector<DeviceProcess>> processes = backend->Processes(0);
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 2u);
  EXPECT_EQ((*processes)[1].pid, 11);
  EXPECT_EQ((*processes)[1].memory_mib, 200);
}

TEST_F(FakeNvmlActivityTest, MigProcessesAreReadPerMigDeviceWithoutPrivilege) {
  int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-mig", 81920, true);
  AddMig(gpu, 0, "MIG-a", 3, 40192, 9, 0);
  AddMig(gpu, 1, "MIG-b", 3, 40192, 9, 4);
  AddProcess(gpu, 0, 500, 1000);
  AddProcess(gpu, 1, 501, 300);
  AddProcess(gpu, 1, 500, 24);  // one process on both instances
  SetPrivileged(false);         // the parent handle's aggregate would need root
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::StatusOr<std::vector<DeviceProcess>> processes = backend->Processes(0);
  ASSERT_TRUE(processes.ok()) << processes.status();
  ASSERT_EQ(processes->size(), 2u);
  EXPECT_EQ((*processes)[0].pid, 500);
  EXPECT_EQ((*processes)[0].memory_mib, 1024);
  EXPECT_EQ((*processes)[1].pid, 501);
}

TEST_F(FakeNvmlActivityTest, ProcessErrorsNameTheGpuAndTheCall) {
  int gpu = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  Fn<void (*)(int, int)>("FakeNvmlSetProcessesResult")(gpu, nvml::kErrorNoPermission);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::StatusOr<std::vector<DeviceProcess>> processes = backend->Processes(0);
  ASSERT_FALSE(processes.ok());
  EXPECT_EQ(processes.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(processes.status().message(),
            "GPU 0: nvmlDeviceGetComputeRunningProcesses_v2: Insufficient Permissions (4) "
            "(needs root)");
  processes = backend->Processes(3);
  ASSERT_FALSE(processes.ok());
  EXPECT_EQ(processes.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(processes.status().message(), "no GPU 3 (NVML reports 1)");
}

// --- Utilization ---------------------------------------------------------------------------------

TEST_F(FakeNvmlActivityTest, UtilizationIsReportedWhereTheDriverHasIt) {
  int busy = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  AddGpu("NVIDIA H200", "GPU-2", 143771, false);  // NOT_SUPPORTED
  MigGpu();                                       // MIG mode: NOT_SUPPORTED
  Fn<void (*)(int, int)>("FakeNvmlSetUtilization")(busy, 73);
  std::vector<DiscoveredGpu> gpus = DiscoverAll();
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].utilization_pct, 73);
  EXPECT_EQ(gpus[1].utilization_pct, -1);
  EXPECT_EQ(gpus[2].utilization_pct, -1);
  EXPECT_EQ(gpus[1].health, "healthy");
}

// A MIG GPU's activity is GPM's SM activity of each GPU instance over the time since the last
// look, weighted by its compute slices: H200 (7 slices), a 3-slice instance 80% busy and a
// 2-slice one 20% busy: (3 x 80 + 2 x 20) / 7 = 40%, the free 2 slices idle. The first look has
// nothing to measure against, a failed metric leaves it unknown, and so does a GPU without GPM.
TEST_F(FakeNvmlActivityTest, AMigGpusActivityComesFromGpmPerInstance) {
  int gpm = AddGpu("NVIDIA H200", "GPU-gpm", 143771, true);
  AddMig(gpm, 0, "MIG-a", 3, 71 * 1024, 9, 0);
  AddMig(gpm, 1, "MIG-b", 2, 35 * 1024, 14, 4);
  Fn<void (*)(int, int)>("FakeNvmlSetGpm")(gpm, 1);
  auto set = Fn<void (*)(int, unsigned int, int)>("FakeNvmlSetMigSmUtil");
  set(gpm, 0, 80);
  set(gpm, 1, 20);
  int none = AddGpu("NVIDIA H200", "GPU-nogpm", 143771, true);  // GPM not supported
  AddMig(none, 0, "MIG-c", 3, 71 * 1024, 9, 0);
  set(none, 0, 50);
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  auto look = [&] {
    absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status();
    std::vector<int> pct;
    for (const DiscoveredGpu& g : gpus.ok() ? *gpus : std::vector<DiscoveredGpu>{}) {
      pct.push_back(g.utilization_pct);
    }
    return pct;
  };
  EXPECT_EQ(look(), (std::vector<int>{-1, -1})) << "a first sample measures nothing";
  EXPECT_EQ(look(), (std::vector<int>{40, -1}));
  set(gpm, 0, 100);
  set(gpm, 1, 100);
  EXPECT_EQ(look(), (std::vector<int>{71, -1}));  // 5 of 7 slices held, all busy
  set(gpm, 1, -1);
  EXPECT_EQ(look(), (std::vector<int>{-1, -1})) << "one instance unknown: the GPU is unknown";
}

// --- XID events ----------------------------------------------------------------------------------

TEST_F(FakeNvmlActivityTest, CriticalXidMarksOnlyItsGpuAndStays) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  AddGpu("NVIDIA H200", "GPU-2", 143771, false);
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(Fn<int (*)()>("FakeNvmlEventSets")(), 1);
  InjectXid(1, 79);
  InjectXid(0, 13);  // an application's own fault: not the device's
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ((*gpus)[0].health, "healthy");
  EXPECT_EQ((*gpus)[1].health, "unhealthy");
  EXPECT_EQ((*gpus)[1].health_reason, "XID 79");
  // The event was consumed; the mark stays until the agent restarts after a GPU reset.
  gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[1].health, "unhealthy");
  EXPECT_EQ((*gpus)[1].health_reason, "XID 79");
  backend.reset();
  EXPECT_EQ(Fn<int (*)()>("FakeNvmlEventSets")(), 0);  // the event set was freed
}

// An XID the driver attributes to a GPU instance marks that instance only (by its start slice),
// until the instance is destroyed.
TEST_F(FakeNvmlActivityTest, XidOfAMigInstanceMarksOnlyThatInstance) {
  int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-mig", 81920, true);
  AddMig(gpu, 0, "MIG-a", 3, 40192, 9, 0);  // GPU instance 1
  AddMig(gpu, 1, "MIG-b", 3, 40192, 9, 4);  // GPU instance 2
  std::unique_ptr<DeviceBackend> backend = Open();
  InjectXid(gpu, 94, 2);
  InjectXid(gpu, 94, 2);  // repeated: named once
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].health, "healthy");
  EXPECT_EQ((*gpus)[0].instance_health, (std::map<int, std::string>{{4, "suspect XID 94"}}));
  InjectXid(gpu, 95, 2);
  gpus = backend->Discover();
  EXPECT_EQ((*gpus)[0].instance_health,
            (std::map<int, std::string>{{4, "unhealthy XID 94; XID 95"}}));
  // Destroyed (here by a re-layout), the instance takes its fault along.
  ASSERT_TRUE(backend->ApplyMigLayout(0, Want({{"7g.80gb", 0}})).ok());
  gpus = backend->Discover();
  EXPECT_TRUE((*gpus)[0].instance_health.empty());
  EXPECT_EQ((*gpus)[0].health, "healthy");
}

// When the instance cannot be placed (here: no privilege to ask), the GPU carries the fault.
TEST_F(FakeNvmlActivityTest, XidOfAnInstanceThatCannotBePlacedMarksItsGpu) {
  int gpu = MigGpu();
  SetPrivileged(false);
  std::unique_ptr<DeviceBackend> backend = Open();
  InjectXid(gpu, 94, 1);
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].health, "suspect");
  EXPECT_EQ((*gpus)[0].health_reason, "XID 94 (GPU instance 1)");
  EXPECT_TRUE((*gpus)[0].instance_health.empty());
}

TEST_F(FakeNvmlActivityTest, AGpuThatCannotBeRegisteredIsNotWatched) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  int unwatched = AddGpu("NVIDIA H200", "GPU-2", 143771, false);
  Fn<void (*)(int, int)>("FakeNvmlSetRegisterEventsResult")(unwatched, nvml::kErrorNotSupported);
  std::unique_ptr<DeviceBackend> backend = Open();
  InjectXid(unwatched, 79);
  InjectXid(0, 48);
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].health, "unhealthy");
  EXPECT_EQ((*gpus)[0].health_reason, "XID 48");
  EXPECT_EQ((*gpus)[1].health, "healthy");
}

TEST(NvmlNamesTest, XidHealthFollowsTheCatalogue) {
  for (unsigned long long xid : {48, 62, 64, 74, 79, 95, 119, 120, 140}) {
    EXPECT_EQ(XidHealth(xid), "unhealthy") << xid;
  }
  for (unsigned long long xid : {63, 92, 94}) EXPECT_EQ(XidHealth(xid), "suspect") << xid;
  for (unsigned long long xid : {13, 31, 43, 45, 0}) EXPECT_EQ(XidHealth(xid), "") << xid;
}

// --- MIG layouts ---------------------------------------------------------------------------------

TEST_F(FakeNvmlActivityTest, ApplyMigLayoutReplacesTheInstancesAtTheirPlacements) {
  MigGpu();
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::Status s =
      backend->ApplyMigLayout(0, Want({{"3g.40gb", 4}, {"2g.20gb", 0}, {"1g.10gb", 2}}));
  ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_THAT(Layout((*gpus)[0]), ::testing::ElementsAre("2g.20gb@0", "1g.10gb@2", "3g.40gb@4"));
  for (const DiscoveredMigInstance& m : (*gpus)[0].mig_instances) EXPECT_NE(m.uuid, "MIG-old");
  // And back to one whole-GPU instance; an empty layout leaves none.
  ASSERT_TRUE(backend->ApplyMigLayout(0, Want({{"7g.80gb", 0}})).ok());
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("7g.80gb@0"));
  ASSERT_TRUE(backend->ApplyMigLayout(0, {}).ok());
  EXPECT_TRUE(LayoutNow(*backend).empty());
}

TEST_F(FakeNvmlActivityTest, ApplyMigLayoutRefusesAGpuInUse) {
  int gpu = MigGpu();
  AddProcess(gpu, 0, 4242, 1024);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::Status s = backend->ApplyMigLayout(0, Want({{"3g.40gb", 0}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "GPU 0 is in use by pid 4242 (1024 MiB); GPU 0 is unchanged");
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("7g.80gb@0"));
}

TEST_F(FakeNvmlActivityTest, ApplyMigLayoutWithoutRootChangesNothing) {
  MigGpu();
  SetPrivileged(false);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::Status s = backend->ApplyMigLayout(0, Want({{"3g.40gb", 0}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "nvmlDeviceGetGpuInstancePossiblePlacements_v2 (3g.40gb): Insufficient "
            "Permissions (4) (needs root); GPU 0 is unchanged");
  SetPrivileged(true);
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("7g.80gb@0"));
}

TEST_F(FakeNvmlActivityTest, ApplyMigLayoutRejectsInvalidLayoutsBeforeTouchingTheGpu) {
  MigGpu();
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::Status s = backend->ApplyMigLayout(0, Want({{"3g.40gb", 2}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("GPU 0: "));
  s = backend->ApplyMigLayout(0, Want({{"3g.40gb", 0}, {"4g.40gb", 0}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = backend->ApplyMigLayout(0, Want({{"5g.50gb", 0}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("5g.50gb"));
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("7g.80gb@0"));
}

TEST_F(FakeNvmlActivityTest, ApplyMigLayoutNeedsMigModeAndAKnownGpu) {
  AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::Status s = backend->ApplyMigLayout(0, Want({{"3g.71gb", 0}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("GPU 0: MIG mode is off"));
  EXPECT_EQ(backend->ApplyMigLayout(1, {}).code(), absl::StatusCode::kNotFound);
}

TEST_F(FakeNvmlActivityTest, AFailurePartWaySaysWhatTheGpuWasLeftWith) {
  MigGpu();
  std::unique_ptr<DeviceBackend> backend = Open();
  Fn<void (*)(int, int)>("FakeNvmlFailGpuInstanceCreate")(2, nvml::kErrorInsufficientResources);
  absl::Status s = backend->ApplyMigLayout(0, Want({{"3g.40gb", 0}, {"3g.40gb", 4}}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "MIG layout of GPU 0 failed part-way: nvmlDeviceCreateGpuInstanceWithPlacement "
            "(3g.40gb@4): Insufficient Resources (23); done before: destroyed 7g.80gb@0, created "
            "3g.40gb@0; it has 3g.40gb@0");
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("3g.40gb@0"));
}

TEST_F(FakeNvmlActivityTest, DynamicInstancesAreCreatedAndDestroyedNextToTheOthers) {
  int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-dyn", 81920, true);
  std::unique_ptr<DeviceBackend> backend = Open();
  absl::StatusOr<std::string> uuid = backend->CreateMigInstance(0, "3g.40gb", 4);
  ASSERT_TRUE(uuid.ok()) << uuid.status();
  EXPECT_THAT(*uuid, ::testing::StartsWith("MIG-fake-0-"));
  ASSERT_TRUE(backend->CreateMigInstance(0, "1g.10gb", 0).ok());
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok());
  EXPECT_THAT(Layout((*gpus)[0]), ::testing::ElementsAre("1g.10gb@0", "3g.40gb@4"));
  EXPECT_EQ((*gpus)[0].mig_instances[1].uuid, *uuid);

  // The driver refuses an overlap; nothing changes.
  absl::StatusOr<std::string> overlap = backend->CreateMigInstance(0, "3g.40gb", 0);
  ASSERT_FALSE(overlap.ok());
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(overlap.status().message(),
            "nvmlDeviceCreateGpuInstanceWithPlacement (3g.40gb@0): Insufficient Resources (23); "
            "GPU 0 is unchanged");
  // An instance in use stays; one that is not there is NotFound.
  AddProcess(gpu, 0, 999, 100);  // on the 3g.40gb@4 (the first instance made)
  absl::Status s = backend->DestroyMigInstance(0, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "nvmlComputeInstanceDestroy (3g.40gb@4): In use by another client (19); GPU 0 is "
            "unchanged");
  s = backend->DestroyMigInstance(0, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "GPU 0 has no instance at slice 2");
  ASSERT_TRUE(backend->DestroyMigInstance(0, 0).ok());
  EXPECT_THAT(LayoutNow(*backend), ::testing::ElementsAre("3g.40gb@4"));
}

// The test bed itself refuses what the driver refuses, so that the backend's own checks are not
// the only thing standing between a bad layout and the GPU in these tests.
TEST_F(FakeNvmlActivityTest, TheFakeDriverRejectsOverlapsAndInvalidPlacements) {
  int gpu = AddGpu("NVIDIA A100-SXM4-80GB", "GPU-mig", 81920, true);
  using Create = nvml::Return (*)(nvml::Device, unsigned int, const nvml::GpuInstancePlacement*,
                                  nvml::GpuInstance*);
  using GetHandle = nvml::Return (*)(unsigned int, nvml::Device*);
  Create create = Fn<Create>("nvmlDeviceCreateGpuInstanceWithPlacement");
  nvml::Device device = nullptr;
  ASSERT_EQ(Fn<GetHandle>("nvmlDeviceGetHandleByIndex_v2")(gpu, &device), nvml::kSuccess);
  nvml::GpuInstance instance = nullptr;
  nvml::GpuInstancePlacement at0{0, 4}, at2{2, 4}, two_at2{2, 2};
  EXPECT_EQ(create(device, 9, &at0, &instance), nvml::kSuccess);                     // 3g.40gb@0
  EXPECT_EQ(create(device, 5, &at0, &instance), nvml::kErrorInsufficientResources);  // 4g.40gb@0
  EXPECT_EQ(create(device, 9, &at2, &instance), nvml::kErrorInvalidArgument);        // 3g.40gb@2
  EXPECT_EQ(create(device, 14, &two_at2, &instance), nvml::kErrorInsufficientResources);
  SetPrivileged(false);
  nvml::GpuInstancePlacement at4{4, 4};
  EXPECT_EQ(create(device, 9, &at4, &instance), nvml::kErrorNoPermission);
}

// --- Used memory and versions (the evidence reclaim and records carry) ---------------------------

TEST_F(FakeNvmlActivityTest, UsedMemoryCountsProcessesAndMemoryNoProcessHolds) {
  int gpu = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  AddProcess(gpu, -1, 1234, 2658);
  Fn<void (*)(int, unsigned long long)>("FakeNvmlSetReservedMemory")(gpu, 512);
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::StatusOr<int64_t> used = backend->UsedMemory(0);
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(*used, 2658 + 512);
  absl::StatusOr<int64_t> missing = backend->UsedMemory(3);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
}

TEST_F(FakeNvmlActivityTest, UsedMemoryIsNotOfferedInMigMode) {
  MigGpu();
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::StatusOr<int64_t> used = backend->UsedMemory(0);
  EXPECT_EQ(used.status().code(), absl::StatusCode::kUnimplemented) << used.status();
  EXPECT_THAT(std::string(used.status().message()), ::testing::HasSubstr("MIG mode"));
}

TEST_F(FakeNvmlActivityTest, VersionsOfTheDriverStackAndEachVbios) {
  int gpu = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  Fn<void (*)(int, const char*)>("FakeNvmlSetVbios")(gpu, "96.00.AF.00.01");
  Fn<void (*)(const char*, const char*, int)>("FakeNvmlSetVersions")("580.65.06", "13.580.65.06",
                                                                     12080);
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  DriverVersions v = backend->Versions();
  EXPECT_EQ(v.driver, "580.65.06");
  EXPECT_EQ(v.nvml, "13.580.65.06");
  EXPECT_EQ(v.cuda_driver, "12.8");
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(gpus->front().vbios, "96.00.AF.00.01");
  EXPECT_EQ(gpus->front().health, "healthy");
}

// The GPU's device node comes from NVML's minor number, not from its index: on a node whose
// driver numbered GPUs in another order, fencing /dev/nvidia<index> would fence the wrong GPU.
TEST_F(FakeNvmlActivityTest, EachGpuKnowsTheMinorNumberOfItsDeviceNode) {
  int first = AddGpu("NVIDIA H200", "GPU-1", 143771, false);
  int second = AddGpu("NVIDIA H200", "GPU-2", 143771, false);
  Fn<void (*)(int, int)>("FakeNvmlSetMinor")(first, 1);
  Fn<void (*)(int, int)>("FakeNvmlSetMinor")(second, 0);
  std::unique_ptr<DeviceBackend> backend = Open();
  ASSERT_NE(backend, nullptr);
  absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].minor, 1);
  EXPECT_EQ((*gpus)[1].minor, 0);
}

}  // namespace
}  // namespace carve
