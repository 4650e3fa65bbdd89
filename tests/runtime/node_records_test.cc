#include "runtime/node_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/control_plane.h"
#include "runtime/records.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// A node record as this server's store holds it today (NodeRecord::ToJson().dump()): three A100s,
// the first with a faulty MIG instance, the second being re-laid out, the third quarantined for
// a layout found changed and showing residue. Written out by hand: the stored format.
constexpr char kStoredNode[] = R"json({
  "name": "a100-0",
  "cpu_milli": 64000,
  "memory_mib": 512000,
  "labels": {"pool": "train", "tier": "gold"},
  "agent_labels": {"pool": "train", "rack": "r1"},
  "admin_labels": {"rack": null, "tier": "gold"},
  "backend": "simulated",
  "state": "ready",
  "lost_us": 0,
  "registered_us": 1000,
  "last_heartbeat_us": 2000,
  "quarantined": {"2": "MIG layout mismatch: recorded 7g.80gb@0; discovered 3g.40gb@0"},
  "fenced": {},
  "cordoned_by": "",
  "cordoned_gpus": {},
  "maintenance": null,
  "gpus": [
    {"index": 0, "uuid": "GPU-0", "model": "A100-SXM4-80GB", "memory_mib": 81920,
     "mode": "partition", "mig_enabled": true, "dynamic_layout": false,
     "mig_instances": [
       {"uuid": "MIG-0-0", "profile": "3g.40gb", "start": 0, "id": "a100-0/gpu0/3g.40gb@0"},
       {"uuid": "MIG-0-4", "profile": "3g.40gb", "start": 4, "id": "a100-0/gpu0/3g.40gb@4"}],
     "health": "healthy", "health_reason": "", "utilization_pct": 12, "vbios": "92.00.45",
     "state": "available"},
    {"index": 1, "uuid": "GPU-1", "model": "A100-SXM4-80GB", "memory_mib": 81920,
     "mode": "exclusive", "mig_enabled": false, "dynamic_layout": false, "mig_instances": [],
     "health": "healthy", "health_reason": "", "utilization_pct": -1, "vbios": "92.00.45",
     "state": "reconfiguring"},
    {"index": 2, "uuid": "GPU-2", "model": "A100-SXM4-80GB", "memory_mib": 81920,
     "mode": "partition", "mig_enabled": true, "dynamic_layout": false,
     "mig_instances": [
       {"uuid": "MIG-2-0", "profile": "7g.80gb", "start": 0, "id": "a100-0/gpu2/7g.80gb@0"}],
     "health": "healthy", "health_reason": "", "utilization_pct": 0, "vbios": "92.00.45",
     "state": "quarantined", "share_enforcement": "none (simulated)"
}],
  "instance_faults": {
    "0/4": {"profile": "3g.40gb", "health": "unhealthy", "reason": "XID 79"}},
  "relayouts": {
    "1": {"layout": ["3g.40gb@0", "2g.20gb@4", "1g.10gb@6"], "from": [], "by": "root",
          "phase": "reconfiguring", "request": "1500", "requested_us": 1500,
          "jobs_moved": [7, 9], "reclaimed_us": 1700}},
  "layout_mismatch": {
    "2": [{"uuid": "MIG-2-0b", "profile": "3g.40gb", "start": 0}]},
  "residue": {
    "2": {"processes": [{"pid": 41, "uid": 0, "command": "sleep 30", "memory_mib": 2048,
                         "state": "defunct"},
                        {"pid": 42, "uid": -1, "command": "", "memory_mib": -1, "state": "gone"}],
          "unexplained_mib": 512, "used_mib": 3072, "baseline_mib": 512},
    "0": {"processes": [{"pid": 7, "uid": 1000, "command": "python", "memory_mib": 100,
                         "state": "running"}]}},
  "versions": {
  "id" : "vs-0123456789",
         "carve" : "0.9.0",
                   "kernel" : "6.1.0",
                              "driver" : "550.54",
                                         "cuda_driver" : "12.4",
                                                         "nvml" : "12.550.54",
                                                                  "backend" : "simulated",
                                                                              "gpus"
      : [
        {"index" : 0, "vbios" : "92.00.45", "mig" : true},
        {"index" : 1, "vbios" : "92.00.45", "mig" : false},
        {"index" : 2, "vbios" : "92.00.45", "mig" : true}
      ]
}
})json";

