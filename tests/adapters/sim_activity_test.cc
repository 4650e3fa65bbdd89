// Device activity from the simulated backend: a GPU is busy while a live process is on it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "ports/devices.h"

namespace carve {
namespace {

TEST(SimulatedActivityTest, BusyWhileALiveProcessUsesTheDevice) {
  auto backend = SimulatedBackendFromYaml("gpus:\n  - {model: H200, count: 2}\n", "n1");
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("simact-", getpid());
  std::filesystem::remove_all(dir);
  (*backend)->SetStateDir(dir.string());
  auto gpus = (*backend)->Discover();
  ASSERT_TRUE(gpus.ok());
  std::filesystem::create_directories(dir / (*gpus)[0].uuid);
  EXPECT_EQ(*(*backend)->BusyMilli(0), 0);
  std::ofstream(dir / (*gpus)[0].uuid / absl::StrCat("job-1-r0.", getpid())) << "1024";
  EXPECT_EQ(*(*backend)->BusyMilli(0), 1000);
  EXPECT_EQ(*(*backend)->BusyMilli(1), 0);
  // Leaked memory of a dead process is not activity.
  std::filesystem::remove_all(dir / (*gpus)[0].uuid);
  std::filesystem::create_directories(dir / (*gpus)[0].uuid);
  std::ofstream(dir / (*gpus)[0].uuid / "job-2-r0.999999999") << "2048 leak";
  EXPECT_EQ(*(*backend)->BusyMilli(0), 0);
  EXPECT_FALSE((*backend)->BusyMilli(7).ok());
}

}  // namespace
}  // namespace carve
