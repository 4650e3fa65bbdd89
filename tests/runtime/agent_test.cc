#include "runtime/agent.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace carve {
namespace {

GrantRecord OnGpu(int device) {
  GrantRecord g;
  g.device = device;
  return g;
}

// A grant names the GPU by its NVML index; the device node the fence allows is the GPU's own
// (/dev/nvidia<minor>), which differs from the index when the driver probed GPUs in another
// order. Before, GPU 0 with minor 1 was given /dev/nvidia0: another GPU's node.
TEST(NvidiaDeviceNodesTest, NameEachGrantedGpuByItsMinorNumber) {
  std::vector<DiscoveredGpu> gpus(2);
  gpus[0].index = 0;
  gpus[0].minor = 1;
  gpus[1].index = 1;
  gpus[1].minor = 0;
  std::vector<std::string> nodes = NvidiaDeviceNodes({OnGpu(0)}, gpus);
  EXPECT_EQ(nodes,
            (std::vector<std::string>{"/dev/nvidia-modeset", "/dev/nvidia-uvm",
                                      "/dev/nvidia-uvm-tools", "/dev/nvidia1", "/dev/nvidiactl"}));
}

TEST(NvidiaDeviceNodesTest, FallBackToTheIndexWhenTheMinorIsUnknown) {
  std::vector<DiscoveredGpu> gpus(1);
  gpus[0].index = 3;
  std::vector<std::string> nodes = NvidiaDeviceNodes({OnGpu(3)}, gpus);
  EXPECT_NE(std::find(nodes.begin(), nodes.end(), "/dev/nvidia3"), nodes.end());
}

}  // namespace
}  // namespace carve
