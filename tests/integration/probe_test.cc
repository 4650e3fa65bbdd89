// `carve probe` run as a job by real agents: what the job asked, what its record says was
// granted and what the probe saw from inside agree, field by field (the acceptance kit's first
// software-isolation test), and a probe taking memory past its share's cap is stopped by the
// cap, its last line saying how far it got.
#include "absl/strings/str_split.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

// The job's memory: a sanitized monitor and probe need more.
constexpr int64_t kMemoryMiB = kSanitized ? 1536 : 512;

// One shared L40S, enforced by the simulated MPS twin.
const NodeList kProbeNodes = {{"probe-0", "gpus:\n  - {model: L40S, count: 1, mode: shared}\n"}};

class ProbeTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kProbeNodes; }

  json Probe(const std::string& memory_mib) {
    return Submit(
        {{"command", {CARVE_BINARY, "probe", "--memory-mib", memory_mib, "--step-mib", "2048"}},
         {"resources",
          {{"mode", "shared"},
           {"gpu_compute", "50%"},
           {"gpu_memory", "8Gi"},
           {"cpu", "500m"},
           {"memory", absl::StrCat(kMemoryMiB, "Mi")}}}});
  }

  // The probe's lines of job `id`'s log, by kind ("sees", "memory", ...).
  std::multimap<std::string, json> ProbeLines(int64_t id) {
    std::multimap<std::string, json> out;
    for (absl::string_view line : absl::StrSplit(Logs(id), '\n', absl::SkipEmpty())) {
      json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("probe")) out.emplace(j["probe"], j);
    }
    return out;
  }
};

TEST_F(ProbeTest, WhatWasAskedGrantedAndSeenAgree) {
  json job = Probe("4096");
  json done = WaitFinal(job["id"], 60);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  const json& replica = done["replicas"][0];
  std::multimap<std::string, json> lines = ProbeLines(job["id"]);
  ASSERT_EQ(lines.count("sees"), 1u) << Logs(job["id"]);
  const json& sees = lines.find("sees")->second;

  // The device: the one GPU the record granted, and only it.
  int device = replica["grants"][0]["device"];
  std::string uuid = Node("probe-0")["gpus"][device]["uuid"];
  EXPECT_EQ(sees["visible_devices"], uuid) << sees.dump(2);
  ASSERT_EQ(sees["devices"].size(), 1u);
  EXPECT_EQ(sees["devices"][0]["id"], uuid);

  // The share's caps: what the record says enforced them is what reached the job.
  const json& limits = replica["gpu_isolation"]["limits"];
  EXPECT_EQ(sees["mps"]["pinned_device_mem_limit"], limits["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"]);
  EXPECT_EQ(sees["mps"]["pinned_device_mem_limit"], "0=8192M");
  EXPECT_EQ(sees["mps"]["active_thread_percentage"], "50");

  // CPU and memory: where the record says a cgroup enforced them, the probe read the same.
  // Where it says none did, the probe must not find the limit either (a record that undersells).
  std::string enforcement = replica["enforcement"];
  auto enforced = [&](const char* v1, const char* v2) {
    return enforcement.find(v1) != std::string::npos || enforcement.find(v2) != std::string::npos;
  };
  const json& seen = sees["cgroup"];
  if (enforced("memory.limit_in_bytes=", "memory.max=")) {
    EXPECT_EQ(seen["memory_max_bytes"], kMemoryMiB << 20) << enforcement << seen.dump(2);
  } else {
    EXPECT_NE(seen["memory_max_bytes"], kMemoryMiB << 20) << enforcement << seen.dump(2);
  }
  if (enforced("cpu.cfs_quota_us=", "cpu.max=")) {
    EXPECT_EQ(seen["cpu_max_milli"], 500) << enforcement << seen.dump(2);
  } else {
    EXPECT_NE(seen["cpu_max_milli"], 500) << enforcement << seen.dump(2);
  }
  // The memory it asked for, within its cap, it got.
  ASSERT_EQ(lines.count("memory-reached"), 1u) << Logs(job["id"]);
  EXPECT_EQ(lines.find("memory-reached")->second["mib"], 4096);
}

TEST_F(ProbeTest, TakingMemoryPastTheShareCapIsStoppedThere) {
  json job = Probe("16384");
  json done = WaitFinal(job["id"], 60);
  EXPECT_EQ(done["state"], "failed") << done.dump(2);
  EXPECT_EQ(done["replicas"][0]["signal"], 9) << done.dump(2);
  std::multimap<std::string, json> lines = ProbeLines(job["id"]);
  EXPECT_EQ(lines.count("memory-reached"), 0u) << "the probe was not stopped: " << Logs(job["id"]);
  int64_t held = 0;
  for (auto [it, end] = lines.equal_range("memory"); it != end; ++it) {
    if (it->second["ok"] == true) held = std::max(held, it->second["mib"].get<int64_t>());
  }
  EXPECT_EQ(held, 8192) << "every step up to the 8 GiB cap held, none past it: " << Logs(job["id"]);
}

}  // namespace
