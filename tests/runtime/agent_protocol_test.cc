#include "runtime/agent_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// A heartbeat as agents sent it before the protocol was typed (Agent::Report's JSON): a running
// replica on a share, an exited one with its reclaim record and a truncated log, one killed by a
// signal before its record is made; a MIG GPU with a faulty instance and a pending layout's
// result, a shared GPU showing residue. Written out by hand: the wire format.
constexpr char kHeartbeat[] = R"json({
  "node": "a100-0",
  "replicas": [
    {"job": 7, "replica": 0, "state": "running", "pid": 4100, "started_us": 1000,
     "enforcement": "cgroup v2: cpu.max 2000 100000, memory.max 4 GiB",
     "gpu_isolation": {"mechanism": "mps", "memory_mib": 10240, "thread_pct": 30},
     "log_disk": "bounded: each heartbeat frees the bytes shipped"},
    {"job": 8, "replica": 1, "state": "exited", "pid": 4200, "started_us": 1100,
     "enforcement": "cgroup v2", "log_truncated_at": 67108864, "log_disk": "bounded",
     "reclaim": {"status": "failed", "oom_killed": true, "time_us": 1900, "quarantine": [1],
                 "checks": [{"name": "processes-gone", "ok": true,
                             "observed": "process group and cgroup empty", "time_us": 1800},
                            {"name": "device-memory", "ok": false, "device": 1,
                             "observed": "2048 MiB in use", "used_mib": 3072,
                             "baseline_mib": 1024, "time_us": 1850}]},
     "oom_killed": true, "ended_us": 1700, "timed_out": false, "exit_code": 137,
     "signal": null},
    {"job": 9, "replica": 0, "state": "exited", "pid": 4300, "started_us": 1200,
     "enforcement": "cgroup v2", "ended_us": 1750, "timed_out": true, "exit_code": null,
     "signal": 9}],
  "gpus": [
    {"index": 0, "health": "healthy", "health_reason": "", "utilization_pct": 40,
     "mig_instances": [
       {"uuid": "MIG-0-0", "profile": "3g.40gb", "start": 0},
       {"uuid": "MIG-0-4", "profile": "3g.40gb", "start": 4, "health": "unhealthy",
        "health_reason": "XID 94"}],
     "residue": null},
    {"index": 1, "health": "suspect", "health_reason": "row remapping pending a GPU reset",
     "utilization_pct": -1, "mig_instances": [], "share_enforcement": "mps",
     "residue": {"processes": [{"pid": 41, "uid": 0, "command": "sleep 30", "memory_mib": 2048,
                                "state": "defunct"}],
                 "unexplained_mib": 2048, "used_mib": 3072, "baseline_mib": 1024}}],
  "layouts": [
    {"gpu": 0, "request": "1500", "ok": false, "error": "in use", "time_us": 1600}]
})json";

// The answer as servers sent it before the protocol was typed (ControlPlane::Heartbeat's JSON).
constexpr char kAnswer[] = R"json({
  "assignments": [
    {"job": 11, "replica": 0, "name": "train", "kind": "batch", "command": ["python", "t.py"],
     "env": {"EPOCHS": "3"}, "workdir": "runs/a", "mode": "partition", "isolation": "",
     "cpu_milli": 4000, "memory_mib": 16384, "max_runtime_us": 3600000000, "tenant": "acme",
     "project": "nlp", "checkpoint_root": "/shared/ckpt", "attempt": 1,
     "grants": [{"device": 0, "compute_milli": 1000, "memory_mib": 40960,
                 "profile": "3g.40gb", "start": 4, "created": true}],
     "uid": 200100, "gid": 200100},
    {"job": 12, "replica": 2, "name": "", "kind": "service", "command": ["serve"], "env": {},
     "workdir": "", "mode": "shared", "isolation": "best-effort", "cpu_milli": 1000,
     "memory_mib": 1024, "max_runtime_us": 0, "tenant": "default", "project": "default",
     "checkpoint_root": "", "attempt": 0,
     "grants": [{"device": 1, "compute_milli": 300, "memory_mib": 0}]}],
  "stop": [{"job": 7, "replica": 0}, {"job": 8, "replica": 1, "grace_ms": 30000}],
  "layouts": [{"gpu": 0, "layout": ["3g.40gb@0", "3g.40gb@4"], "request": "1500"}]
})json";

