#include "runtime/job_table.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace carve {
namespace {

class JobTableTest : public ::testing::Test {
 protected:
  static JobRecord Job(int64_t id, const std::string& queue, int gpus) {
    JobRecord job;
    job.id = id;
    job.spec.queue = queue;
    job.spec.gpus = gpus;
    job.spec.command = {"true"};
    return job;
  }
  // Places every replica of `job` on `nodes` (one each) and marks it running.
  static void Run(JobRecord& job, const std::vector<std::string>& nodes) {
    job.state = JobState::kRunning;
    job.replicas.clear();
    for (const std::string& node : nodes) {
      ReplicaRecord r;
      r.node = node;
      r.state = ReplicaState::kRunning;
      job.replicas.push_back(r);
    }
  }
  static std::vector<int64_t> Ids(const std::vector<JobRecord*>& jobs) {
    std::vector<int64_t> ids;
    for (const JobRecord* job : jobs) ids.push_back(job->id);
    return ids;
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  JobTable table_{&catalog_};
};

TEST_F(JobTableTest, AQueuedJobIsActiveAndCountedInItsQueueNotPlaced) {
  table_.Add(Job(1, "a", 2));
  table_.Add(Job(2, "a", 1));
  table_.Add(Job(3, "b", 1));
  EXPECT_EQ(table_.ActiveIds(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(table_.Placed().empty());
  ASSERT_EQ(table_.queued().size(), 2u);
  EXPECT_EQ(table_.queued().at("a").jobs, 2);
  EXPECT_EQ(table_.queued().at("b").jobs, 1);
  EXPECT_EQ(table_.queued().at("a").demand.at("gpus"),
            3 * table_.queued().at("b").demand.at("gpus"));
}

TEST_F(JobTableTest, AJobLeavesTheQueuedTotalsWhenPlacedAndIsFoundByItsNodes) {
  JobRecord& job = table_.Add(Job(1, "a", 1));
  Run(job, {"n2", "n1", "n2"});
  table_.Index(job);
  EXPECT_TRUE(table_.queued().empty());
  EXPECT_EQ(Ids(table_.Placed()), (std::vector<int64_t>{1}));
  EXPECT_EQ(Ids(table_.PlacedOn("n1")), (std::vector<int64_t>{1}));
  EXPECT_EQ(Ids(table_.PlacedOn("n2")), (std::vector<int64_t>{1}));
  EXPECT_TRUE(table_.PlacedOn("n3").empty());
  // Moved: the index follows the replicas.
  Run(job, {"n3"});
  table_.Index(job);
  EXPECT_TRUE(table_.PlacedOn("n1").empty());
  EXPECT_TRUE(table_.IndexedOn(1, "n3"));
  EXPECT_FALSE(table_.IndexedOn(1, "n2"));
}

TEST_F(JobTableTest, EveryChangeRaisesTheRevisionAndARequeueLeavesItsNodes) {
  JobRecord& job = table_.Add(Job(1, "a", 1));
  const uint64_t queued = table_.Revision(1);
  Run(job, {"n1"});
  table_.Index(job);
  const uint64_t running = table_.Revision(1);
  EXPECT_GT(running, queued);
  EXPECT_EQ(table_.last_revision(), running);
  job.state = JobState::kQueued;  // requeued: Recover clears its replicas
  job.replicas.clear();
  table_.Index(job);
  EXPECT_GT(table_.Revision(1), running);
  EXPECT_TRUE(table_.PlacedOn("n1").empty());
  EXPECT_TRUE(table_.Placed().empty());
  EXPECT_EQ(table_.queued().at("a").jobs, 1);
}

TEST_F(JobTableTest, AFinishedJobLeavesEveryIndexAtOnceAndMemoryOnlyWhenErased) {
  JobRecord& job = table_.Add(Job(1, "a", 1));
  table_.Add(Job(2, "a", 1));
  EXPECT_FALSE(table_.Erase(1));  // not final: it stays
  Run(job, {"n1"});
  table_.Index(job);
  job.state = JobState::kSucceeded;
  table_.Index(job);
  EXPECT_EQ(table_.Revision(1), 0u);
  EXPECT_EQ(table_.ActiveIds(), (std::vector<int64_t>{2}));
  EXPECT_TRUE(table_.PlacedOn("n1").empty());
  EXPECT_EQ(table_.size(), 2u);  // until its final record is committed
  ASSERT_NE(table_.Find(1), nullptr);
  EXPECT_TRUE(table_.Erase(1));
  EXPECT_EQ(table_.Find(1), nullptr);
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(JobTableTest, ACopyOfAJobNotInMemoryIsNotIndexed) {
  // A finished job read back from the store (a late log) is changed and stored again.
  JobRecord copy = Job(7, "a", 1);
  table_.Index(copy);
  EXPECT_EQ(table_.Revision(7), 0u);
  EXPECT_TRUE(table_.queued().empty());
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(JobTableTest, TheRequestIsKeptUntilAServiceIsScaled) {
  JobRecord& job = table_.Add(Job(1, "a", 1));
  const JobRequest* first = table_.RequestOf(job);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->replicas, 1);
  EXPECT_EQ(table_.RequestOf(job), first);
  job.spec.replicas = 3;
  const JobRequest* scaled = table_.RequestOf(job);
  ASSERT_NE(scaled, nullptr);
  EXPECT_EQ(scaled->replicas, 3);
}

}  // namespace
}  // namespace carve
