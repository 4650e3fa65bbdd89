// The acceptance kit's records and report without a cluster: the record's codec, the verdict
// from its checks, the report and CSV never letting what others named things escape their cell,
// and the probe's lines read back. (The kit against a real server: integration/poc_test.cc.)
#include "runtime/poc/poc.h"

#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/poc/poc_cluster.h"
#include "runtime/poc/poc_compare.h"

namespace carve::poc {

std::string ChartJs();  // generated at build time (cmake/embed_text.cmake)

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

Record Sample() {
  Record r;
  r.id = "software.contention";
  r.title = "Contention";
  r.suite = "software";
  r.owner = "alice";
  r.started_us = 1'000'000;
  r.ended_us = 4'000'000;
  r.input = json::array({{{"name", "poc-1"}}});
  r.jobs = {7};
  r.nodes = {{"l40s-0", {{"driver", "simulated"}, {"carve", "0.1.0"}}}};
  r.chain_start = {10, "aa"};
  r.chain_end = {20, "bb"};
  r.pass_condition = "all run";
  r.checks = {{"rate", true, ">= 0.5", "0.9"}};
  r.observed = {{"charts", json::array({{{"title", "t"},
                                         {"labels", {"a"}},
                                         {"series", {{{"label", "s"}, {"values", {1.0}}}}}}})}};
  r.verdict = Verdict::kPass;
  return r;
}

TEST(PocRecordTest, ARecordReadsBackAsItWasWritten) {
  Record r = Sample();
  auto back = RecordFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ToJson(*back), ToJson(r));
  EXPECT_EQ(ToJson(r)["events"], (json{{"after", 10}, {"through", 20}}));
  EXPECT_EQ(ToJson(r)["logs"], json::array({"/api/v1/jobs/7/logs"}));
}

TEST(PocRecordTest, ABrokenRecordIsRefusedNamingWhatIsWrong) {
  json j = ToJson(Sample());
  j["verdict"] = "maybe";
  EXPECT_THAT(RecordFromJson(j).status().message(), HasSubstr("unknown verdict \"maybe\""));
  j = ToJson(Sample());
  j["chain_end"] = "bb";
  EXPECT_THAT(RecordFromJson(j).status().message(), HasSubstr("\"chain_end\""));
  EXPECT_FALSE(RecordFromJson(json::array()).ok());
}

TEST(PocRecordTest, TheVerdictNamesTheFirstFailedCheck) {
  Record r = Sample();
  r.checks.push_back({"memory cap seen", false, "0=8192M", "null"});
  r.checks.push_back({"later", false, "x", "y"});
  Judge(r);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.verdict_reason, "memory cap seen: expected 0=8192M, observed null");
  Record none = Sample();
  none.checks.clear();
  Judge(none);
  EXPECT_EQ(none.verdict, Verdict::kInconclusive);
}

// The issue's "a node whose versions are not reported": every test that ran on it fails, saying
// which versions are missing.
TEST(PocRecordTest, ANodeWithoutItsVersionsFailsTheTestThatRanOnIt) {
  Record r = Sample();
  r.nodes = {
      {"old-agent", json::object()},
      {"l40s-0",
       {{"driver", "580.65"}, {"cuda_driver", "13.0"}, {"kernel", "6.1"}, {"carve", "0.1"}}}};
  CheckVersions(r);
  Judge(r);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.verdict_reason,
            "old-agent: versions recorded: expected driver, cuda_driver, kernel and carve, "
            "observed missing driver, cuda_driver, kernel, carve");
  Record ok = Sample();
  ok.nodes = {
      {"l40s-0",
       {{"driver", "580.65"}, {"cuda_driver", "13.0"}, {"kernel", "6.1"}, {"carve", "0.1"}}}};
  CheckVersions(ok);
  Judge(ok);
  EXPECT_EQ(ok.verdict, Verdict::kPass) << ok.verdict_reason;
}

TEST(PocReportTest, NamesCannotEscapeTheirCells) {
  Record r = Sample();
  r.title = "<script>alert(1)</script>";
  r.checks[0].observed = "\"><img src=x onerror=alert(1)>";
  std::string html = RenderReport({{"owner", "<b>o</b>"}}, {r});
  EXPECT_THAT(html, Not(HasSubstr("<script>alert(1)")));
  EXPECT_THAT(html, Not(HasSubstr("<img src=x")));
  EXPECT_THAT(html, Not(HasSubstr("<b>o</b>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("<canvas class=\"chart\" id=\"chart-0\""));
  EXPECT_THAT(html, HasSubstr("Chart.js v3"));  // the library, inlined
  EXPECT_THAT(html, HasSubstr("1 of 1 tests passed"));
}

// The library embedded at build time is Debian's file, byte for byte (cmake/embed_text.cmake).
TEST(PocReportTest, TheEmbeddedChartLibraryIsDebiansFileUnchanged) {
  std::ifstream in("/usr/share/javascript/chart.js/chart.min.js", std::ios::binary);
  ASSERT_TRUE(in) << "scripts/deps installs libjs-chart.js";
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(ChartJs(), file);
}

TEST(PocReportTest, TheCsvQuotesWhatNeedsIt) {
  Record r = Sample();
  r.verdict_reason = "a, \"b\"\nc";
  std::string csv = RecordsCsv({r});
  EXPECT_THAT(csv, HasSubstr("\"a, \"\"b\"\"\nc\""));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "id,title,suite,verdict,verdict_reason,owner,started,ended,jobs,events_after,"
            "events_through,chain_start_hash,chain_end_hash,nodes,pass_condition,"
            "failure_handling");
}