TEST(AgentProtocolTest, AHeartbeatReadsTypedAndWritesBackTheSameBytes) {
  const std::string sent = json::parse(kHeartbeat).dump();
  absl::StatusOr<HeartbeatRequest> beat = HeartbeatRequest::FromJson(json::parse(sent));
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->ToJson().dump(), sent);

  ASSERT_EQ(beat->replicas.size(), 3u);
  const ReplicaReport& exited = beat->replicas[1];
  EXPECT_EQ(exited.state, ReplicaState::kExited);
  ASSERT_TRUE(exited.end.has_value());
  EXPECT_EQ(exited.end->exit_code, 137);
  EXPECT_FALSE(exited.end->signal.has_value());
  EXPECT_EQ(exited.log_truncated_at, 67108864);
  EXPECT_TRUE(exited.oom_killed);
  EXPECT_EQ(beat->replicas[2].end->signal, 9);
  EXPECT_TRUE(beat->replicas[2].end->timed_out);
  EXPECT_FALSE(beat->replicas[0].end.has_value());
  EXPECT_FALSE(beat->replicas[0].reclaim.has_value());
  EXPECT_TRUE(beat->ReportsAnEnd());

  ASSERT_TRUE(beat->gpus.has_value());
  const GpuReport& mig = (*beat->gpus)[0];
  EXPECT_EQ(mig.health, DeviceHealth::kHealthy);
  EXPECT_FALSE(mig.residue.has_value());
  EXPECT_FALSE(mig.mig_instances[0].health.has_value());
  EXPECT_EQ(mig.mig_instances[1].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(mig.mig_instances[1].health_reason, "XID 94");
  const GpuReport& shared = (*beat->gpus)[1];
  EXPECT_EQ(shared.health, DeviceHealth::kSuspect);
  EXPECT_EQ(shared.share_enforcement, "mps");
  ASSERT_TRUE(shared.residue.has_value());
  EXPECT_EQ(shared.residue->processes[0].state, ProcessState::kDefunct);
  EXPECT_EQ(beat->InstancesOn(0).size(), 2u);
  EXPECT_EQ(beat->InstancesOn(0)[1].uuid, "MIG-0-4");
  EXPECT_TRUE(beat->InstancesOn(5).empty());
  ASSERT_EQ(beat->layouts.size(), 1u);
  EXPECT_EQ(beat->layouts[0].error, "in use");
}

// What the agent builds field by field is what it sent as JSON.
TEST(AgentProtocolTest, AHeartbeatBuiltTypedIsTheAgentsJson) {
  HeartbeatRequest beat;
  beat.node = "n1";
  ReplicaReport running;
  running.job = 3;
  running.replica = 0;
  running.state = ReplicaState::kRunning;
  running.pid = 77;
  running.started_us = 5;
  running.enforcement = "cgroup v2";
  ReplicaReport exited = running;
  exited.state = ReplicaState::kExited;
  exited.end = ReplicaEnd{6, false, 0, std::nullopt};
  exited.reclaim = json{{"status", "verified"}, {"checks", json::array()}};
  beat.replicas = {running, exited};
  GpuReport gpu;
  gpu.index = 0;
  gpu.utilization_pct = 12;
  beat.gpus = std::vector<GpuReport>{gpu};
  EXPECT_EQ(beat.ToJson(), json::parse(R"json({
    "node": "n1",
    "replicas": [
      {"job": 3, "replica": 0, "state": "running", "pid": 77, "started_us": 5,
       "enforcement": "cgroup v2"},
      {"job": 3, "replica": 0, "state": "exited", "pid": 77, "started_us": 5,
       "enforcement": "cgroup v2", "reclaim": {"status": "verified", "checks": []},
       "oom_killed": false, "ended_us": 6, "timed_out": false, "exit_code": 0, "signal": null}],
    "gpus": [{"index": 0, "health": "healthy", "health_reason": "", "utilization_pct": 12,
              "mig_instances": [], "residue": null}],
    "layouts": []
  })json"));
  EXPECT_TRUE(beat.ReportsAnEnd());
  beat.replicas.pop_back();
  EXPECT_FALSE(beat.ReportsAnEnd());
}

