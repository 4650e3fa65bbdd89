#include "core/sched/queueing/quota.h"

#include <gtest/gtest.h>

#include "fixture.h"

namespace carve {
namespace {

using testing_queueing::Catalog;
using testing_queueing::Queue;

ResourceList G(int64_t gpus) { return {{"gpus", gpus * 1000}}; }

TEST(QuotaLedger, QueueWithoutCohortStopsAtNominal) {
  QuotaLedger ledger({Queue("a", "", 4)});
  EXPECT_TRUE(ledger.Check("a", G(4)).fits);
  ledger.Charge("a", G(3));
  QuotaVerdict v = ledger.Check("a", G(2));
  EXPECT_FALSE(v.fits);
  EXPECT_EQ(v.resource, "gpus");
  EXPECT_EQ(v.used, 3000);
  EXPECT_EQ(v.nominal, 4000);
  EXPECT_EQ(v.available, 1000);
  EXPECT_EQ(v.borrowable, 0);
  EXPECT_FALSE(v.reclaimable);
}

TEST(QuotaLedger, BorrowsUnusedQuotaOfTheCohortUpToTheBorrowingLimit) {
  QuotaLedger ledger({Queue("a", "c", 4, /*borrowing_limit=*/2), Queue("b", "c", 4)});
  EXPECT_TRUE(ledger.Check("a", G(6)).fits);
  QuotaVerdict v = ledger.Check("a", G(7));
  EXPECT_FALSE(v.fits);
  EXPECT_EQ(v.available, 6000);
  EXPECT_EQ(v.borrowable, 2000);
  ledger.Charge("a", G(6));
  auto status = ledger.Status("a");
  EXPECT_EQ(status["gpus"].borrowed, 2000);
  EXPECT_EQ(ledger.Status("b")["gpus"].lent, 2000);
  // b can still use its nominal minus what a borrowed: the pool is shared.
  EXPECT_TRUE(ledger.Check("b", G(2)).fits);
  QuotaVerdict b = ledger.Check("b", G(4));
  EXPECT_FALSE(b.fits);
  EXPECT_TRUE(b.reclaimable);  // within b's nominal: reclaim by preemption
}

TEST(QuotaLedger, LendingLimitKeepsPartOfTheNominalForItsOwner) {
  QuotaLedger ledger({Queue("a", "c", 4), Queue("b", "c", 4, -1, /*lending_limit=*/1)});
  EXPECT_TRUE(ledger.Check("a", G(5)).fits);
  EXPECT_FALSE(ledger.Check("a", G(6)).fits);
  ledger.Charge("a", G(5));
  EXPECT_TRUE(ledger.Check("b", G(3)).fits);
}

TEST(QuotaLedger, UnknownQueueAndUnlistedResourceAreUnlimited) {
  QuotaLedger ledger({Queue("a", "", 1)});
  EXPECT_TRUE(ledger.Check("nobody", G(100)).fits);
  EXPECT_TRUE(ledger.Check("a", {{"cpu", 1'000'000}}).fits);
}

TEST(QuotaLedger, BorrowingAndWithinNominal) {
  QuotaLedger ledger({Queue("a", "c", 2), Queue("b", "c", 2)});
  ledger.Charge("a", G(3));
  EXPECT_TRUE(ledger.Borrowing("a", G(1)));
  EXPECT_FALSE(ledger.Borrowing("b", G(1)));
  EXPECT_TRUE(ledger.WithinNominal("b", G(2)));
  EXPECT_FALSE(ledger.WithinNominal("b", G(3)));
  EXPECT_FALSE(ledger.WithinNominal("b", {{"cpu", 1000}}));  // no quota covers it
}

TEST(QuotaLedger, DominantShareIsWeighted) {
  QueueSpec a = Queue("a", "", 8);
  a.weight = 2;
  QuotaLedger ledger({a, Queue("b", "", 8)});
  ResourceList capacity = {{"gpus", 16000}, {"cpu", 100000}};
  ledger.Charge("a", {{"gpus", 8000}, {"cpu", 1000}});
  ledger.Charge("b", {{"gpus", 4000}, {"cpu", 60000}});
  EXPECT_DOUBLE_EQ(ledger.DominantShare("a", capacity), 0.25);
  EXPECT_DOUBLE_EQ(ledger.DominantShare("b", capacity), 0.6);
}

TEST(Resources, NamesAndAmountsParseExactly) {
  EXPECT_EQ(*CanonicalResource("gpus/h200", Catalog()), "gpus/H200-141GB");
  EXPECT_EQ(*CanonicalResource("mig/3g.40gb", Catalog()), "mig/3g.40gb");
  EXPECT_FALSE(CanonicalResource("gpus/Z9", Catalog()).ok());
  EXPECT_FALSE(CanonicalResource("mig/9g.1gb", Catalog()).ok());
  EXPECT_FALSE(CanonicalResource("disks", Catalog()).ok());
  EXPECT_EQ(*ParseResourceAmount("gpus", "0.57"), 570);
  EXPECT_EQ(*ParseResourceAmount("memory", "64Gi"), 65536);
  EXPECT_EQ(*ParseResourceAmount("mig/3g.40gb", "2"), 2);
  EXPECT_FALSE(ParseResourceAmount("mig/3g.40gb", "1.5").ok());
  EXPECT_FALSE(ParseResourceAmount("gpus", "-1").ok());
  EXPECT_EQ(FormatResourceAmount("memory", 65536), "64Gi");
  EXPECT_EQ(FormatResourceAmount("gpus", 2500), "2.5");
}

TEST(Resources, PlacementChargeCountsTheModelsItGot) {
  Cluster cluster = testing_queueing::H200Cluster(1, 8);
  JobRequest job = testing_queueing::Gpus(2, 2);
  ResourceList before = RequestCharge(job, Catalog());
  EXPECT_EQ(before.at("gpus"), 4000);
  EXPECT_EQ(before.count("gpus/H200-141GB"), 0u);
  std::vector<ReplicaPlacement> where(2);
  where[0].node = where[1].node = NodeId(0);
  where[0].grants = {{0, kWholeGpu, {}, -1, -1, false}, {1, kWholeGpu, {}, -1, -1, false}};
  where[1].grants = {{2, kWholeGpu, {}, -1, -1, false}, {3, kWholeGpu, {}, -1, -1, false}};
  ResourceList after = PlacementCharge(cluster, job, where);
  EXPECT_EQ(after.at("gpus/H200-141GB"), 4000);
  EXPECT_EQ(after.at("cpu"), 2000);
}

}  // namespace
}  // namespace carve
