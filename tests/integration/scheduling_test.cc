// Queues, quotas, preemption and explanations against the real server and agents.
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

const NodeList kFourH200 = {{"h-0", "gpus:\n  - {model: H200, count: 4, mode: exclusive}\n"}};

class SchedulingTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kFourH200; }

  json Job(const std::string& queue, int gpus, int replicas = 1) {
    return {{"command", {"sleep", "60"}},
            {"queue", queue},
            {"replicas", replicas},
            {"resources", {{"gpus", gpus}, {"cpu", "1"}, {"memory", "1Gi"}}}};
  }
  std::string State(int64_t id) { return PlatformTest::Job(id)["state"]; }
  bool Running(int64_t id) { return State(id) == "running"; }
  json Explain(int64_t id) { return *Api().Get(absl::StrCat("/api/v1/jobs/", id, "/explain")); }
  json Queue(const std::string& name) {
    const json queues = *Api().Get("/api/v1/queues/status");
    for (const json& q : queues) {
      if (q["name"] == name) return q;
    }
    return json();
  }
  void Apply(const json& docs) {
    auto r = Api().Post("/api/v1/apply", docs);
    ASSERT_TRUE(r.ok()) << r.status();
  }
};

TEST_F(SchedulingTest, QuotaIsEnforcedAndExplainedFieldByField) {
  Apply(json::array({{{"kind", "queue"}, {"name", "a"}, {"quota", {{"gpus", 2}}}}}));
  int64_t first = Submit(Job("a", 2))["id"];
  ASSERT_TRUE(Eventually([&] { return Running(first); }));
  int64_t second = Submit(Job("a", 1))["id"];
  ASSERT_TRUE(Eventually([&] { return Explain(second)["gate"] == "quota"; }));
  json e = Explain(second);
  EXPECT_EQ(e["state"], "queued");  // two GPUs stay free: quota, not capacity, holds it
  EXPECT_EQ(e["queue"], "a");
  EXPECT_EQ(e["priority_class"], "standard");
  EXPECT_EQ(e["priority"], 100);
  ASSERT_EQ(e["gates"].size(), 1u);
  const json& q = e["gates"][0];
  EXPECT_EQ(q["gate"], "quota");
  EXPECT_EQ(q["queue"], "a");
  EXPECT_EQ(q["resource"], "gpus");
  EXPECT_EQ(q["used"], "2");
  EXPECT_EQ(q["nominal"], "2");
  EXPECT_EQ(q["requested"], "1");
  EXPECT_EQ(q["borrowable"], "0");
  EXPECT_EQ(q["reclaimable"], false);
  EXPECT_EQ(q["summary"], "queue a: gpus 2/2 used, needs 1, 0 borrowable");
  EXPECT_THAT(e["fix"].get<std::string>(), HasSubstr("needs 1 more gpus in queue a"));
  json status = Queue("a");
  EXPECT_EQ(status["pending"], 1);
  EXPECT_EQ(status["running"], 1);
  EXPECT_EQ(status["resources"]["gpus"]["quota"], "2");
  EXPECT_EQ(status["resources"]["gpus"]["used"], "2");
  EXPECT_EQ(status["pending_demand"]["gpus"], "1");
  // Ending the first job frees the quota.
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", first, "/cancel"), json::object()).ok());
  EXPECT_TRUE(Eventually([&] { return Running(second); }));
}