// A body that leaves out what it has nothing to say about takes the defaults servers used.
TEST(AgentProtocolTest, MissingFieldsTakeTheServersDefaults) {
  absl::StatusOr<HeartbeatRequest> beat = HeartbeatRequest::FromJson(
      json::parse(R"json({"node": "n1", "replicas": [{"job": 1, "exit_code": 0}]})json"));
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_FALSE(beat->gpus.has_value());  // health, residue and activity are left as they are
  const ReplicaReport& r = beat->replicas[0];
  EXPECT_EQ(r.replica, -1);
  EXPECT_FALSE(r.state.has_value());
  EXPECT_FALSE(r.started_us.has_value());
  ASSERT_TRUE(r.end.has_value());
  EXPECT_FALSE(r.end->ended_us.has_value());  // the server's clock
  EXPECT_EQ(r.end->exit_code, 0);

  absl::StatusOr<GpuReport> gpu = GpuReport::FromJson(json{{"index", 2}}, "gpus[0]");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->health, DeviceHealth::kHealthy);
  EXPECT_EQ(gpu->utilization_pct, -1);
  EXPECT_FALSE(gpu->share_enforcement.has_value());  // the node record keeps its own
}

TEST(AgentProtocolTest, AnAnswerReadsTypedAndWritesBackTheSameBytes) {
  const std::string sent = json::parse(kAnswer).dump();
  absl::StatusOr<HeartbeatAnswer> answer = HeartbeatAnswer::FromJson(json::parse(sent));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->ToJson().dump(), sent);

  ASSERT_EQ(answer->assignments.size(), 2u);
  const AgentAssignment& train = answer->assignments[0];
  EXPECT_EQ(train.mode, DeliveryMode::kPartition);
  EXPECT_EQ(train.command, (std::vector<std::string>{"python", "t.py"}));
  EXPECT_EQ(train.env.at("EPOCHS"), "3");
  EXPECT_EQ(train.uid, 200100);
  ASSERT_EQ(train.grants.size(), 1u);
  EXPECT_EQ(train.grants[0].profile, "3g.40gb");
  EXPECT_EQ(train.grants[0].start, 4);
  EXPECT_TRUE(train.grants[0].created);
  const AgentAssignment& serve = answer->assignments[1];
  EXPECT_EQ(serve.mode, DeliveryMode::kShared);
  EXPECT_FALSE(serve.uid.has_value());
  EXPECT_EQ(serve.grants[0].start, -1);
  EXPECT_FALSE(answer->stop[0].grace_ms.has_value());
  EXPECT_EQ(answer->stop[1].grace_ms, 30000);
  EXPECT_EQ(answer->layouts[0].layout[1], "3g.40gb@4");

  // An older server's answer without layouts, and an empty one, are answers too.
  EXPECT_TRUE(HeartbeatAnswer::FromJson(json::parse(R"({"assignments": [], "stop": []})")).ok());
  EXPECT_TRUE(HeartbeatAnswer::FromJson(json::object()).ok());
}

struct Malformed {
  json body;
  std::string error;
};

void ExpectRefused(const std::vector<Malformed>& cases, bool answer) {
  for (const Malformed& c : cases) {
    absl::Status s = answer ? HeartbeatAnswer::FromJson(c.body).status()
                            : HeartbeatRequest::FromJson(c.body).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.body.dump() << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.body.dump();
  }
}

