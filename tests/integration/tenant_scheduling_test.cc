// Queues, priorities and minimums across tenants, against the real server and agents: a member
// cannot submit into another tenant's queue (H2), cannot outrank other tenants' jobs with a
// priority, class or non-preemptibility its project was not given (H3), and cannot run a job that
// asks for no CPU or memory (M7).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

class TenantSchedulingTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    auto applied =
        Api().Post("/api/v1/apply",
                   json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                {{"kind", "tenant"}, {"name", "globex"}},
                                {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                                {{"kind", "queue"}, {"name", "acme-q"}, {"tenants", {"acme"}}},
                                {{"kind", "queue"},
                                 {"name", "globex-q"},
                                 {"tenants", {"globex"}},
                                 {"quota", {{"gpus", 2}}}},
                                {{"kind", "queue"}, {"name", "shared-q"}, {"tenants", {"*"}}},
                                {{"kind", "queue"}, {"name", "ownerless"}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
    acme_ = MemberToken("alice", "acme", "vision");
    globex_ = MemberToken("gary", "globex", "nlp");
  }

  absl::StatusOr<json> SubmitAs(const std::string& token, json spec) {
    if (!spec.contains("command")) spec["command"] = {"true"};
    return ApiClient(url_, token).Post("/api/v1/jobs", spec);
  }

  json QueueStatus(const std::string& name) {
    const json queues = *Api().Get("/api/v1/queues/status");
    for (const json& q : queues) {
      if (q["name"] == name) return q;
    }
    return json();
  }

  size_t JobCount() { return Api().Get("/api/v1/jobs?all=true")->size(); }

  std::string acme_, globex_;
};

// H2: a member of acme submitted into globex-q and spent globex's quota. Another tenant's queue
// (and a queue no admin gave to anyone) answers exactly like a queue that does not exist.
TEST_F(TenantSchedulingTest, AnotherTenantsQueueAnswersLikeAMissingOne) {
  size_t before = JobCount();
  auto foreign = SubmitAs(acme_, {{"queue", "globex-q"}, {"resources", {{"gpus", 2}}}});
  auto missing = SubmitAs(acme_, {{"queue", "nothere"}, {"resources", {{"gpus", 2}}}});
  auto ownerless = SubmitAs(acme_, {{"queue", "ownerless"}});
  ASSERT_FALSE(foreign.ok()) << "acme's member submitted into globex's queue";
  ASSERT_FALSE(missing.ok());
  ASSERT_FALSE(ownerless.ok());
  EXPECT_EQ(foreign.status().code(), missing.status().code());
  EXPECT_EQ(absl::StrReplaceAll(foreign.status().message(), {{"globex-q", "X"}}),
            absl::StrReplaceAll(missing.status().message(), {{"nothere", "X"}}));
  EXPECT_EQ(absl::StrReplaceAll(ownerless.status().message(), {{"ownerless", "X"}}),
            absl::StrReplaceAll(missing.status().message(), {{"nothere", "X"}}));
  EXPECT_EQ(foreign.status().message(),
            "queue: no queue \"globex-q\"; project vision may use: default, acme-q, shared-q");
  EXPECT_EQ(JobCount(), before) << "a refused submission made a job";
  EXPECT_EQ(QueueStatus("globex-q")["pending"], 0);
  EXPECT_EQ(QueueStatus("globex-q")["resources"]["gpus"]["used"], "0");

  // Each tenant uses its own queues, the shared one and the built-in default.
  for (const char* q : {"acme-q", "shared-q", "default"}) {
    auto ok = SubmitAs(acme_, {{"queue", q}});
    EXPECT_TRUE(ok.ok()) << q << ": " << ok.status();
  }
  auto own = SubmitAs(globex_, {{"queue", "globex-q"}});
  EXPECT_TRUE(own.ok()) << own.status();
  // Admins submit anywhere, the ownerless queue included.
  auto admin = SubmitAs(token_, {{"queue", "ownerless"}});
  EXPECT_TRUE(admin.ok()) << admin.status();
}

// A project's `queues:` list is an admin's grant, and exactly what its jobs may use; `tenants`
// names only tenants that exist.
TEST_F(TenantSchedulingTest, QueueGrantsAreCheckedWhenApplied) {
  auto bad =
      Api().Post("/api/v1/apply",
                 json::array({{{"kind", "queue"}, {"name", "more"}, {"tenants", {"nobody"}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("document 0: tenants: no tenant \"nobody\""));
  ASSERT_TRUE(Api()
                  .Post("/api/v1/apply", json::array({{{"kind", "project"},
                                                       {"name", "vision"},
                                                       {"tenant", "acme"},
                                                       {"queues", {"ownerless"}}}}))
                  .ok());
  EXPECT_TRUE(SubmitAs(acme_, {{"queue", "ownerless"}}).ok());
  auto def = SubmitAs(acme_, {{"queue", "default"}});
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().message(),
            "queue: no queue \"default\"; project vision may use: ownerless");
}

// H3: {"priority":1000000,"priority_class":"critical","preemptible":false} from a member preempted
// another tenant's running job. Now each is refused with what the project may use, and the
// other tenant's job runs on untouched.
TEST_F(TenantSchedulingTest, MembersCannotOutrankOtherTenants) {
  auto victim = SubmitAs(
      acme_, {{"command", {"sleep", "60"}}, {"resources", {{"gpus", 2}, {"gpu_model", "H200"}}}});
  ASSERT_TRUE(victim.ok()) << victim.status();
  int64_t id = (*victim)["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  int64_t pid = Job(id)["replicas"][0]["pid"];
  size_t before = JobCount();

  json attack = {{"priority", 1000000},
                 {"priority_class", "critical"},
                 {"preemptible", false},
                 {"resources", {{"gpus", 2}, {"gpu_model", "H200"}}}};
  auto refused = SubmitAs(globex_, attack);
  ASSERT_FALSE(refused.ok()) << "a member submitted a critical, non-preemptible job";
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message(),
            "priority_class: no class \"critical\" that project nlp may use; classes allowed: "
            "standard (100), exploratory (0)");
  attack.erase("priority_class");
  attack.erase("preemptible");
  auto high = SubmitAs(globex_, attack);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(high.status().message(),
              HasSubstr("priority: 1000000 exceeds project nlp's max_priority 100"));
  EXPECT_THAT(high.status().message(),
              HasSubstr("classes allowed: standard (100), exploratory (0)"));
  attack.erase("priority");
  attack["preemptible"] = false;
  auto pinned = SubmitAs(globex_, attack);
  ASSERT_FALSE(pinned.ok());
  EXPECT_THAT(pinned.status().message(),
              HasSubstr("preemptible: project nlp may not run non-preemptible jobs"));
  EXPECT_EQ(JobCount(), before);

  // Within the cap a member submits as before; an admin is not capped (no GPUs: no victims).
  auto fine = SubmitAs(globex_, {{"priority", 100}, {"priority_class", "exploratory"}});
  EXPECT_TRUE(fine.ok()) << fine.status();
  auto admin = SubmitAs(token_, {{"priority", 1000000}, {"priority_class", "critical"}});
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ((*admin)["spec"]["priority"], 1000000);

  json now = Job(id);
  EXPECT_EQ(now["state"], "running");
  EXPECT_EQ(now["replicas"][0]["pid"], pid);
  EXPECT_TRUE(EventsOf("job.preempted").empty());
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object()).ok());
  WaitFinal(id);
}

// What an admin grants a project (max_priority, priority_classes, allow_non_preemptible) and what
// a class document grants its tenants is what the project's members may use.
TEST_F(TenantSchedulingTest, AdminsGrantPrioritiesPerProjectAndClass) {
  auto applied = Api().Post("/api/v1/apply", json::array({{{"kind", "priority-class"},
                                                           {"name", "deadline"},
                                                           {"priority", 500},
                                                           {"preemptible", false},
                                                           {"tenants", {"globex"}}},
                                                          {{"kind", "project"},
                                                           {"name", "nlp"},
                                                           {"tenant", "globex"},
                                                           {"max_priority", 300},
                                                           {"allow_non_preemptible", true}}}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  auto deadline = SubmitAs(globex_, {{"priority_class", "deadline"}});
  ASSERT_TRUE(deadline.ok()) << deadline.status();
  EXPECT_EQ((*deadline)["spec"]["priority"], 500);
  EXPECT_EQ((*deadline)["spec"]["preemptible"], false);
  EXPECT_TRUE(SubmitAs(globex_, {{"priority", 300}, {"preemptible", false}}).ok());
  EXPECT_FALSE(SubmitAs(globex_, {{"priority", 301}}).ok());
  // Not acme's: answered like a class that does not exist.
  auto other = SubmitAs(acme_, {{"priority_class", "deadline"}});
  auto missing = SubmitAs(acme_, {{"priority_class", "nothing"}});
  ASSERT_FALSE(other.ok());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(other.status().code(), missing.status().code());
  EXPECT_EQ(absl::StrReplaceAll(other.status().message(), {{"deadline", "X"}}),
            absl::StrReplaceAll(missing.status().message(), {{"nothing", "X"}}));
}

// M7: `cpu: "0", memory: "0"` ran with no limits and no quota charge.
TEST_F(TenantSchedulingTest, JobsAskForAtLeastTheMinimumCpuAndMemory) {
  size_t before = JobCount();
  auto cpu = SubmitAs(acme_, {{"resources", {{"cpu", "0"}, {"memory", "1Gi"}}}});
  ASSERT_FALSE(cpu.ok()) << "a job with no CPU was accepted";
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu.status().message(),
            "resources.cpu: \"0\" is below the minimum of 100m per replica");
  auto memory = SubmitAs(acme_, {{"resources", {{"cpu", "1"}, {"memory", "0"}}}});
  ASSERT_FALSE(memory.ok()) << "a job with no memory was accepted";
  EXPECT_EQ(memory.status().message(),
            "resources.memory: \"0\" is below the minimum of 16Mi per replica");
  EXPECT_EQ(JobCount(), before);
  auto least = SubmitAs(acme_, {{"resources", {{"cpu", "100m"}, {"memory", "16Mi"}}}});
  ASSERT_TRUE(least.ok()) << least.status();
  // A sanitizer build's monitor does not fit in 16Mi: the kernel's OOM kill shows the limit.
  json ended = WaitFinal((*least)["id"]);
  EXPECT_EQ(ended["state"], kSanitized ? "failed" : "succeeded") << ended.dump(2);
}

}  // namespace
}  // namespace carve
