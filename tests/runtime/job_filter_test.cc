#include "runtime/job_filter.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

namespace carve {
namespace {

JobRecord Job(const std::string& name, const std::string& kind, const std::string& user) {
  JobRecord job;
  job.spec.name = name;
  job.spec.kind = kind;
  job.spec.command = {"python", "train.py", "--epochs=3"};
  job.submitted_by = user;
  job.state = JobState::kQueued;
  return job;
}

absl::StatusOr<JobFilter> FromQuery(const std::map<std::string, std::string>& q) {
  return JobFilter::FromParams([&](const char* key) -> std::optional<std::string> {
    auto at = q.find(key);
    if (at == q.end()) return std::nullopt;
    return at->second;
  });
}

TEST(JobFilterTest, KindMatchesExactlyAndTextAnywhereIgnoringCase) {
  auto f = FromQuery({{"kind", "training"}, {"text", "TRAIN.PY"}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->empty());
  EXPECT_TRUE(f->Matches(Job("resnet", "training", "alice")));    // the command
  EXPECT_FALSE(f->Matches(Job("resnet", "inference", "alice")));  // another kind
  auto by_user = FromQuery({{"text", "ALI"}});
  EXPECT_TRUE(by_user->Matches(Job("resnet", "batch", "alice")));  // the submitter
  EXPECT_TRUE(FromQuery({{"text", "resn"}})->Matches(Job("ResNet-50", "batch", "bob")));
  EXPECT_FALSE(FromQuery({{"text", "bert"}})->Matches(Job("resnet", "batch", "bob")));
}

TEST(JobFilterTest, TheJsonFormTakesTheSameKeysAndNamesAWrongOne) {
  auto f = JobFilter::FromJson({{"kind", "evaluation"}, {"text", "eval"}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, "evaluation");
  EXPECT_EQ(f->text, "eval");
  auto wrong = JobFilter::FromJson({{"kinds", "x"}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("filter.kinds: not a filter"), std::string::npos);
  auto state = FromQuery({{"state", "waiting"}});
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("state \"waiting\" is not a job state"),
            std::string::npos);
}

}  // namespace
}  // namespace carve