TEST_F(SchedulingTest, BadQueueDocumentsAreRefusedAndChangeNothing) {
  auto bad =
      Api().Post("/api/v1/apply",
                 json::array({{{"kind", "queue"}, {"name", "a"}, {"quota", {{"gpus/Z9", 2}}}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("document 0: quota.gpus/Z9:"));
  auto lending = Api().Post("/api/v1/apply", json::array({{{"kind", "queue"},
                                                           {"name", "a"},
                                                           {"quota", {{"gpus", 2}}},
                                                           {"lending_limit", {{"gpus", 1}}}}}));
  ASSERT_FALSE(lending.ok());
  EXPECT_THAT(lending.status().message(), HasSubstr("lending_limit: only a queue in a cohort"));
  EXPECT_EQ(Api().Get("/api/v1/queues")->size(), 1u);  // only "default"
}

TEST_F(SchedulingTest, ProjectsSubmitOnlyToTheirQueuesAndClassesSetDefaults) {
  Apply(json::array({{{"kind", "tenant"}, {"name", "t"}},
                     {{"kind", "queue"}, {"name", "a"}},
                     {{"kind", "queue"}, {"name", "b"}},
                     {{"kind", "project"}, {"name", "p"}, {"tenant", "t"}, {"queues", {"a"}}},
                     {{"kind", "priority-class"}, {"name", "urgent"}, {"priority", 5000}}}));
  json spec = Job("b", 1);
  spec["tenant"] = "t";
  spec["project"] = "p";
  auto refused = Api().Post("/api/v1/jobs", spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("project p may submit to a; not to \"b\""));
  spec["queue"] = "a";
  spec["priority_class"] = "critical";
  json critical = Submit(spec);
  EXPECT_EQ(critical["spec"]["priority"], 1000);
  EXPECT_EQ(critical["spec"]["preemptible"], false);
  spec["priority_class"] = "urgent";
  EXPECT_EQ(Submit(spec)["spec"]["priority"], 5000);
  spec["priority_class"] = "nope";
  auto unknown = Api().Post("/api/v1/jobs", spec);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("priority_class: no priority class \"nope\""));
}

TEST_F(SchedulingTest, BorrowedCapacityIsReclaimedByPreemptionWithRecordsOnBothSides) {
  Apply(
      json::array({{{"kind", "queue"}, {"name", "a"}, {"cohort", "c"}, {"quota", {{"gpus", 2}}}},
                   {{"kind", "queue"}, {"name", "b"}, {"cohort", "c"}, {"quota", {{"gpus", 2}}}}}));
  int64_t own = Submit(Job("b", 2))["id"];
  ASSERT_TRUE(Eventually([&] { return Running(own); }));
  int64_t borrower = Submit(Job("b", 2))["id"];  // a's idle quota, lent to b
  ASSERT_TRUE(Eventually([&] { return Running(borrower); }));
  EXPECT_EQ(Queue("b")["resources"]["gpus"]["borrowed"], "2");
  EXPECT_EQ(Queue("a")["resources"]["gpus"]["lent"], "2");
  int64_t owner = Submit(Job("a", 2))["id"];
  ASSERT_TRUE(Eventually([&] { return Running(owner); }));
  json victim = PlatformTest::Job(borrower);
  EXPECT_EQ(victim["preempted_by"], owner);
  EXPECT_EQ(victim["preemption"],
            absl::StrCat("preempted by job ", owner,
                         " for queue a's guarantee: queue b runs on borrowed capacity"));
  EXPECT_EQ(State(own), "running");  // within b's own quota: untouched
  json preemptor = PlatformTest::Job(owner);
  ASSERT_EQ(preemptor["victims"].size(), 1u);
  EXPECT_EQ(preemptor["victims"][0]["job"], borrower);
  // The victim is queued again by its policy, and now waits on b's quota.
  ASSERT_TRUE(Eventually([&] { return Explain(borrower)["gate"] == "quota"; }));
  json e = Explain(borrower);
  EXPECT_EQ(e["state"], "queued");
  EXPECT_EQ(e["gates"][0]["used"], "2");
  EXPECT_EQ(e["gates"][0]["borrowable"], "0");
  EXPECT_FALSE(EventsOf("job.preempted").empty());
}

TEST_F(SchedulingTest, HigherPriorityPreemptsInsideItsQueue) {
  int64_t low = Submit(Job("default", 4))["id"];
  ASSERT_TRUE(Eventually([&] { return Running(low); }));
  json urgent = Job("default", 2);
  urgent["priority"] = 500;
  int64_t high = Submit(urgent)["id"];
  ASSERT_TRUE(Eventually([&] { return Running(high); }));
  json victim = PlatformTest::Job(low);
  EXPECT_EQ(victim["preempted_by"], high);
  EXPECT_EQ(victim["preemption"], absl::StrCat("preempted by job ", high,
                                               " of higher priority (500 > 100) in queue default"));
  EXPECT_EQ(victim["attempt"], 1);  // requeued without spending a retry
}

TEST_F(SchedulingTest, PreemptedJobGetsItsCheckpointGrace) {
  // The agent's own grace is 3 s; this job needs 4 s to save after SIGTERM and asks for 8.
  json spec = Job("default", 4);
  spec["command"] = {
      "sh", "-c",
      "trap 'stop=1' TERM; echo up; while [ -z \"$stop\" ]; do sleep 0.1; done; sleep 4; "
      "echo saved"};
  spec["checkpoint_grace"] = "8s";
  int64_t low = Submit(spec)["id"];
  ASSERT_TRUE(
      Eventually([&] { return Running(low) && Logs(low).find("up") != std::string::npos; }));
  json urgent = Job("default", 2);
  urgent["priority"] = 500;
  int64_t high = Submit(urgent)["id"];
  ASSERT_TRUE(Eventually([&] { return Running(high); }));
  EXPECT_EQ(PlatformTest::Job(low)["preempted_by"], high);
  // The server's copy of the first attempt's log (the API serves the current attempt's).
  std::string log =
      (dir_ / "data/logs/tenants/default" / absl::StrCat("job-", low, "-0.log")).string();
  EXPECT_TRUE(Eventually([&] { return Slurp(log).find("saved") != std::string::npos; }, 15))
      << Slurp(log);
}

TEST_F(SchedulingTest, BackfillStartsOnlyWhatCannotDelayTheReservedJob) {
  json first = Job("default", 2);
  first["priority_class"] = "critical";  // not preemptible: the big job must wait for its end
  first["max_runtime"] = "60s";
  int64_t running = Submit(first)["id"];
  ASSERT_TRUE(Eventually([&] { return Running(running); }));
  json big = Job("default", 4);
  big["priority"] = 500;
  int64_t reserved = Submit(big)["id"];
  ASSERT_TRUE(Eventually([&] { return Explain(reserved)["reserved"] == true; }));
  json longer = Job("default", 2);
  longer["max_runtime"] = "10m";  // would still run when the big job is due
  int64_t held = Submit(longer)["id"];
  ASSERT_TRUE(Eventually([&] { return Explain(held)["gate"] == "order"; })) << Explain(held);
  json e = Explain(held);
  EXPECT_EQ(e["state"], "queued");  // two GPUs are free, but not for ten minutes
  ASSERT_EQ(e["gates"].size(), 1u);
  EXPECT_EQ(e["gates"][0]["reserved_job"], reserved);
  EXPECT_GT(e["gates"][0]["reserved_start_us"].get<int64_t>(), 0);
  EXPECT_EQ(e["ahead"][0]["job"], reserved);
  EXPECT_EQ(e["ahead"][0]["why"], "priority 500 > 100");
  json shorter = Job("default", 1);
  shorter["max_runtime"] = "30s";  // ends before the big job's reserved start
  int64_t backfilled = Submit(shorter)["id"];
  ASSERT_TRUE(Eventually([&] { return Running(backfilled); }));
  bool marked = false;
  for (const json& ev : EventsOf("job.scheduled")) {
    if (ev["subject"] == absl::StrCat("job/", backfilled)) marked = ev["details"]["backfilled"];
  }
  EXPECT_TRUE(marked);
  EXPECT_EQ(State(reserved), "queued");
}

TEST_F(SchedulingTest, GangWaitsWholeWithGangAndPlacementGates) {
  // 2 x 4 GPUs on one 4-GPU node: refused unless asked to queue what cannot fit (issue 14).
  auto refused = Api().Post("/api/v1/jobs", Job("default", 4, 2));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("a replica fits, but not 2 at once"));
  int64_t gang = Submit(Job("default", 4, 2), "", true)["id"];
  ASSERT_TRUE(Eventually([&] { return !Explain(gang)["gates"].empty(); }));
  json e = Explain(gang);
  EXPECT_EQ(e["state"], "queued");
  ASSERT_EQ(e["gates"].size(), 2u);
  EXPECT_EQ(e["gates"][0]["gate"], "gang");
  EXPECT_EQ(e["gates"][0]["needed"], 2);
  EXPECT_EQ(e["gates"][0]["placeable"], 1);
  EXPECT_EQ(e["gates"][1]["gate"], "placement");
  EXPECT_EQ(e["gates"][1]["nodes_considered"], 1);
  EXPECT_EQ(e["gates"][1]["reasons"]["insufficient-whole-gpus"], 1);
  EXPECT_THAT(e["fix"].get<std::string>(), HasSubstr("needs room for 1 more replica(s)"));
  EXPECT_TRUE(PlatformTest::Job(gang)["replicas"].empty());  // nothing held
}

}  // namespace
}  // namespace carve::it
