// The fake libnvidia-ml (tests/adapters/fake_nvml) loaded next to the NVML backend, for tests in
// several files; the fixture is one class (not in an anonymous namespace) so that every file's
// FakeNvmlTest tests share it, as GoogleTest requires.
#ifndef CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_FIXTURE_H_
#define CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_FIXTURE_H_

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "adapters/nvml/nvml_backend.h"
#include "ports/devices.h"

namespace carve {

// The fake libnvidia-ml (tests/adapters/fake_nvml), driven through its FakeNvml* functions.
class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(CARVE_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    Fn<void (*)()>("FakeNvmlReset")();
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

  template <typename F>
  F Fn(const char* name) {
    F f = reinterpret_cast<F>(dlsym(handle_, name));
    EXPECT_NE(f, nullptr) << name;
    return f;
  }
  int AddGpu(const char* name, const char* uuid, unsigned long long memory_mib, bool mig) {
    return Fn<int (*)(const char*, const char*, unsigned long long, int)>("FakeNvmlAddGpu")(
        name, uuid, memory_mib, mig ? 1 : 0);
  }
  void AddMig(int gpu, unsigned int index, const char* uuid, unsigned int slices,
              unsigned long long memory_mib, unsigned int profile_id, unsigned int start) {
    Fn<void (*)(int, unsigned int, const char*, unsigned int, unsigned long long, unsigned int,
                unsigned int)>("FakeNvmlAddMig")(gpu, index, uuid, slices, memory_mib, profile_id,
                                                 start);
  }
  int Initialized() { return Fn<int (*)()>("FakeNvmlInitialized")(); }

  std::unique_ptr<DeviceBackend> Open() {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
        OpenNvmlBackendFromLibrary(CARVE_FAKE_NVML);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? *std::move(backend) : nullptr;
  }

  std::vector<DiscoveredGpu> DiscoverAll() {
    std::unique_ptr<DeviceBackend> backend = Open();
    if (backend == nullptr) return {};
    EXPECT_EQ(backend->name(), "nvml");
    absl::StatusOr<std::vector<DiscoveredGpu>> gpus = backend->Discover();
    EXPECT_TRUE(gpus.ok()) << gpus.status();
    return gpus.ok() ? *gpus : std::vector<DiscoveredGpu>{};
  }

  void* handle_ = nullptr;
};

}  // namespace carve

#endif  // CARVE_TESTS_ADAPTERS_FAKE_NVML_FAKE_NVML_FIXTURE_H_
