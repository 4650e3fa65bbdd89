// What the replica reports in an agent's heartbeat do to the job records, on a real control
// plane and SQLite store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

class HeartbeatReportsTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("heartbeat-reports", ControlPlane::Options{}, [this] { return now_; });
    RegisterH200Node("w1", 1, kAdmin);
  }

  absl::StatusOr<json> Beat(json report) {
    report["job"] = job_;
    report["replica"] = 0;
    report["pid"] = 1000;
    report["started_us"] = kT0;
    return cp_->Heartbeat({{"node", "w1"}, {"replicas", {report}}}, kAdmin);
  }

  // A one-H200 job that runs again when it is displaced, as job_.
  void SubmitRequeued() {
    auto job = cp_->Submit({{"command", {"sleep", "600"}},
                            {"recovery", {{"policy", "requeue"}, {"max_retries", 3}}},
                            {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}},
                           "", kAdmin);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = (*job)["id"];
  }

  int64_t now_ = kT0;
  int64_t job_ = 0;
};

// A drained job's replica exits and its devices come back in one report that also names its
// log's disk state (as the agent sends it): the exit requeues the job, which drops the replica's
// record, and the rest of the report must not be applied to it (it was, through a dangling
// reference: a heap-use-after-free that AddressSanitizer found in scripts/sanitize).
TEST_F(HeartbeatReportsTest, AnExitThatRequeuesADrainedJobAppliesNothingMoreOfItsReport) {
  ASSERT_NO_FATAL_FAILURE(SubmitRequeued());
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  const std::string disk = "bounded: the node keeps the last 4096 bytes of the log";
  ASSERT_TRUE(Beat({{"state", "running"}, {"log_disk", disk}}).ok());
  ASSERT_TRUE(cp_->Cordon("w1", "drain", -1, kAdmin).ok());
  ASSERT_NE((*cp_->GetJob(job_)).value("displaced", ""), "");

  auto beat = Beat({{"state", "exited"},
                    {"signal", 15},
                    {"reclaim", VerifiedReclaim()},
                    {"log_truncated_at", 4096},
                    {"log_disk", disk}});
  ASSERT_TRUE(beat.ok()) << beat.status();
  json requeued = *cp_->GetJob(job_);
  EXPECT_EQ(requeued["state"], "queued") << requeued.dump(1);
  EXPECT_EQ(requeued["attempt"], 1);
  EXPECT_TRUE(requeued["replicas"].empty()) << requeued.dump(1);
}

// A device fault displaces a job whose replica was handed to the agent but not yet reported
// running. It was requeued at once (nothing had "started"), placed on the same node again, and
// the agent's report of the old process (stopped, with its reclaim) was applied to the new
// attempt's replica: the job failed without running and a GPU it never used was quarantined. Now
// the attempt ends with the agent's report, and only then does the job run again.
TEST_F(HeartbeatReportsTest, AHandedReplicaDisplacedByAFaultEndsWithItsOwnReport) {
  ASSERT_NO_FATAL_FAILURE(SubmitRequeued());
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  auto handed = cp_->Heartbeat({{"node", "w1"}}, kAdmin);  // the assignment goes to the agent
  ASSERT_TRUE(handed.ok()) << handed.status();
  ASSERT_EQ((*handed)["assignments"].size(), 1u) << handed->dump();
  auto fault = cp_->Heartbeat(
      {{"node", "w1"},
       {"gpus", {{{"index", 0}, {"health", "unhealthy"}, {"health_reason", "XID 79"}}}}},
      kAdmin);
  ASSERT_TRUE(fault.ok()) << fault.status();
  json stopping = *cp_->GetJob(job_);
  EXPECT_EQ(stopping["attempt"], 0) << stopping.dump(1);
  EXPECT_THAT(stopping.value("displaced", ""), testing::HasSubstr("XID 79"));
  ASSERT_EQ(stopping["replicas"].size(), 1u);
  // The agent had started it: told to stop, it reports the exit and its reclaim.
  auto running = Beat({{"state", "running"}});
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ((*running)["stop"].size(), 1u) << running->dump();
  ASSERT_TRUE(Beat({{"state", "exited"}, {"signal", 15}, {"reclaim", VerifiedReclaim(1)}}).ok());
  json requeued = *cp_->GetJob(job_);
  EXPECT_EQ(requeued["state"], "queued") << requeued.dump(1);
  EXPECT_EQ(requeued["attempt"], 1);
  EXPECT_EQ(requeued["attempts"][0]["reclaim"][0]["status"], "verified") << requeued.dump(1);
  EXPECT_TRUE(cp_->ListNodes()[0]["quarantined"].empty()) << cp_->ListNodes()[0].dump(1);
}

