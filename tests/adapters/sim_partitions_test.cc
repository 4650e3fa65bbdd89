// The simulated backend's partition lifecycle: dynamic instances created and destroyed beside
// running neighbours, whole-GPU layouts applied only to an idle GPU, both persisted in the state
// directory so a restarted agent discovers them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "ports/devices.h"

namespace carve {
namespace {

class SimPartitionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("simpart-", getpid());
    std::filesystem::remove_all(dir_);
    backend_ = Open();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<DeviceBackend> Open() {
    auto b = SimulatedBackendFromYaml(
        "gpus:\n  - {model: A100-40GB, mode: partition}\n"
        "  - {model: A100-40GB, mode: partition, layout: [3g.20gb@0, 3g.20gb@4]}\n",
        "n1");
    EXPECT_TRUE(b.ok()) << b.status();
    (*b)->SetStateDir(dir_.string());
    return *std::move(b);
  }

  std::vector<std::string> Layout(DeviceBackend& b, int gpu) {
    std::vector<std::string> out;
    auto gpus = b.Discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status();
    for (const DiscoveredMigInstance& m : (*gpus)[gpu].mig_instances) {
      out.push_back(absl::StrCat(m.profile, "@", m.start, " ", m.uuid));
    }
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<DeviceBackend> backend_;
};

TEST_F(SimPartitionsTest, DynamicInstancesAreCreatedBesideNeighboursAndDestroyed) {
  auto a = backend_->CreateMigInstance(0, "3g.20gb", 4);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "MIG-sim-n1-0-4");
  ASSERT_TRUE(backend_->CreateMigInstance(0, "2g.10gb", 0).ok());
  auto overlap = backend_->CreateMigInstance(0, "1g.5gb", 4);
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.status().message().find("cannot create 1g.5gb@4 on GPU 0"), std::string::npos)
      << overlap.status();
  EXPECT_FALSE(backend_->CreateMigInstance(1, "1g.5gb", 6).ok()) << "GPU 1 has a fixed layout";
  EXPECT_EQ(Layout(*backend_, 0),
            (std::vector<std::string>{"2g.10gb@0 MIG-sim-n1-0-0", "3g.20gb@4 MIG-sim-n1-0-4"}));
  // A restarted agent finds them.
  EXPECT_EQ(Layout(*Open(), 0).size(), 2u);
  ASSERT_TRUE(backend_->DestroyMigInstance(0, 4).ok());
  EXPECT_EQ(Layout(*backend_, 0), std::vector<std::string>{"2g.10gb@0 MIG-sim-n1-0-0"});
  EXPECT_TRUE(absl::IsNotFound(backend_->DestroyMigInstance(0, 4)));
}

TEST_F(SimPartitionsTest, LayoutsApplyOnlyToAnIdleGpuAndGetNewUuids) {
  EXPECT_EQ(Layout(*backend_, 1),
            (std::vector<std::string>{"3g.20gb@0 MIG-sim-n1-1-0", "3g.20gb@4 MIG-sim-n1-1-4"}));
  EXPECT_FALSE(backend_->ApplyMigLayout(1, {{"", "7g.40gb", 0}, {"", "1g.5gb", 6}}).ok());
  // A process on the GPU (as a job registers it under CARVE_SIM_GPU_DIR) blocks the change.
  std::filesystem::create_directories(dir_ / "GPU-sim-n1-1");
  std::ofstream(dir_ / "GPU-sim-n1-1" / absl::StrCat("job-1-r0.", getpid())) << "100";
  absl::Status busy = backend_->ApplyMigLayout(1, {{"", "7g.40gb", 0}});
  EXPECT_TRUE(absl::IsFailedPrecondition(busy)) << busy;
  EXPECT_EQ(Layout(*backend_, 1).size(), 2u) << "a refused layout changed the GPU";
  std::filesystem::remove(dir_ / "GPU-sim-n1-1" / absl::StrCat("job-1-r0.", getpid()));
  ASSERT_TRUE(backend_->ApplyMigLayout(1, {{"", "7g.40gb", 0}}).ok());
  EXPECT_EQ(Layout(*backend_, 1), std::vector<std::string>{"7g.40gb@0 MIG-sim-n1-1-0-g1"});
  ASSERT_TRUE(backend_->ApplyMigLayout(1, {{"", "4g.20gb", 0}, {"", "3g.20gb", 4}}).ok());
  EXPECT_EQ(Layout(*Open(), 1), (std::vector<std::string>{"4g.20gb@0 MIG-sim-n1-1-0-g2",
                                                          "3g.20gb@4 MIG-sim-n1-1-4-g2"}));
}

}  // namespace
}  // namespace carve