// The store keeps ToJson().dump(): compact, keys in order. Reading today's record and writing it
// again gives the same bytes, and GET /api/v1/nodes (which shows ToJson) the same answer.
TEST(NodeRecordsTest, AStoredNodeLoadsAndWritesBackTheSameBytes) {
  const std::string stored = json::parse(kStoredNode).dump();
  absl::StatusOr<NodeRecord> node = NodeRecord::FromJson(json::parse(stored));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->ToJson().dump(), stored);

  // Read typed, not kept as text.
  ASSERT_EQ(node->relayouts.count(1), 1u);
  const RelayoutRecord& relayout = node->relayouts.at(1);
  EXPECT_EQ(relayout.phase, RelayoutPhase::kReconfiguring);
  EXPECT_EQ(relayout.layout, (std::vector<std::string>{"3g.40gb@0", "2g.20gb@4", "1g.10gb@6"}));
  EXPECT_EQ(relayout.jobs_moved, (std::vector<int64_t>{7, 9}));
  EXPECT_EQ(relayout.reclaimed_us, 1700);
  EXPECT_EQ(node->instance_faults.at({0, 4}).reason, "XID 79");
  EXPECT_EQ(node->layout_mismatch.at(2)[0].uuid, "MIG-2-0b");
  const GpuResidue& residue = node->residue.at(2);
  ASSERT_EQ(residue.processes.size(), 2u);
  EXPECT_EQ(residue.processes[0].state, ProcessState::kDefunct);
  EXPECT_EQ(residue.processes[1].state, ProcessState::kGone);
  ASSERT_TRUE(residue.memory.has_value());
  EXPECT_EQ(residue.memory->unexplained_mib, 512);
  EXPECT_FALSE(node->residue.at(0).memory.has_value());
  ASSERT_TRUE(node->versions.has_value());
  EXPECT_EQ(node->versions->driver, "550.54");
  EXPECT_EQ(node->versions->gpus[1], (GpuVersions{1, "92.00.45", false}));
  EXPECT_EQ(node->GpuState(1), "reconfiguring");
}

// Nodes stored before version sets existed have none: null, read and written back as null.
TEST(NodeRecordsTest, ANodeWithoutVersionsKeepsNull) {
  json stored = json::parse(kStoredNode);
  stored["versions"] = nullptr;
  absl::StatusOr<NodeRecord> node = NodeRecord::FromJson(stored);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_FALSE(node->versions.has_value());
  EXPECT_EQ(node->ToJson().dump(), stored.dump());
}

// A node stored before admins could label nodes: what it has are its agent's labels.
TEST(NodeRecordsTest, ANodeFromBeforeAdminLabelsHasItsAgentsLabels) {
  json stored = json::parse(kStoredNode);
  stored.erase("agent_labels");
  stored.erase("admin_labels");
  auto node = NodeRecord::FromJson(stored);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->agent_labels, (Labels{{"pool", "train"}, {"tier", "gold"}}));
  EXPECT_TRUE(node->admin_labels.empty());
  EXPECT_EQ(node->labels, node->agent_labels);
}

