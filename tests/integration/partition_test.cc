// The partition lifecycle against the real server and agent: a planned MIG re-layout of one GPU
// while its neighbour keeps running, stable partition ids, and layouts changed behind Carve's back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using namespace carve::it;  // NOLINT: the harness

const NodeList kMigNode = {
    {"mig-a",
     "gpus:\n  - {model: A100-40GB, count: 2, mode: partition, layout: [3g.20gb@0, 3g.20gb@4]}\n"},
};

class PartitionTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kMigNode; }

  json SubmitSlice(const std::string& profile, const std::string& kind = "batch") {
    return Submit({{"kind", kind},
                   {"command", {"sleep", "60"}},
                   {"resources", {{"mode", "partition"}, {"profile", profile}}}});
  }

  json WaitRunning(int64_t id) {
    EXPECT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
    return Job(id);
  }

  static std::vector<std::string> Layout(const json& gpu) {
    std::vector<std::string> out;
    for (const json& m : gpu["mig_instances"]) out.push_back(m["id"]);
    return out;
  }
};

TEST_F(PartitionTest, RelayoutWhileTheNeighbourGpuKeepsRunning) {
  json neighbour = WaitRunning(SubmitSlice("3g.20gb", "inference")["id"]);
  int keep = neighbour["replicas"][0]["grants"][0]["device"];
  int change = 1 - keep;
  // Keep the second job off the neighbour's GPU so the re-layout has something to move.
  ASSERT_TRUE(
      Api().Post(absl::StrCat("/api/v1/nodes/mig-a/cordon?gpu=", keep), json::object()).ok());
  json moved = WaitRunning(SubmitSlice("3g.20gb")["id"]);
  ASSERT_EQ(moved["replicas"][0]["grants"][0]["device"], change);
  EXPECT_EQ(moved["replicas"][0]["grants"][0]["partition"],
            absl::StrCat("mig-a/gpu", change, "/3g.20gb@",
                         moved["replicas"][0]["grants"][0]["start"].get<int>()));
  ASSERT_TRUE(
      Api().Post(absl::StrCat("/api/v1/nodes/mig-a/uncordon?gpu=", keep), json::object()).ok());

  auto bad = Api().Post(absl::StrCat("/api/v1/nodes/mig-a/gpus/", change, "/layout"),
                        json{{"layout", {"7g.40gb", "1g.5gb"}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("7g.40gb, 1g.5gb do not fit together"));
  auto asked = Api().Post(absl::StrCat("/api/v1/nodes/mig-a/gpus/", change, "/layout"),
                          json{{"layout", json::array({"2g.10gb", "1g.5gb", "4g.20gb@0"})}});
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ((*asked)["phase"], "draining");
  EXPECT_EQ((*asked)["jobs_moved"], json::array({moved["id"]}));
  EXPECT_EQ((*asked)["layout"], json::array({"4g.20gb@0", "2g.10gb@4", "1g.5gb@6"}));
  auto again = Api().Post(absl::StrCat("/api/v1/nodes/mig-a/gpus/", change, "/layout"),
                          json{{"layout", {"7g.40gb"}}});
  EXPECT_FALSE(again.ok()) << "a second re-layout while one is in progress";

  ASSERT_TRUE(Eventually([&] { return Node("mig-a")["relayouts"].empty(); }))
      << Node("mig-a").dump(2);
  json gpu = Node("mig-a")["gpus"][change];
  EXPECT_EQ(Layout(gpu),
            (std::vector<std::string>{absl::StrCat("mig-a/gpu", change, "/4g.20gb@0"),
                                      absl::StrCat("mig-a/gpu", change, "/2g.10gb@4"),
                                      absl::StrCat("mig-a/gpu", change, "/1g.5gb@6")}));
  EXPECT_EQ(gpu["state"], "available");

  // The order of evidence: the job's reclaim verified, then the GPU reconfigured, then done.
  json reclaimed = EventsOf("job.retrying");
  json reconfiguring = EventsOf("device.reconfiguring");
  json done = EventsOf("device.relayout-done");
  ASSERT_EQ(reclaimed.size(), 1u);
  ASSERT_EQ(reconfiguring.size(), 1u);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_LT(reclaimed[0]["seq"], reconfiguring[0]["seq"]);
  EXPECT_THAT(reclaimed[0]["reason"].get<std::string>(), HasSubstr("after MIG re-layout of GPU"));
  EXPECT_LT(reconfiguring[0]["seq"], done[0]["seq"]);
  EXPECT_EQ(done[0]["subject"], absl::StrCat("node/mig-a/gpu/", change));

  // The moved job's first attempt ended with verified reclamation, and it runs again next to the
  // neighbour, which never stopped.
  json again_running = WaitRunning(moved["id"]);
  EXPECT_EQ(again_running["attempt"], 1);
  EXPECT_THAT(again_running["attempts"][0]["cause"].get<std::string>(),
              HasSubstr("MIG re-layout of GPU"));
  EXPECT_EQ(again_running["attempts"][0]["reclaim"][0]["status"], "verified");
  EXPECT_EQ(again_running["replicas"][0]["grants"][0]["device"], keep);
  json still = Job(neighbour["id"]);
  EXPECT_EQ(still["state"], "running");
  EXPECT_EQ(still["attempt"], 0);
  EXPECT_EQ(still["replicas"][0]["pid"], neighbour["replicas"][0]["pid"]);
  for (const json& e : EventsOf("job.displaced")) {
    EXPECT_NE(e["subject"], absl::StrCat("job/", neighbour["id"].get<int64_t>()));
  }
  // The new layout serves its profiles.
  json small = WaitRunning(SubmitSlice("1g.5gb")["id"]);
  EXPECT_EQ(small["replicas"][0]["grants"][0]["partition"],
            absl::StrCat("mig-a/gpu", change, "/1g.5gb@6"));

  // An agent restart keeps the partition ids (the driver's UUIDs may change).
  Kill(agents_[0], SIGKILL);
  agents_[0] = StartAgent(0);
  ASSERT_TRUE(Eventually([&] { return EventsOf("node.re-registered").size() == 1; }));
  EXPECT_EQ(Layout(Node("mig-a")["gpus"][change]), Layout(gpu));
  EXPECT_TRUE(EventsOf("device.layout-mismatch").empty());
}

TEST_F(PartitionTest, LayoutChangedBehindCarveIsReportedNotAdopted) {
  json before = Node("mig-a")["gpus"][1];
  Kill(agents_[0], SIGKILL);
  // Someone re-partitions GPU 1 by hand while the agent is down.
  std::filesystem::path dir = dir_ / "jobs/mig-a/simgpu/GPU-sim-mig-a-1";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "mig-layout") << "7g.40gb@0\ngeneration 1\n";
  agents_[0] = StartAgent(0);
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.layout-mismatch").empty(); }));
  json node = Node("mig-a");
  EXPECT_EQ(node["gpus"][1]["state"], "quarantined");
  EXPECT_THAT(node["quarantined"]["1"].get<std::string>(),
              HasSubstr("recorded 3g.20gb@0, 3g.20gb@4; discovered 7g.40gb@0"));
  EXPECT_EQ(Layout(node["gpus"][1]), Layout(before)) << "the discovered layout was adopted";
  EXPECT_EQ(node["gpus"][0]["state"], "available");
  // Nothing lands on the quarantined GPU.
  json a = WaitRunning(SubmitSlice("3g.20gb")["id"]);
  json b = WaitRunning(SubmitSlice("3g.20gb")["id"]);
  json c = SubmitSlice("3g.20gb");
  EXPECT_EQ(a["replicas"][0]["grants"][0]["device"], 0);
  EXPECT_EQ(b["replicas"][0]["grants"][0]["device"], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Job(c["id"])["state"], "queued");

  // An admin adopts what was found: the GPU returns with the discovered layout.
  ASSERT_TRUE(Api()
                  .Post("/api/v1/apply",
                        json::array({{{"kind", "node"},
                                      {"name", "mig-a"},
                                      {"gpus", {{{"index", 1}, {"state", "available"}}}}}}))
                  .ok());
  node = Node("mig-a");
  EXPECT_EQ(Layout(node["gpus"][1]), std::vector<std::string>{"mig-a/gpu1/7g.40gb@0"});
  EXPECT_EQ(node["gpus"][1]["state"], "available");
  EXPECT_EQ(EventsOf("device.layout-adopted").size(), 1u);
}

// An XID attributed to one MIG instance moves only the job on that instance; its neighbour on
// the same GPU keeps running and nothing new lands on the instance until it is healthy again.
TEST_F(PartitionTest, InstanceFaultTouchesOnlyTheJobOnThatInstance) {
  ASSERT_TRUE(Api().Post("/api/v1/nodes/mig-a/cordon?gpu=1", json::object()).ok());
  json a = WaitRunning(SubmitSlice("3g.20gb")["id"]);
  json b = WaitRunning(SubmitSlice("3g.20gb", "inference")["id"]);
  ASSERT_TRUE(Api().Post("/api/v1/nodes/mig-a/uncordon?gpu=1", json::object()).ok());
  int start = a["replicas"][0]["grants"][0]["start"];
  std::ofstream(dir_ / absl::StrCat("jobs/mig-a/simgpu/GPU-sim-mig-a-0/health-", start))
      << "unhealthy XID 94\n";
  ASSERT_TRUE(Eventually([&] { return !EventsOf("device.unhealthy").empty(); }));
  json fault = EventsOf("device.unhealthy")[0];
  EXPECT_EQ(fault["subject"], absl::StrCat("node/mig-a/gpu/0/mig/", start));
  EXPECT_EQ(fault["details"]["jobs"], json::array({a["id"]}));
  EXPECT_THAT(fault["reason"].get<std::string>(), HasSubstr("XID 94"));
  ASSERT_TRUE(Eventually([&] {
    json j = Job(a["id"]);
    return j["attempt"] == 1 && j["state"] == "running";
  })) << Job(a["id"]).dump(2);
  json moved = Job(a["id"]);
  EXPECT_EQ(moved["replicas"][0]["grants"][0]["device"], 1) << "not back on the faulty instance";
  json still = Job(b["id"]);
  EXPECT_EQ(still["attempt"], 0);
  EXPECT_EQ(still["replicas"][0]["pid"], b["replicas"][0]["pid"]);
  EXPECT_TRUE(Node("mig-a")["instance_faults"].contains(absl::StrCat("0/", start)));
  std::filesystem::remove(dir_ / absl::StrCat("jobs/mig-a/simgpu/GPU-sim-mig-a-0/health-", start));
  EXPECT_TRUE(Eventually([&] { return Node("mig-a")["instance_faults"].empty(); }));
  EXPECT_EQ(EventsOf("device.healthy").size(), 1u);
}

const NodeList kDynamicNode = {
    {"mig-d", "gpus:\n  - {model: A100-40GB, mode: partition, layout: dynamic}\n"},
};

class DynamicPartitionTest : public PartitionTest {
 protected:
  const NodeList& Nodes() const override { return kDynamicNode; }
};

// On a dynamic GPU the instance is made for the replica, named in its CUDA_VISIBLE_DEVICES, and
// destroyed with it (the device's own listing is the evidence) while its neighbour runs on.
TEST_F(DynamicPartitionTest, InstancesAreMadeForTheJobAndDestroyedWithIt) {
  auto slice = [](const std::string& command) {
    return json{{"command", {"sh", "-c", command}},
                {"resources", {{"mode", "partition"}, {"profile", "3g.20gb"}}}};
  };
  int64_t a = Submit(slice("echo visible=$CUDA_VISIBLE_DEVICES; sleep 60"))["id"];
  int64_t b = Submit(slice("echo visible=$CUDA_VISIBLE_DEVICES; sleep 60"))["id"];
  ASSERT_TRUE(
      Eventually([&] { return Job(a)["state"] == "running" && Job(b)["state"] == "running"; }));
  std::filesystem::path instances = dir_ / "jobs/mig-d/simgpu/GPU-sim-mig-d-0/instances";
  EXPECT_TRUE(std::filesystem::exists(instances / "0"));
  EXPECT_TRUE(std::filesystem::exists(instances / "4"));
  int start_a = Job(a)["replicas"][0]["grants"][0]["start"];
  EXPECT_TRUE(Eventually([&] {
    return Logs(a).find(absl::StrCat("visible=MIG-sim-mig-d-0-", start_a)) != std::string::npos;
  })) << Logs(a);
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", a, "/cancel"), json::object()).ok());
  json done = WaitFinal(a);
  EXPECT_EQ(done["state"], "cancelled");
  json destroyed;
  for (const json& c : done["replicas"][0]["reclaim"]["checks"]) {
    if (c["name"] == "partition-destroyed") destroyed = c;
  }
  ASSERT_FALSE(destroyed.is_null()) << done.dump(2);
  EXPECT_TRUE(destroyed["ok"].get<bool>());
  EXPECT_THAT(destroyed["observed"].get<std::string>(), HasSubstr("the device lists no instance"));
  EXPECT_FALSE(std::filesystem::exists(instances / std::to_string(start_a)));
  EXPECT_TRUE(std::filesystem::exists(instances / std::to_string(4 - start_a)));
  EXPECT_EQ(Job(b)["state"], "running");
}

}  // namespace
}  // namespace carve