TEST(PocReportTest, ACsvCellIsNeverASpreadsheetFormula) {
  Record r = Sample();
  r.owner = "=HYPERLINK(\"http://x\",\"y\")";
  std::string csv = RecordsCsv({r});
  EXPECT_THAT(csv, HasSubstr(",\"'=HYPERLINK("));
  EXPECT_THAT(csv, Not(HasSubstr(",=HYPERLINK")));
}

TEST(PocReportTest, BytesThatAreNotUtf8DoNotStopTheReport) {
  Record r = Sample();
  r.owner = "bob\xff";
  r.observed["name"] = "poc\xfe";
  EXPECT_THAT(RenderReport({{"owner", "bob\xff"}}, {r}), HasSubstr("acceptance"));
}

TEST(PocCompareTest, AWorkloadReadsNumbersGivenAsTextAndNamesWhatIsWrong) {
  auto jobs = ParseWorkload(json::parse(
      R"({"jobs": [{"name": "infer", "count": "4", "seconds": 2, "gpu": "0.25"}, {"name": "t"}]})"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].count, 4);
  EXPECT_EQ((*jobs)[0].gpu, 0.25);
  EXPECT_EQ((*jobs)[1].seconds, 3);
  EXPECT_EQ((*jobs)[1].gpu, 1.0);
  EXPECT_THAT(
      ParseWorkload(json::parse(R"({"jobs": [{"name": "x", "gpu": 2}]})")).status().message(),
      HasSubstr("jobs[0].gpu"));
  EXPECT_THAT(
      ParseWorkload(json::parse(R"({"jobs": [{"name": "x", "count": 1.5}]})")).status().message(),
      HasSubstr("jobs[0].count"));
  EXPECT_THAT(ParseWorkload(json::parse(R"({"jobs": [{"count": 1}]})")).status().message(),
              HasSubstr("jobs[0].name"));
  EXPECT_FALSE(ParseWorkload(json::parse(R"({"jobs": []})")).ok());
}

TEST(PocCompareTest, ThePageEscapesNamesAndDrawsTwoCharts) {
  json result = {{"modes",
                  {{{"mode", "shared"},
                    {"requests", {{"<b>x</b>", "L40S share 25%"}}},
                    {"makespan_s", 3.5},
                    {"throughput_per_min", 10},
                    {"wait_p50_s", 0.1},
                    {"wait_p95_s", 0.2},
                    {"gpu_seconds", 4},
                    {"mean_slowdown", 1.0},
                    {"max_slowdown", 1.1},
                    {"failed", 0}},
                   {{"mode", "partition"}, {"skipped", "no MIG GPU takes work"}}}}};
  std::string html = RenderCompare(result);
  EXPECT_THAT(html, Not(HasSubstr("<b>x</b>")));
  EXPECT_THAT(html, HasSubstr("skipped: no MIG GPU takes work"));
  EXPECT_THAT(html, HasSubstr("id=\"chart-1\""));
  EXPECT_THAT(html, HasSubstr("Chart.js v3"));
}

TEST(PocProbeLogTest, ReadsWhatTheProbeSaidAndSkipsTheRest) {
  ProbeLog log = ParseProbeLog(
      "{\"probe\":\"sees\",\"uid\":5}\nnot json\n"
      "{\"probe\":\"memory\",\"mib\":256,\"ok\":true}\n"
      "{\"probe\":\"memory\",\"mib\":512,\"ok\":false,\"error\":\"cap\"}\n"
      "{\"probe\":\"done\",\"per_second\":90}\n{\"probe\":\"crash\",\"signal\":11}\n");
  EXPECT_EQ(log.sees["uid"], 5);
  EXPECT_EQ(log.held_mib, 256);
  EXPECT_TRUE(log.refused);
  EXPECT_FALSE(log.reached_mib.has_value());
  EXPECT_EQ(log.per_second, 90);
  EXPECT_TRUE(log.crashed);
}

TEST(PocClusterTest, OnlyReadyHealthySharedGpusOfOneModelAreTested) {
  json nodes = json::parse(R"([
    {"name": "a", "state": "ready", "cordoned_by": "", "replicas": 0, "gpus": [
      {"index": 0, "mode": "exclusive", "health": "healthy", "state": "available", "model": "H200", "memory_mib": 1},
      {"index": 1, "mode": "shared", "health": "healthy", "state": "available", "model": "L40S", "memory_mib": 46068},
      {"index": 2, "mode": "shared", "health": "unhealthy", "state": "available", "model": "L40S", "memory_mib": 46068}]},
    {"name": "b", "state": "not-ready", "cordoned_by": "", "gpus": [
      {"index": 0, "mode": "shared", "health": "healthy", "state": "available", "model": "L40S", "memory_mib": 46068}]},
    {"name": "c", "state": "ready", "cordoned_by": "", "replicas": 2, "gpus": [
      {"index": 0, "mode": "shared", "health": "healthy", "state": "available", "model": "T4", "memory_mib": 15360},
      {"index": 1, "mode": "shared", "health": "healthy", "state": "available", "model": "L40S", "memory_mib": 46068}]}
  ])");
  std::vector<SharedGpu> gpus = SharedGpus(nodes, "", {"c/gpu 1"});
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].node, "a");
  EXPECT_EQ(gpus[0].device, 1);
  EXPECT_TRUE(gpus[0].idle);
  EXPECT_EQ(gpus[1].node, "c");
  EXPECT_FALSE(gpus[1].idle);
  ASSERT_EQ(SharedGpus(nodes, "T4", {}).size(), 1u);
}

}  // namespace
}  // namespace carve::poc