TEST(NodeRecordsTest, AnUnknownRelayoutPhaseIsRefusedAtLoad) {
  json stored = json::parse(kStoredNode);
  stored["relayouts"]["1"]["phase"] = "paused";
  absl::StatusOr<NodeRecord> node = NodeRecord::FromJson(stored);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(node.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(node.status().message(),
            "stored node a100-0 is unreadable: relayouts.1: phase: unknown phase \"paused\"");
}

TEST(NodeRecordsTest, UnreadablePartsAreRefusedAtLoadNamingTheNode) {
  struct Case {
    const char* field;
    json value;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"relayouts",
       {{"x", {{"phase", "draining"}, {"layout", json::array()}}}},
       "relayouts: \"x\""},
      {"relayouts", {{"1", {{"layout", json::array()}}}}, "relayouts.1: "},  // no phase
      {"relayouts", {{"1", {{"phase", "draining"}, {"layout", "3g.40gb"}}}}, "relayouts.1: "},
      {"instance_faults", {{"0-4", json::object()}}, "instance_faults: \"0-4\""},
      {"instance_faults", {{"0/4", "XID"}}, "instance_faults.0/4: must be an object"},
      {"layout_mismatch", {{"2", json::object()}}, "layout_mismatch.2: must be a list"},
      {"residue",
       {{"2", {{"processes", {{{"pid", 41}, {"state", "zombie"}}}}}}},
       "residue.2: processes[0].state: unknown state \"zombie\""},
      {"residue", {{"2", {{"unexplained_mib", "lots"}}}}, "residue.2: "},
      {"versions", "vs-0123456789", "versions: must be an object"},
      {"versions", {{"gpus", {{{"vbios", "x"}}}}}, "versions: "},
  };
  for (const Case& c : cases) {
    json stored = json::parse(kStoredNode);
    stored[c.field] = c.value;
    absl::StatusOr<NodeRecord> node = NodeRecord::FromJson(stored);
    ASSERT_FALSE(node.ok()) << c.value.dump();
    EXPECT_EQ(node.status().code(), absl::StatusCode::kDataLoss) << node.status();
    EXPECT_THAT(node.status().message(), HasSubstr("stored node a100-0 is unreadable: " + c.error));
  }
}

TEST(NodeRecordsTest, RelayoutPhasesHaveOneNameEach) {
  const std::vector<std::pair<RelayoutPhase, std::string>> names = {
      {RelayoutPhase::kDraining, "draining"},
      {RelayoutPhase::kReconfiguring, "reconfiguring"},
      {RelayoutPhase::kFailed, "failed"},
      {RelayoutPhase::kDone, "done"}};
  for (const auto& [phase, name] : names) {
    EXPECT_EQ(Name(phase), name);
    EXPECT_EQ(ParseRelayoutPhase(name), phase);
  }
  for (const char* other : {"", "Draining", "drained", "failed ", "reconfigure"}) {
    EXPECT_FALSE(ParseRelayoutPhase(other).has_value()) << other;
  }
}

TEST(NodeRecordsTest, RelayoutsRoundTripInEveryPhase) {
  RelayoutRecord r;
  r.layout = {"3g.40gb@0", "3g.40gb@4"};
  r.from = {"7g.80gb@0"};
  r.by = "root";
  r.request = "1500";
  r.requested_us = 1500;
  r.jobs_moved = {3};
  json drafted = r.ToJson();
  EXPECT_EQ(drafted, json::parse(R"({"layout": ["3g.40gb@0", "3g.40gb@4"], "from": ["7g.80gb@0"],
      "by": "root", "phase": "draining", "request": "1500", "requested_us": 1500,
      "jobs_moved": [3]})"));
  EXPECT_EQ(RelayoutRecord::FromJson(drafted).value(), r);

  r.phase = RelayoutPhase::kFailed;
  r.error = "reclaim was not verified: pid 41";
  EXPECT_EQ(r.ToJson()["error"], "reclaim was not verified: pid 41");
  EXPECT_FALSE(r.ToJson().contains("reclaimed_us"));
  EXPECT_EQ(RelayoutRecord::FromJson(r.ToJson()).value(), r);

  r.phase = RelayoutPhase::kDone;
  r.error.clear();
  r.reclaimed_us = 0;  // a virtual clock's first instant is still a time
  r.partitions = {{"a100-0/gpu1/3g.40gb@0", "MIG-a"}, {"a100-0/gpu1/3g.40gb@4", "MIG-b"}};
  r.done_us = 2000;
  json done = r.ToJson();
  EXPECT_EQ(done["reclaimed_us"], 0);
  EXPECT_EQ(done["partitions"][1], json({{"id", "a100-0/gpu1/3g.40gb@4"}, {"uuid", "MIG-b"}}));
  EXPECT_EQ(done["done_us"], 2000);
  EXPECT_EQ(RelayoutRecord::FromJson(done).value(), r);
}