// Each field the server reads has its type (fuzz/api_fuzz.cc found bodies that threw half-way
// through a change); the error names the field.
TEST(AgentProtocolTest, AMalformedHeartbeatIsRefusedNamingTheField) {
  ExpectRefused(
      {
          {json::array(), "body: must be an object"},
          {{{"node", 5}}, "node: must be a string"},
          {{{"replicas", {1}}}, "replicas[0]: must be an object"},
          {{{"replicas", {{{"job", "one"}}}}}, "replicas[0].job: must be a whole number"},
          {{{"replicas", {{{"job", 1.5}}}}}, "replicas[0].job: must be a whole number"},
          {{{"replicas", {{{"replica", int64_t{1} << 40}}}}},
           "replicas[0].replica: must be a whole number"},
          {{{"replicas", {{{"state", "zombie"}}}}}, "replicas[0].state: unknown state \"zombie\""},
          {{{"replicas", {{{"exit_code", "0"}}}}},
           "replicas[0].exit_code: must be a whole number or null"},
          {{{"replicas", {{{"signal", true}}}}}, "replicas[0].signal"},
          {{{"replicas", {{{"timed_out", 1}}}}}, "replicas[0].timed_out: must be true or false"},
          {{{"replicas", {{{"reclaim", "verified"}}}}},
           "replicas[0].reclaim: must be an object or null"},
          {{{"replicas", {{{"reclaim", {{"status", 1}}}}}}},
           "replicas[0].reclaim.status: must be a string"},
          {{{"replicas", {{{"reclaim", {{"checks", {{{"device", "x"}}}}}}}}}},
           "replicas[0].reclaim.checks[0].device: must be a whole number"},
          // What a replica used is the node's word, but readers add and compare it (issue 14).
          {json::parse(R"({"replicas": [{"reclaim": {"used": {"cpu_seconds": "lots"}}}]})"),
           "replicas[0].reclaim.used.cpu_seconds: must be a non-negative number"},
          {json::parse(R"({"replicas": [{"reclaim": {"used": {"device":
               {"peak_memory_mib": -5}}}}]})"),
           "replicas[0].reclaim.used.device.peak_memory_mib: must be a non-negative integer"},
          {json::parse(R"({"replicas": [{"reclaim": {"used": {"rss": 1}}}]})"),
           "replicas[0].reclaim.used.rss: is not a field"},
          {{{"replicas", {{{"log_truncated_at", "64Ki"}}}}}, "replicas[0].log_truncated_at"},
          {{{"replicas", {{{"log_disk", true}}}}}, "replicas[0].log_disk: must be a string"},
          {{{"gpus", {{{"index", 0}, {"health", "melted"}}}}},
           "gpus[0].health: unknown health \"melted\""},
          {{{"gpus", {{{"index", 0}, {"utilization_pct", "40%"}}}}}, "gpus[0].utilization_pct"},
          {{{"gpus", {{{"index", 0}, {"mig_instances", {{{"start", "0"}}}}}}}},
           "gpus[0].mig_instances[0].start: must be a whole number"},
          {{{"gpus", {{{"index", 0}, {"mig_instances", {{{"uuid", "MIG-1"}}}}}}}},
           "gpus[0].mig_instances[0].start: missing"},
          {{{"gpus", {{{"index", 0}, {"mig_instances", {{{"start", 0}, {"health", "?"}}}}}}}},
           "gpus[0].mig_instances[0].health: unknown health \"?\""},
          {{{"gpus", {{{"index", 0}, {"residue", "none"}}}}},
           "gpus[0].residue: must be an object or null"},
          // The node record keeps a GPU's residue as sent: one it could not store is refused.
          {json::parse(R"({"gpus": [{"index": 0, "residue": {"processes": [{"pid": 7,
               "state": "zombie"}]}}]})"),
           "gpus[0].residue: processes[0].state: unknown state \"zombie\""},
          // A residue field of the wrong type answered with nlohmann's own text (red team): the
          // error names the field.
          {json::parse(R"({"gpus": [{"index": 0, "residue": {"unexplained_mib": "lots"}}]})"),
           "gpus[0].residue.unexplained_mib: must be a whole number"},
          {json::parse(R"({"gpus": [{"index": 0, "residue": {"processes": [{"pid": "x"}]}}]})"),
           "gpus[0].residue.processes[0].pid: must be a whole number"},
          {json::parse(R"({"gpus": [{"index": 0, "residue": {"processes": [{"command": 7}]}}]})"),
           "gpus[0].residue.processes[0].command: must be a string"},
          {{{"gpus",
             {{{"index", 0},
               {"residue", {{"processes", {{{"command", std::string(2048, 'c')}}}}}}}}}},
           "gpus[0].residue.processes[0].command: is 2048 bytes; at most 1024"},
          {{{"gpus", json::array({1})}}, "gpus[0]: must be an object"},
          // One GPU reported over and over was a batch of events that stalled every writer for
          // minutes (red team): each GPU, and each of its MIG instances, once.
          {{{"gpus",
             {{{"index", 0}, {"health", "unhealthy"}}, {{"index", 0}, {"health", "healthy"}}}}},
           "gpus[1].index: GPU 0 is reported already in gpus[0]"},
          {{{"gpus", {{{"index", 0}, {"mig_instances", {{{"start", 4}}, {{"start", 4}}}}}}}},
           "gpus[0].mig_instances[1].start: the instance at 4 is reported already"},
          {{{"layouts", "none"}}, "layouts: must be a list"},
          {{{"layouts", {{{"ok", "yes"}}}}}, "layouts[0].ok: must be true or false"},
          // A replica reported twice made the answer carry its stop twice (red team): once.
          {{{"replicas", {{{"job", 3}, {"replica", 0}}, {{"job", 3}, {"replica", 0}}}}},
           "replicas[1]: replica 0 of job 3 is reported already in replicas[0]"},
          // A 3 MB health_reason was stored and logged whole (red team): free text is bounded.
          {{{"gpus", {{{"index", 0}, {"health_reason", std::string(3 << 20, 'x')}}}}},
           "gpus[0].health_reason: is 3145728 bytes; at most 1024"},
          {{{"node", std::string(2000, 'n')}}, "node: is 2000 bytes; at most 1024"},
          {{{"replicas", {{{"job", 1}, {"enforcement", std::string(1025, 'e')}}}}},
           "replicas[0].enforcement: is 1025 bytes; at most 1024"},
          {{{"gpus",
             {{{"index", 0},
               {"mig_instances", {{{"start", 0}, {"health_reason", std::string(5000, 'r')}}}}}}}},
           "gpus[0].mig_instances[0].health_reason: is 5000 bytes"},
          {{{"layouts", {{{"error", std::string(4096, 'z')}}}}},
           "layouts[0].error: is 4096 bytes; at most 1024"},
          // A reclaim record is kept whole in the job's record: bounded as a whole.
          {{{"replicas",
             {{{"job", 1},
               {"reclaim", {{"status", "verified"}, {"notes", std::string(70000, 'n')}}}}}}},
           "replicas[0].reclaim: is 70032 bytes; at most 65536"},
          // Without its node a heartbeat was answered 403 (red team): a 400 naming the field.
          {{{"replicas", json::array()}}, "node: missing: a heartbeat names its node"},
          {{{"node", ""}}, "node: missing"},
      },
      false);
}

TEST(AgentProtocolTest, AMalformedAnswerIsRefusedNamingTheField) {
  ExpectRefused(
      {
          {json::array(), "body: must be an object"},
          {{{"assignments", {{{"mode", "sliced"}}}}},
           "assignments[0].mode: unknown mode \"sliced\""},
          {{{"assignments", {{{"command", {"python", 3}}}}}},
           "assignments[0].command[1]: must be a string"},
          {{{"assignments", {{{"env", {{"EPOCHS", 3}}}}}}},
           "assignments[0].env.EPOCHS: must be a string"},
          {{{"assignments", {{{"grants", {{{"device", "0"}}}}}}}},
           "assignments[0].grants[0].device: must be a whole number"},
          {{{"assignments", {{{"uid", "root"}}}}}, "assignments[0].uid: must be a whole number"},
          {{{"stop", {{{"grace_ms", "30s"}}}}}, "stop[0].grace_ms: must be a whole number"},
          {{{"layouts", {{{"layout", {"3g.40gb@0", 4}}}}}},
           "layouts[0].layout[1]: must be a string"},
      },
      true);
}

}  // namespace
}  // namespace carve
