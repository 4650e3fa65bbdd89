#include "runtime/records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "runtime/states.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// Every value of each state, in declaration order, with the name the store, the REST API, events
// and metrics carry. These strings are the wire format: they never change.
const std::vector<std::pair<JobState, std::string>> kJobStateNames = {
    {JobState::kQueued, "queued"},       {JobState::kScheduled, "scheduled"},
    {JobState::kRunning, "running"},     {JobState::kReclaiming, "reclaiming"},
    {JobState::kSucceeded, "succeeded"}, {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"}, {JobState::kTimedOut, "timed-out"},
    {JobState::kLost, "lost"},           {JobState::kPreempted, "preempted"}};
const std::vector<std::pair<ReplicaState, std::string>> kReplicaStateNames = {
    {ReplicaState::kPending, "pending"},
    {ReplicaState::kRunning, "running"},
    {ReplicaState::kExited, "exited"},
    {ReplicaState::kRetired, "retired"},
    {ReplicaState::kLost, "lost"}};
const std::vector<std::pair<NodeRecordState, std::string>> kNodeStateNames = {
    {NodeRecordState::kReady, "ready"},
    {NodeRecordState::kNotReady, "not-ready"},
    {NodeRecordState::kDead, "dead"}};
const std::vector<std::pair<ProcessState, std::string>> kProcessStateNames = {
    {ProcessState::kRunning, "running"},
    {ProcessState::kDefunct, "defunct"},
    {ProcessState::kGone, "gone"}};
// Near misses of real names: none is a state.
const std::vector<std::string> kNotStates = {"",          "Queued",   "RUNNING", "timed_out",
                                             "timedout",  "running ", "bogus",   "0",
                                             "not ready", "gone\n"};

// `names` lists every value of State in declaration order (the last is `last`); each name parses
// back to its value.
template <typename State>
void ExpectNamesRoundTrip(const std::vector<std::pair<State, std::string>>& names, State last,
                          std::optional<State> (*parse)(absl::string_view)) {
  ASSERT_EQ(names.size(), static_cast<size_t>(last) + 1);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& [state, name] = names[i];
    EXPECT_EQ(static_cast<size_t>(state), i) << name;
    EXPECT_EQ(Name(state), name);
    EXPECT_EQ(parse(name), state) << name;
  }
}

TEST(StatesTest, EveryNameParsesBackToItsState) {
  ExpectNamesRoundTrip(kJobStateNames, JobState::kPreempted, ParseJobState);
  ExpectNamesRoundTrip(kReplicaStateNames, ReplicaState::kLost, ParseReplicaState);
  ExpectNamesRoundTrip(kNodeStateNames, NodeRecordState::kDead, ParseNodeRecordState);
  ExpectNamesRoundTrip(kProcessStateNames, ProcessState::kGone, ParseProcessState);
}

TEST(StatesTest, UnknownNamesParseToNothing) {
  for (const std::string& name : kNotStates) {
    EXPECT_EQ(ParseJobState(name), std::nullopt) << name;
    EXPECT_EQ(ParseReplicaState(name), std::nullopt) << name;
    EXPECT_EQ(ParseNodeRecordState(name), std::nullopt) << name;
    EXPECT_EQ(ParseProcessState(name), std::nullopt) << name;
  }
  // A name of one kind is not a state of another.
  EXPECT_EQ(ParseJobState("pending"), std::nullopt);
  EXPECT_EQ(ParseReplicaState("queued"), std::nullopt);
  EXPECT_EQ(ParseNodeRecordState("running"), std::nullopt);
  EXPECT_EQ(ParseProcessState("exited"), std::nullopt);
}

// A state reaches JSON only by Name(): nlohmann would otherwise write the enum's number.
static_assert(!std::is_constructible_v<json, JobState>);
static_assert(!std::is_constructible_v<json, ReplicaState>);
static_assert(!std::is_constructible_v<json, NodeRecordState>);
static_assert(!std::is_constructible_v<json, ProcessState>);

TEST(StatesTest, FinalJobStatesAreTheSixEnds) {
  std::vector<std::string> final_names;
  for (const auto& [state, name] : kJobStateNames) {
    if (IsFinal(state)) final_names.push_back(name);
  }
  EXPECT_EQ(final_names, (std::vector<std::string>{"succeeded", "failed", "cancelled", "timed-out",
                                                   "lost", "preempted"}));
}

