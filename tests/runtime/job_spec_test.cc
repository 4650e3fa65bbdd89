#include "runtime/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

// Decimal numbers are numbers, as JSON has them (a price of 4.20 was text, and refused); quoted,
// or not a plain decimal, they stay text.
TEST(JobSpecTest, YamlDecimalsAreNumbers) {
  auto j = YamlToJson("a: 4.20\nb: -0.5\nc: 1e3\nd: '4.20'\ne: 1.2.3\nf: .inf\ng: 7\n");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"], 4.2);
  EXPECT_EQ((*j)["b"], -0.5);
  EXPECT_EQ((*j)["c"], 1000.0);
  EXPECT_EQ((*j)["d"], "4.20");
  EXPECT_EQ((*j)["e"], "1.2.3");
  EXPECT_EQ((*j)["f"], ".inf");
  EXPECT_EQ((*j)["g"], 7);
}

TEST(JobSpecTest, ParsesYamlJobFile) {
  auto j = YamlToJson(R"(
name: train
kind: training
replicas: 2
resources:
  gpus: 2
  gpu_model: [H200]
  cpu: 8
  memory: 32Gi
command: [python, train.py]
env: {EPOCHS: "3"}
max_runtime: 2h
)");
  ASSERT_TRUE(j.ok()) << j.status();
  auto spec = JobSpecFromJson(*j);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->replicas, 2);
  EXPECT_EQ(spec->gpus, 2);
  EXPECT_EQ(spec->cpu, "8");
  EXPECT_EQ(spec->env.at("EPOCHS"), "3");
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  auto request = ToJobRequest(*spec, catalog);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->replica.resources.cpu.units(), 8000);
  EXPECT_EQ(request->replica.resources.memory.units(), 32768);
  EXPECT_EQ(request->replica.gpu.count, 2);
}

TEST(JobSpecTest, ErrorsNameTheField) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  auto bad = [&](json j) -> std::string {
    auto spec = JobSpecFromJson(j);
    if (!spec.ok()) return std::string(spec.status().message());
    auto r = ToJobRequest(*spec, catalog);
    return r.ok() ? "ok" : std::string(r.status().message());
  };
  json base = {{"command", {"true"}}};
  EXPECT_EQ(bad(base), "ok");
  EXPECT_THAT(bad({{"command", {"true"}}, {"colour", "red"}}), HasSubstr("colour: unknown field"));
  EXPECT_THAT(bad({{"name", "x"}}), HasSubstr("command: is required"));
  EXPECT_THAT(bad({{"command", {"true"}}, {"resources", {{"cpu", "-1"}}}}),
              HasSubstr("resources.cpu"));
  EXPECT_THAT(bad({{"command", {"true"}}, {"resources", {{"gpus", 1000}}}}),
              HasSubstr("resources.gpus: 1000 is out of range"));
  EXPECT_THAT(bad({{"command", {"true"}}, {"resources", {{"gpu_model", {"B999"}}}}}),
              HasSubstr("unknown GPU model \"B999\""));
  EXPECT_THAT(
      bad({{"command", {"true"}}, {"resources", {{"mode", "partition"}, {"profile", "9g.1tb"}}}}),
      HasSubstr("no allowed GPU model has MIG profile \"9g.1tb\""));
  EXPECT_THAT(bad({{"command", {"true"}}, {"resources", {{"mode", "shared"}}}}),
              HasSubstr("gpu_compute"));
  EXPECT_THAT(bad({{"command", {"true"}}, {"kind", "party"}}), HasSubstr("kind: \"party\""));
  EXPECT_THAT(bad({{"command", {"true"}}, {"max_runtime", "forever"}}), HasSubstr("max_runtime"));
  EXPECT_THAT(bad({{"command", {"true"}}, {"resources", {{"memory", "1e9"}}}}),
              HasSubstr("resources.memory"));
}