TEST(NodeRecordsTest, MigInstancesAndFaultsRoundTrip) {
  std::vector<DiscoveredMigInstance> instances = {{"MIG-a", "3g.40gb", 0}, {"MIG-b", "1g.10gb", 6}};
  json shown = MigInstancesToJson(instances);
  EXPECT_EQ(shown[1], json({{"uuid", "MIG-b"}, {"profile", "1g.10gb"}, {"start", 6}}));
  absl::StatusOr<std::vector<DiscoveredMigInstance>> back = MigInstancesFromJson(shown);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].uuid, "MIG-b");
  EXPECT_EQ((*back)[1].start, 6);

  InstanceFault fault{"3g.40gb", "suspect", "ECC"};
  EXPECT_EQ(fault.ToJson(),
            json({{"profile", "3g.40gb"}, {"health", "suspect"}, {"reason", "ECC"}}));
  EXPECT_EQ(InstanceFault::FromJson(fault.ToJson()).value(), fault);

  EXPECT_EQ(SlotKey({1, 4}), "1/4");
  EXPECT_EQ(ParseSlotKey("1/4"), (MigSlotRef{1, 4}));
  EXPECT_EQ(ParseSlotKey("0/-1"), (MigSlotRef{0, -1}));
  for (const char* bad : {"", "1", "1/4/2", "a/4", "1/ 4", "01/4"}) {
    EXPECT_FALSE(ParseSlotKey(bad).has_value()) << bad;
  }
}

TEST(NodeRecordsTest, ResidueRoundTripsAndDescribesItself) {
  GpuResidue residue;
  residue.processes.push_back({41, 0, "sleep 30", 2048, ProcessState::kDefunct});
  EXPECT_EQ(residue.ToJson(), json::parse(R"({"processes": [{"pid": 41, "uid": 0,
      "command": "sleep 30", "memory_mib": 2048, "state": "defunct"}]})"));
  EXPECT_EQ(residue.Describe(), "pid 41 (uid 0, defunct, `sleep 30`, 2048 MiB)");
  absl::StatusOr<GpuResidue> back = GpuResidue::FromJson(residue.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), residue.ToJson());

  residue.memory = UnexplainedMemory{512, 3072, 512};
  EXPECT_EQ(residue.ToJson()["used_mib"], 3072);
  EXPECT_EQ(residue.Describe(),
            "pid 41 (uid 0, defunct, `sleep 30`, 2048 MiB); 512 MiB in use above the device's "
            "baseline of 512 MiB that no live replica holds");
  back = GpuResidue::FromJson(residue.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->memory, residue.memory);
  EXPECT_EQ(back->ToJson().dump(), residue.ToJson().dump());
}

// The set's id is what servers wrote before the set was typed: "vs-" and the first 10 hex digits
// of the SHA-256 of the set shown without its id.
TEST(NodeRecordsTest, VersionSetsRoundTripAndKeepTheirId) {
  DiscoveredGpu gpu;
  gpu.index = 0;
  gpu.vbios = "92.00.45";
  gpu.mig_enabled = true;
  json reported = {{"carve", "0.9.0"}, {"kernel", 6}, {"driver", "550.54"}};
  NodeVersionSet v = NodeVersions(reported, "nvml", {gpu});
  json without_id = {{"carve", "0.9.0"},
                     {"kernel", ""},
                     {"driver", "550.54"},
                     {"cuda_driver", ""},
                     {"nvml", ""},
                     {"backend", "nvml"},
                     {"gpus", {{{"index", 0}, {"vbios", "92.00.45"}, {"mig", true}}}}};
  EXPECT_EQ(v.id, "vs-" + Sha256Hex(without_id.dump()).substr(0, 10));
  json shown = without_id;
  shown["id"] = v.id;
  EXPECT_EQ(v.ToJson().dump(), shown.dump());
  EXPECT_EQ(v.Compact(), json({{"id", v.id},
                               {"carve", "0.9.0"},
                               {"kernel", ""},
                               {"driver", "550.54"},
                               {"cuda_driver", ""},
                               {"nvml", ""}}));
  EXPECT_EQ(NodeVersionSet::FromJson(v.ToJson()).value(), v);
}

}  // namespace
}  // namespace carve