JobRecord SomeJob() {
  JobRecord job;
  job.id = 7;
  job.spec = *JobSpecFromJson({{"name", "j"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  job.replicas.resize(2);
  return job;
}

// The stored form carries each state by name, and reads back to the same record.
TEST(RecordsTest, JobStatesAreStoredByName) {
  for (const auto& [state, name] : kJobStateNames) {
    JobRecord job = SomeJob();
    job.state = state;
    job.outcome = state;
    job.replicas[0].state = ReplicaState::kExited;
    job.replicas[1].state = ReplicaState::kRetired;
    json stored = job.ToJson();
    EXPECT_EQ(stored["state"], name);
    EXPECT_EQ(stored["outcome"], name);
    EXPECT_EQ(stored["replicas"][0]["state"], "exited");
    EXPECT_EQ(stored["replicas"][1]["state"], "retired");
    absl::StatusOr<JobRecord> back = JobRecord::FromJson(stored);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->state, state);
    EXPECT_EQ(back->outcome, state);
    EXPECT_EQ(back->replicas[0].state, ReplicaState::kExited);
    EXPECT_EQ(back->replicas[1].state, ReplicaState::kRetired);
    EXPECT_EQ(back->ToJson(), stored);
  }
  for (const auto& [state, name] : kReplicaStateNames) {
    JobRecord job = SomeJob();
    job.replicas[1].state = state;
    json stored = job.ToJson();
    EXPECT_EQ(stored["replicas"][1]["state"], name);
    absl::StatusOr<JobRecord> back = JobRecord::FromJson(stored);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->replicas[1].state, state);
  }
}

// No outcome yet: stored as "" (as before it was typed), read back as none.
TEST(RecordsTest, AJobWithoutOutcomeStoresAnEmptyOne) {
  JobRecord job = SomeJob();
  json stored = job.ToJson();
  EXPECT_EQ(stored["state"], "queued");
  EXPECT_EQ(stored["outcome"], "");
  EXPECT_EQ(stored["replicas"][0]["state"], "pending");
  absl::StatusOr<JobRecord> back = JobRecord::FromJson(stored);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->outcome, std::nullopt);
  // Fields older records lack take their defaults.
  stored.erase("outcome");
  stored["replicas"][0].erase("state");
  back = JobRecord::FromJson(stored);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->outcome, std::nullopt);
  EXPECT_EQ(back->replicas[0].state, ReplicaState::kPending);
}

// A stored state this server does not know is refused by name, never read as another state.
TEST(RecordsTest, AStoredJobWithAnUnknownStateIsRefused) {
  const json good = SomeJob().ToJson();
  for (const std::string& name : kNotStates) {
    json bad = good;
    bad["state"] = name;
    absl::StatusOr<JobRecord> job = JobRecord::FromJson(bad);
    ASSERT_FALSE(job.ok()) << name;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(job.status().message(), HasSubstr("state: unknown state"));

    if (!name.empty()) {  // an empty outcome is no outcome
      bad = good;
      bad["outcome"] = name;
      job = JobRecord::FromJson(bad);
      ASSERT_FALSE(job.ok()) << name;
      EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(job.status().message(), HasSubstr("outcome: unknown state"));
    }

    bad = good;
    bad["replicas"][1]["state"] = name;
    job = JobRecord::FromJson(bad);
    ASSERT_FALSE(job.ok()) << name;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(job.status().message(), HasSubstr("replicas[1].state: unknown state"));
  }
  json bad = good;
  bad["state"] = "timed_out";
  EXPECT_EQ(JobRecord::FromJson(bad).status().message(),
            "stored job 7 is unreadable: state: unknown state \"timed_out\"");
  bad["state"] = 3;  // not a name at all
  EXPECT_EQ(JobRecord::FromJson(bad).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RecordsTest, NodeStatesAreStoredByName) {
  NodeRecord node;
  node.name = "n1";
  node.cpu_milli = 1000;
  node.memory_mib = 1024;
  for (const auto& [state, name] : kNodeStateNames) {
    node.state = state;
    json stored = node.ToJson();
    EXPECT_EQ(stored["state"], name);
    absl::StatusOr<NodeRecord> back = NodeRecord::FromJson(stored);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->state, state);
  }
  json stored = node.ToJson();
  stored.erase("state");
  EXPECT_EQ(NodeRecord::FromJson(stored)->state, NodeRecordState::kReady);
  for (const std::string& name : kNotStates) {
    stored["state"] = name;
    absl::StatusOr<NodeRecord> back = NodeRecord::FromJson(stored);
    ASSERT_FALSE(back.ok()) << name;
    EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(back.status().message(), HasSubstr("state: unknown state"));
  }
  stored["state"] = "gone";
  EXPECT_EQ(NodeRecord::FromJson(stored).status().message(),
            "node n1: state: unknown state \"gone\"");
}