TEST(JobSpecTest, RecoveryAndLeaseDefaultByKind) {
  auto training = JobSpecFromJson({{"command", {"true"}}, {"kind", "training"}});
  ASSERT_TRUE(training.ok());
  EXPECT_EQ(training->RecoveryPolicy(), "checkpoint-retry");
  EXPECT_EQ(training->MaxRetries(), 3);
  EXPECT_EQ(training->Lease(), "");
  auto notebook = JobSpecFromJson({{"command", {"true"}}, {"kind", "interactive"}});
  EXPECT_EQ(notebook->RecoveryPolicy(), "requeue");
  EXPECT_EQ(notebook->Lease(), "1h");
  auto custom = JobSpecFromJson({{"command", {"true"}},
                                 {"kind", "inference"},
                                 {"lease", "10m"},
                                 {"recovery", {{"policy", "none"}}}});
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(custom->RecoveryPolicy(), "none");
  EXPECT_EQ(custom->MaxRetries(), 0);
  EXPECT_EQ(custom->Lease(), "10m");
  auto again = JobSpecFromJson(custom->ToJson());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ToJson(), custom->ToJson());
  EXPECT_FALSE(JobSpecFromJson({{"command", {"true"}}, {"recovery", {{"policy", "pray"}}}}).ok());
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  auto bad_lease = JobSpecFromJson({{"command", {"true"}}, {"lease", "soon"}});
  ASSERT_TRUE(bad_lease.ok());
  EXPECT_THAT(ToJobRequest(*bad_lease, catalog).status().message(), HasSubstr("lease"));
}

TEST(JobSpecTest, Durations) {
  EXPECT_EQ(*ParseDurationUs("90s"), 90'000'000);
  EXPECT_EQ(*ParseDurationUs("1h30m"), 5'400'000'000);
  EXPECT_FALSE(ParseDurationUs("10").ok());
  EXPECT_FALSE(ParseDurationUs("5d").ok());
}

TEST(JobSpecTest, RoundTripsThroughJson) {
  json j = {{"command", {"sleep", "1"}},
            {"resources", {{"mode", "shared"}, {"gpu_compute", "30%"}, {"gpu_memory", "4Gi"}}}};
  auto spec = JobSpecFromJson(j);
  ASSERT_TRUE(spec.ok());
  auto again = JobSpecFromJson(spec->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToJson(), spec->ToJson());
}

// Found by fuzz/job_spec_fuzz.cc: yaml-cpp's LoadAll never returned on this input.
TEST(JobSpecTest, MultiDocumentYamlSplitsOnMarkersAndNeverHangs) {
  EXPECT_TRUE(YamlDocumentsToJson(" ,cp:u 1\n").ok());
  auto docs =
      YamlDocumentsToJson("kind: tenant\nname: a\n---\nkind: tenant\nname: b\n--- {kind: queue}\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[1]["name"], "b");
  EXPECT_EQ((*docs)[2]["kind"], "queue");
  // Also found by the fuzz target: a map as a key threw out of the parser.
  EXPECT_FALSE(YamlDocumentsToJson("? {a: 1}\n: b\n").ok());
  auto bad = YamlDocumentsToJson("a: 1\n---\nb: 2\nc: [\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("invalid YAML: line 5"));
}

// Found by fuzz/job_spec_fuzz.cc: a long duration overflowed int64 (undefined behaviour).
TEST(JobSpecTest, DurationsTooLongAreErrorsNotOverflows) {
  EXPECT_EQ(*ParseDurationUs("1h30m"), 5'400'000'000);
  EXPECT_FALSE(ParseDurationUs("4444444444h").ok());
  EXPECT_FALSE(ParseDurationUs("9999999999h9999999999h9999999999h").ok());
  EXPECT_TRUE(ParseDurationUs("277777777h").ok());  // about 31,700 years
}

// M7: "0" CPU and memory ran unlimited and uncharged; a submission must ask for a minimum.
TEST(JobSpecTest, SubmissionsAskForAtLeastTheMinimums) {
  auto spec = [](const std::string& cpu, const std::string& memory) {
    return *JobSpecFromJson(
        {{"command", {"true"}}, {"resources", {{"cpu", cpu}, {"memory", memory}}}});
  };
  EXPECT_TRUE(CheckSubmissionMinimums(spec("100m", "16Mi")).ok());
  EXPECT_TRUE(CheckSubmissionMinimums(*JobSpecFromJson({{"command", {"true"}}})).ok());  // 1, 1Gi
  absl::Status cpu = CheckSubmissionMinimums(spec("0", "1Gi"));
  EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu.message(), "resources.cpu: \"0\" is below the minimum of 100m per replica");
  EXPECT_EQ(CheckSubmissionMinimums(spec("99m", "1Gi")).message(),
            "resources.cpu: \"99m\" is below the minimum of 100m per replica");
  EXPECT_EQ(CheckSubmissionMinimums(spec("1", "0")).message(),
            "resources.memory: \"0\" is below the minimum of 16Mi per replica");
  EXPECT_EQ(CheckSubmissionMinimums(spec("1", "15Mi")).message(),
            "resources.memory: \"15Mi\" is below the minimum of 16Mi per replica");
}

}  // namespace
}  // namespace carve