// An agent that registers again inside its node's maintenance window (restarted after a driver
// upgrade) leaves the window in place; it was dropped and the node took work again at once.
TEST_F(HeartbeatReportsTest, ARegistrationInsideAMaintenanceWindowKeepsIt) {
  ASSERT_TRUE(cp_->Maintenance("w1", {{"starts_in", "0s"}, {"lasts", "1h"}}, kAdmin).ok());
  ASSERT_TRUE(cp_->ScheduleOnce().ok());  // the window starts
  ASSERT_EQ(cp_->ListNodes()[0]["maintenance"]["phase"], "active");
  RegisterH200Node("w1", 1, kAdmin);
  EXPECT_EQ(cp_->ListNodes()[0]["maintenance"]["phase"], "active") << cp_->ListNodes()[0].dump(1);
}

// The heartbeat is decoded before anything changes: a report the server cannot read is refused
// whole, naming the field, and the job's record is as it was.
TEST_F(HeartbeatReportsTest, AMalformedReportIsRefusedBeforeAnythingChanges) {
  auto job = cp_->Submit({{"command", {"sleep", "600"}}, {"resources", {{"gpus", 1}}}}, "", kAdmin);
  ASSERT_TRUE(job.ok()) << job.status();
  job_ = (*job)["id"];
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  ASSERT_TRUE(Beat({{"state", "running"}}).ok());
  const json before = *cp_->GetJob(job_);

  auto beat = Beat({{"state", "exited"}, {"exit_code", 0}, {"reclaim", {{"checks", {7}}}}});
  EXPECT_TRUE(absl::IsInvalidArgument(beat.status())) << beat.status();
  EXPECT_THAT(std::string(beat.status().message()),
              testing::HasSubstr("replicas[0].reclaim.checks[0]: must be an object"));
  EXPECT_EQ(*cp_->GetJob(job_), before);
  beat = Beat({{"state", "finished"}});
  EXPECT_THAT(std::string(beat.status().message()),
              testing::HasSubstr("replicas[0].state: unknown state \"finished\""));
  EXPECT_EQ(*cp_->GetJob(job_), before);
}

// A heartbeat walks only its own node's jobs (replicas by node): a job drained from w1 and
// bound again on w2 is handed to w2's agent, never again to w1's. The fixture's kept-cluster
// check compares the index with every placed job's replicas in each cycle.
TEST_F(HeartbeatReportsTest, EachNodeIsHandedItsOwnReplicasOnlyAsJobsMove) {
  RegisterH200Node("w2", 1, kAdmin);
  ASSERT_NO_FATAL_FAILURE(SubmitRequeued());
  ASSERT_TRUE(cp_->Cordon("w2", "cordon", -1, kAdmin).ok());
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  auto assigned = [&](const std::string& node) {
    auto beat = cp_->Heartbeat({{"node", node}, {"replicas", json::array()}}, kAdmin);
    EXPECT_TRUE(beat.ok()) << beat.status();
    return beat.ok() ? (*beat)["assignments"].size() : 0;
  };
  EXPECT_EQ(assigned("w2"), 0u);
  EXPECT_EQ(assigned("w1"), 1u);

  ASSERT_TRUE(Beat({{"state", "running"}}).ok());
  ASSERT_TRUE(cp_->Cordon("w2", "uncordon", -1, kAdmin).ok());
  ASSERT_TRUE(cp_->Cordon("w1", "drain", -1, kAdmin).ok());
  ASSERT_TRUE(Beat({{"state", "exited"}, {"signal", 15}, {"reclaim", VerifiedReclaim()}}).ok());
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  ASSERT_EQ((*cp_->GetJob(job_))["replicas"][0]["node"], "w2");
  EXPECT_EQ(assigned("w1"), 0u);
  EXPECT_EQ(assigned("w2"), 1u);
}

// A registration's strings are stored in the node record and printed: each is bounded, and the
// node's name is printable (red team: a 3 MB string was taken whole).
TEST_F(HeartbeatReportsTest, ARegistrationsStringsAreBounded) {
  json node = {{"name", "w9"},
               {"cpu_milli", 1000},
               {"memory_mib", 1024},
               {"backend", "simulated"},
               {"labels", {{"zone", std::string(3 << 20, 'z')}}},
               {"gpus", json::array()}};
  absl::StatusOr<json> refused = cp_->Register(node, kAdmin);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("labels.zone: is 3145728 bytes; at most 1024"));
  node["labels"] = json::object();
  node["name"] = "w9\x1b[2J";
  refused = cp_->Register(node, kAdmin);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("name"));
  node["name"] = "w9";
  // At most 64 labels (330,000 took the server from 120 MB to 500 MB, copied into every cycle).
  for (int i = 0; i < 65; ++i) node["labels"][absl::StrCat("k", i)] = "v";
  refused = cp_->Register(node, kAdmin);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("65 labels; a node carries at most 64"));
  node["labels"].erase("k64");
  EXPECT_TRUE(cp_->Register(node, kAdmin).ok());
  auto over = cp_->Apply(
      json::array({{{"kind", "node"}, {"name", "w9"}, {"labels", {{"one-more", "x"}}}}}), kAdmin);
  EXPECT_THAT(over.status().message(),
              ::testing::HasSubstr("document 0: labels: the node would carry 65 labels"));
}

}  // namespace
}  // namespace carve