// A maintenance window is stored as the API shows it, read back typed; no window is null; a phase
// the code does not know is refused rather than read as some default.
TEST(RecordsTest, MaintenanceWindowsAreStoredAsShownAndReadBackTyped) {
  NodeRecord node;
  node.name = "n1";
  node.cpu_milli = 1000;
  node.memory_mib = 1024;
  EXPECT_TRUE(node.ToJson()["maintenance"].is_null());
  EXPECT_FALSE(NodeRecord::FromJson(node.ToJson())->maintenance.has_value());
  for (WindowPhase phase : {WindowPhase::kScheduled, WindowPhase::kActive}) {
    node.maintenance = MaintenanceWindow{100, 200, "root", "firmware", phase};
    json stored = node.ToJson();
    EXPECT_EQ(stored["maintenance"],
              json({{"start_us", 100},
                    {"end_us", 200},
                    {"by", "root"},
                    {"reason", "firmware"},
                    {"phase", phase == WindowPhase::kActive ? "active" : "scheduled"}}));
    absl::StatusOr<NodeRecord> back = NodeRecord::FromJson(stored);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_TRUE(back->maintenance.has_value());
    EXPECT_EQ(back->maintenance->phase, phase);
    EXPECT_EQ(back->maintenance->end_us, 200);
    EXPECT_EQ(back->maintenance->reason, "firmware");
  }
  json stored = node.ToJson();
  stored["maintenance"]["phase"] = "over";
  EXPECT_EQ(NodeRecord::FromJson(stored).status().message(),
            "node n1: maintenance: phase: unknown state \"over\"");
  stored["maintenance"] = {{"phase", "active"}};
  EXPECT_FALSE(NodeRecord::FromJson(stored).ok()) << "a window without its times";
}

// R1: node mode overrides were written as an array of pairs and read back as an object, which
// aborted every restart after `carve apply` of a node document or a `carve relayout`.
TEST(RecordsTest, NodeModesReadBothStoredForms) {
  std::map<int, std::string> modes = {{1, "exclusive"}, {3, "partition"}};
  EXPECT_EQ(ModesToJson(modes), json({{"1", "exclusive"}, {"3", "partition"}}));
  EXPECT_EQ(ModesFromJson(ModesToJson(modes)), modes);
  // What servers before the fix wrote (json of a map<int, string>): an array of pairs.
  EXPECT_EQ(ModesFromJson(json(modes)), modes);
  EXPECT_TRUE(ModesFromJson(json("junk")).empty());
}

// Another tenant's job ids leave a record for readers below the cluster's admins: the preemptor
// of a victim, the victims of a preemptor; the same tenant's stay, and the stored record keeps
// both (round trip).
TEST(RecordsTest, OtherTenantsJobIdsAreHiddenFromReadersButStored) {
  JobRecord victim;
  victim.id = 5;
  victim.spec.command = {"true"};
  victim.preempted_by = 9;
  victim.preempted_by_other_tenant = true;
  victim.victims = nlohmann::json::array(
      {{{"job", 3}, {"reason", "r"}}, {{"job", 4}, {"reason", "r"}, {"other_tenant", true}}});
  nlohmann::json stored = victim.ToJson();
  auto back = JobRecord::FromJson(stored);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->preempted_by_other_tenant);
  EXPECT_EQ(back->preempted_by, 9);
  nlohmann::json seen = stored;
  HideOtherTenantsJobs(seen);
  EXPECT_FALSE(seen.contains("preempted_by"));
  EXPECT_EQ(seen["victims"][0]["job"], 3);
  EXPECT_FALSE(seen["victims"][1].contains("job"));
  victim.preempted_by_other_tenant = false;
  seen = victim.ToJson();
  HideOtherTenantsJobs(seen);
  EXPECT_EQ(seen["preempted_by"], 9) << "the same tenant's preemptor stays";
}

}  // namespace
}  // namespace carve
