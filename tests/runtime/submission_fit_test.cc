// Submission refuses what no registered node could hold even with the cluster idle (issue 14),
// and only that: cordons, maintenance and enforcement outages pass; with no node yet, anything
// is accepted; `allow_unschedulable` queues what would be refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control_plane_fixture.h"

namespace carve {
namespace {

using ::testing::HasSubstr;

class SubmissionFitTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("submission-fit", ControlPlane::Options{}, [] { return kT0; });
  }
  absl::StatusOr<nlohmann::json> Gpus(int gpus, bool allow = false, int replicas = 1) {
    return cp_->Submit({{"command", {"true"}},
                        {"replicas", replicas},
                        {"resources", {{"gpus", gpus}, {"gpu_model", {"H200"}}}}},
                       "", kAdmin, allow);
  }
};

TEST_F(SubmissionFitTest, WithNoNodeYetAnythingIsAccepted) { EXPECT_TRUE(Gpus(64).ok()); }

TEST_F(SubmissionFitTest, MoreThanAnyNodeHasIsRefusedWithWhyUnlessAllowed) {
  RegisterH200Node("n1", 4, kAdmin);
  RegisterH200Node("n2", 2, kAdmin);
  auto refused = Gpus(8);
  ASSERT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("needs 8 whole H200-141GB on one node; best node n1 has 4 free"));
  EXPECT_TRUE(Gpus(8, /*allow=*/true).ok());
  auto gang = Gpus(3, false, 3);  // one fits n1, none fits beside it on n2
  ASSERT_FALSE(gang.ok());
  EXPECT_THAT(gang.status().message(), HasSubstr("a replica fits, but not 3 at once"));
  EXPECT_TRUE(Gpus(2, false, 3).ok());  // 2 + 2 on n1, 2 on n2
  EXPECT_EQ(Jobs(true).size(), 2u);     // the refused ones were never stored
}

TEST_F(SubmissionFitTest, WhatIsOnlyOutOfServiceNowIsAccepted) {
  RegisterH200Node("n1", 4, kAdmin);
  ASSERT_TRUE(cp_->Cordon("n1", "drain", -1, kAdmin).ok());
  EXPECT_TRUE(Gpus(4).ok());  // the drain ends; the job waits for it
  ASSERT_TRUE(cp_->Cordon("n1", "uncordon", -1, kAdmin).ok());
  ASSERT_TRUE(cp_->Cordon("n1", "cordon", 2, kAdmin).ok());  // one GPU out of service
  EXPECT_TRUE(Gpus(4).ok());
}

// The idle cluster is kept between submissions: checks leave it as they found it, and a node that
// joins is in the next check.
TEST_F(SubmissionFitTest, TheKeptIdleClusterFollowsTheNodesAndIsLeftIdle) {
  RegisterH200Node("n1", 4, kAdmin);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Gpus(4).ok()) << i;  // each check placed and released
  ASSERT_TRUE(Gpus(2, false, 2).ok());
  ASSERT_FALSE(Gpus(8).ok());
  RegisterH200Node("n2", 8, kAdmin);
  EXPECT_TRUE(Gpus(8).ok());
  EXPECT_TRUE(Gpus(4, false, 3).ok());  // n1 and both halves of n2
  EXPECT_FALSE(Gpus(4, false, 4).ok());
}

}  // namespace
}  // namespace carve
