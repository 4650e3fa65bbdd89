// Why a job waits never names another tenant's job: a tenant's member reads its own job's reason,
// events and explanation, and the job holding the backfill reservation, or a job ahead of it in
// a shared queue, may be another tenant's (its id says it exists).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

class WaitPrivacyTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("wait-privacy", {}, [this] { return now_; });
    auto applied =
        cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                {{"kind", "project"}, {"name", "a"}, {"tenant", "acme"}},
                                {{"kind", "tenant"}, {"name", "globex"}},
                                {{"kind", "project"}, {"name", "g"}, {"tenant", "globex"}}}),
                   kAdmin);
    ASSERT_TRUE(applied.ok()) << applied.status();
    RegisterH200Node("n1", 2, kAdmin);
  }

  int64_t Submit(const std::string& tenant, int gpus, json extra) {
    json spec = {{"name", "j"},
                 {"tenant", tenant},
                 {"project", tenant == "acme" ? "a" : "g"},
                 {"command", {"sleep", "600"}},
                 {"resources", {{"gpus", gpus}}}};
    spec.update(extra);
    auto job = cp_->Submit(spec, "", kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }

  void Cycle() {
    now_ += 1000;
    ASSERT_TRUE(cp_->ScheduleOnce().ok());
  }

  int64_t now_ = kT0;
};

TEST_F(WaitPrivacyTest, TheReservationHoldersIdIsNamedOnlyToItsOwnTenant) {
  // One GPU held for a minute by a job nothing may preempt; acme's 2-GPU job waits for it and
  // holds the reservation; a ten-minute job of each tenant would delay it.
  Submit("acme", 1, {{"priority_class", "critical"}, {"max_runtime", "60s"}});
  Cycle();
  const int64_t big = Submit("acme", 2, {{"priority", 500}});
  const int64_t theirs = Submit("globex", 1, {{"max_runtime", "10m"}});
  const int64_t mine = Submit("acme", 1, {{"max_runtime", "10m"}});
  Cycle();
  Cycle();
  const std::string name = absl::StrCat("job ", big);

  json own = *cp_->Explain(mine);
  ASSERT_EQ(own["gate"], "order") << own.dump(1);
  EXPECT_NE(own["reason"].get<std::string>().find(name), std::string::npos) << own.dump(1);
  EXPECT_EQ(own["gates"][0]["reserved_job"], big);
  // Ahead of it: acme's big job, named, and globex's job, not.
  std::multiset<int64_t> ahead_of_own;
  for (const json& a : own["ahead"]) ahead_of_own.insert(a["job"].get<int64_t>());
  EXPECT_EQ(ahead_of_own, (std::multiset<int64_t>{0, big})) << own.dump(1);

  json other = *cp_->Explain(theirs);
  ASSERT_EQ(other["gate"], "order") << other.dump(1);
  const std::string text = other.dump();
  EXPECT_EQ(text.find(absl::StrCat("\"", name)), std::string::npos) << other.dump(1);
  EXPECT_EQ(text.find(absl::StrCat(name, ",")), std::string::npos) << other.dump(1);
  EXPECT_NE(other["reason"].get<std::string>().find("a job of another tenant"), std::string::npos)
      << other.dump(1);
  EXPECT_EQ(other["gates"][0]["reserved_job"], 0);
  ASSERT_EQ(other["ahead"].size(), 1u) << other.dump(1);
  EXPECT_EQ(other["ahead"][0]["job"], 0);
  EXPECT_EQ(other["ahead"][0]["why"], "priority 500 > 100");
  EXPECT_EQ((*cp_->GetJob(theirs))["reason"].get<std::string>().find(name), std::string::npos);
}

}  // namespace
}  // namespace carve
