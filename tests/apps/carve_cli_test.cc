// Runs the real `carve` binary as a new user would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int status;
  std::string output;
};

CliRun Carve(const std::string& args) {
  std::string cmd = std::string("CARVE_TRACE_DIR=") + CARVE_TRACE_DIR + " timeout 600 " +
                    CARVE_BINARY + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

TEST(CarveCli, SimFillWritesTableAndJson) {
  std::string json = ::testing::TempDir() + "fill.json";
  CliRun r = Carve("sim fill --policy fgd --seeds 1 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("GPU allocation at 100% load"));
  EXPECT_THAT(r.output, HasSubstr("130%"));
  std::ifstream in(json);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["policy"], "fgd");
  EXPECT_EQ(j["gpus_total"], 6212);
  EXPECT_EQ(j["seeds"], nlohmann::json::array({42}));
}

TEST(CarveCli, SimSynthReportsThroughput) {
  std::string json = ::testing::TempDir() + "synth.json";
  CliRun r = Carve("sim synth --nodes 200 --jobs 2000 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("jobs/s"));
  std::ifstream in(json);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_GT(j["placements_per_sec"].get<double>(), 0);
}

TEST(CarveCli, SimQueuesReportsEachQueueAgainstItsQuota) {
  std::string json = ::testing::TempDir() + "queues.json";
  CliRun r =
      Carve("sim queues --node-fraction 0.1 --arrival-speedup 100 --buckets 4 --json " + json);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("quota prod 345.0 GPUs, research 345.0 GPUs (one cohort)"));
  std::ifstream in(json);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["never_started"], 0);
  EXPECT_GT(j["reclaims"].get<int>(), 0);  // research takes back what prod borrowed
  double peak = 0;
  for (const auto& row : j["rows"]) peak = std::max(peak, row["prod_gpus"].get<double>());
  EXPECT_GT(peak, 0);
  CliRun bad = Carve("sim queues --prod-share 1.5");
  EXPECT_NE(bad.status, 0);
  EXPECT_THAT(bad.output, HasSubstr("--prod-share in (0, 1)"));
}

TEST(CarveCli, BadInputSaysWhatWasWrong) {
  CliRun r = Carve("sim fill --policy nope --seeds 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown placement policy \"nope\""));
  r = Carve("sim fill --pods /nonexistent.csv --seeds 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("/nonexistent.csv: cannot open"));
  r = Carve("sim fill --seeds many");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("--seeds"));
}

// `--gpus 0.5` is refused before any call, saying how to ask for part of a GPU.
TEST(CarveCli, AFractionOfAGpuIsAskedAsAShareOrAProfile) {
  CliRun r = Carve("submit --gpus 0.5 -- true");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("\"0.5\" is not a whole number of GPUs"));
  EXPECT_THAT(r.output, HasSubstr("--mode shared --gpu-compute 50%"));
}

// `carve submit job.yaml` (without -f) ran the file as the job's command, which failed on the
// node with exit code 127; it is refused before any call, saying to use -f.
TEST(CarveCli, AJobFileWithoutDashFIsRefusedSayingHow) {
  const std::string path = ::testing::TempDir() + "cli-job.yaml";
  std::ofstream(path) << "command: [sleep, \"1\"]\n";
  CliRun r = Carve("submit " + path);
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr(path + " is a job file: submit it with -f " + path));
}

// --log-level (and log_level in a server's --config) takes a level, and names them otherwise.
TEST(CarveCli, LogLevelMustBeALevel) {
  CliRun r = Carve("server --log-level loud");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("--log-level: loud not in {trace,debug,info,warn,error,off}"));
  r = Carve("agent --token-file /nonexistent --log-level loud");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.output, HasSubstr("--log-level: loud not in"));
  std::string config = ::testing::TempDir() + "/carve-log-level.yaml";
  std::ofstream(config) << "log_level: loud\n";
  r = Carve("server --config " + config + " --data " + ::testing::TempDir() +
            "/carve-log-level-data --listen 127.0.0.1:0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.output, HasSubstr("log level \"loud\": one of trace, debug, info, warn, error"));
}

}  // namespace

namespace {

// A checkout under /root (mode 0700) made every job of `carve dev` fail with "cannot change to
// workdir ...: Permission denied": jobs run as their tenant's user. It is refused, saying why.
TEST(CarveCli, DevRefusesADirectoryItsJobsCannotEnter) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: carve dev runs every job as this user";
  std::string closed =
      (std::filesystem::path(::testing::TempDir()) / "carve-closed-dir").lexically_normal();
  std::filesystem::remove_all(closed);
  std::filesystem::create_directories(closed);
  std::filesystem::permissions(closed, std::filesystem::perms::owner_all);
  // A regression would start carve dev and serve forever: timeout stops it.
  CliRun r = Carve("dev --listen 127.0.0.1:0 --data " + closed + "/data");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("could not enter " + closed + " (mode 0700)"));
  std::filesystem::remove_all(closed);
}

}  // namespace
