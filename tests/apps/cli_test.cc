// The `carve` command line against a real server and agents, as a Slurm or kubectl user runs it
// (issue 14): every command here is the binary a user types, its output read back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CliTest : public PlatformTest {
 protected:
  // `carve ARGS` against this test's server as its admin, stderr joined; stopped (SIGINT, as
  // Ctrl-C) after `seconds`.
  CliRun Cli(const std::string& args, const std::string& input = "", int seconds = 60,
             const std::string& token = "") {
    std::string command = absl::StrCat("cd ", dir_.string(), " && timeout -s INT ", seconds, " ",
                                       CARVE_BINARY, " --server ", url_, " --token ",
                                       token.empty() ? token_ : token, " ", args, " 2>&1");
    if (!input.empty()) {
      std::string file = (dir_ / "stdin.txt").string();
      std::ofstream(file) << input;
      command = absl::StrCat(command, " < ", file);
    }
    return RunShell(command);
  }

  // `carve ARGS` fails as bad input (exit 2) and says `says`.
  void ExpectRefused(const std::string& args, const std::string& says,
                     const std::string& input = "") {
    CliRun r = Cli(args, input);
    EXPECT_EQ(r.exit, 2) << args << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr(says)) << args;
  }

  // `carve submit -q ...`: the new job's id (the test fails when it was refused).
  int64_t SubmitQ(const std::string& args) {
    CliRun r = Cli("submit -q " + args);
    int64_t id = 0;
    EXPECT_EQ(r.exit, 0) << r.out;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r.out), &id)) << r.out;
    return id;
  }

  // The job as the API shows it once `done` holds for it (the test fails otherwise).
  json WaitJob(int64_t id, const std::function<bool(const json&)>& done) {
    json job;
    EXPECT_TRUE(Eventually([&] {
      auto got = Api().Get(absl::StrCat("/api/v1/jobs/", id));
      if (got.ok()) job = *got;
      return got.ok() && done(job);
    })) << job.dump(2);
    return job;
  }
};

// `--env K=V -- sh -c '...'` failed with "The following argument was not expected: -c": options
// that take several values swallowed `--`. Everything after `--` is the command.
TEST_F(CliTest, EverythingAfterDoubleDashIsTheCommand) {
  int64_t id = SubmitQ("--env K=V --gpu-model H200 --gpus 1 -- sh -c 'echo got $K -x'");
  json job = WaitFinal(id);
  EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump(2);
  EXPECT_THAT(Logs(id), HasSubstr("got V -x"));
  EXPECT_EQ(job["spec"]["command"], json({"sh", "-c", "echo got $K -x"}));
  ExpectRefused("cancel 1 -- sh", "`carve cancel` takes no command after `--`");
  ExpectRefused("submit sleep -- 60", "the command goes after `--`");
}

// A job no node could ever hold was accepted and waited forever; --gpu-model without --gpus was
// silently ignored.
TEST_F(CliTest, WhatCannotFitAnEmptyClusterIsRefusedWithWhy) {
  CliRun big = Cli("submit --gpus 8 --gpu-model H200 -- true");
  EXPECT_EQ(big.exit, 2) << big.out;
  EXPECT_THAT(big.out, HasSubstr("no node could run this job even with the whole cluster idle"));
  EXPECT_THAT(big.out, HasSubstr("needs 8 whole H200-141GB on one node; best node gpu-a has 2"));
  EXPECT_THAT(big.out, HasSubstr("--allow-unschedulable"));
  ExpectRefused("submit --gpus 1 --gpu-model T4 -- true",
                "no eligible node has a T4 GPU in exclusive mode");
  ExpectRefused("submit --replicas 4 --gpus 2 --gpu-model H200 -- true",
                "a replica fits, but not 4 at once");
  ExpectRefused("submit --gpu-model H200 -- true",
                "resources.gpu_model: a job without GPUs runs on no GPU");
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), 0u);  // nothing was stored

  int64_t queued = SubmitQ("--allow-unschedulable --gpus 1 --gpu-model A100-80GB -- true");
  json job = WaitJob(queued, [](const json& j) { return !j.value("explanation", "").empty(); });
  EXPECT_EQ(job.value("state", ""), "queued");
  // Its best-node hint names only nodes it could run on: none has an exclusive A100 (gpu-a, the
  // first node, used to be named "best node ... has 0 free").
  CliRun why = Cli(absl::StrCat("explain ", queued));
  EXPECT_THAT(why.out, HasSubstr("no eligible node has a A100-80GB GPU in exclusive mode"));
  EXPECT_THAT(why.out, Not(HasSubstr("best node")));
}

// Errors were empty (`carve: ` and nothing) or bare (a 400 without a message, a 500 for a
// negative log offset).
TEST_F(CliTest, EveryErrorSaysWhatWasWrong) {
  httplib::Client http(url_);
  httplib::Headers auth = {{"Authorization", "Bearer " + token_}};
  auto empty = http.Post("/api/v1/jobs", auth, "", "application/json");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 400);
  EXPECT_THAT(empty->body, HasSubstr("the body is empty"));
  int64_t id = SubmitQ("-- true");
  WaitFinal(id);
  auto negative = http.Get(absl::StrCat("/api/v1/jobs/", id, "/logs?offset=-100").c_str(), auth);
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->status, 400);
  EXPECT_THAT(negative->body, HasSubstr("offset: \\\"-100\\\" is not a non-negative integer"));
  auto no_route = http.Delete("/api/v1/jobs", auth);
  ASSERT_TRUE(no_route);
  EXPECT_GE(no_route->status, 400);
  EXPECT_THAT(no_route->body, HasSubstr("\"message\""));
  ExpectRefused("ls --state runing", "state \"runing\" is not a job state (queued, scheduled");
  for (const char* query : {"since_us=abc", "since_us=-5", "job=abc"}) {
    auto events = http.Get(absl::StrCat("/api/v1/events?", query).c_str(), auth);
    ASSERT_TRUE(events);
    EXPECT_EQ(events->status, 400) << query << ": " << events->body;
  }
}

// `command: [sleep, 60]` and `env: {N: 5}` said "must be a list of strings" / "must be a string"
// without naming the element or how to write it. `-f -` reads standard input.
TEST_F(CliTest, YamlErrorsNameTheElementAndHowToQuoteIt) {
  CliRun list = Cli("submit -f -", "command: [sleep, 60]\n");
  EXPECT_EQ(list.exit, 2);
  EXPECT_THAT(list.out, HasSubstr("command[1]: 60 is a number, not a string; quote it: \"60\""));
  CliRun env = Cli("submit -f -", "command: [\"true\"]\nenv: {N: 5}\n");
  EXPECT_EQ(env.exit, 2);
  EXPECT_THAT(env.out, HasSubstr("env.N: 5 is a number, not a string; quote it: \"5\""));
  CliRun ok = Cli("submit -q -f -", "command: [sh, -c, \"exit 0\"]\nenv: {N: \"5\"}\n");
  EXPECT_EQ(ok.exit, 0) << ok.out;
}

TEST_F(CliTest, VersionAndCompletion) {
  CliRun version = Cli("version");
  EXPECT_EQ(version.exit, 0);
  EXPECT_THAT(version.out, HasSubstr("carve 0."));
  EXPECT_THAT(version.out, HasSubstr("commit "));
  CliRun flag = Cli("--version");
  EXPECT_EQ(flag.out, version.out);
  for (const char* shell : {"bash", "zsh"}) {
    CliRun script = Cli(absl::StrCat("completion ", shell));
    ASSERT_EQ(script.exit, 0) << script.out;
    EXPECT_THAT(script.out, HasSubstr("complete -o default -F _carve carve"));
  }
  // The bash script completes subcommands and each subcommand's flags.
  CliRun words = RunShell(absl::StrCat(
      "bash -c 'source <(", CARVE_BINARY,
      " completion bash); COMP_WORDS=(carve ls --st); COMP_CWORD=2; _carve; echo ${COMPREPLY[@]};"
      " COMP_WORDS=(carve po); COMP_CWORD=1; _carve; echo ${COMPREPLY[@]}' 2>&1"));
  EXPECT_THAT(words.out, HasSubstr("--state"));
  EXPECT_THAT(words.out, HasSubstr("poc"));
  ExpectRefused("completion fish", "write bash or zsh");
}

TEST_F(CliTest, LsHasColumnsFiltersSortingAndWatch) {
  int64_t a = SubmitQ("--name ls-a -- true");
  WaitFinal(a);
  int64_t b = SubmitQ("--name ls-b --allow-unschedulable --gpus 1 --gpu-model A100-80GB -- true");
  CliRun active = Cli("ls");
  EXPECT_THAT(active.out, HasSubstr("USER"));
  EXPECT_THAT(active.out, HasSubstr("TENANT"));
  EXPECT_THAT(active.out, HasSubstr("WAIT"));
  EXPECT_THAT(active.out, HasSubstr("ls-b"));
  EXPECT_THAT(active.out, Not(HasSubstr("ls-a")));  // ended
  CliRun done = Cli("ls --state succeeded");        // an ended state reads the history
  EXPECT_THAT(done.out, HasSubstr("ls-a"));
  EXPECT_THAT(done.out, Not(HasSubstr("ls-b")));
  CliRun named = Cli("ls -a --name 'ls-*' --user admin -o json");
  json both = json::parse(named.out);
  ASSERT_EQ(both.size(), 2u) << named.out;
  EXPECT_EQ(Cli("ls -a --user nobody").out.find("ls-"), std::string::npos);
  CliRun wide = Cli("ls -a -o wide --sort wait");
  EXPECT_THAT(wide.out, HasSubstr("PROJECT"));
  EXPECT_LT(wide.out.find("ls-b"), wide.out.find("ls-a"));  // longest wait first
  CliRun watch = Cli("ls --watch --interval 0.2", "", 3);   // Ctrl-C after 3 s
  size_t frames = 0;
  for (size_t at = 0; (at = watch.out.find("every 0.2s", at)) != std::string::npos; ++at) ++frames;
  EXPECT_GE(frames, 2u) << watch.out;
  EXPECT_THAT(watch.out, HasSubstr(absl::StrCat(b)));
}

// Cancelling 1,000 queued jobs one request at a time took 43 s: one request takes ids or filters.
TEST_F(CliTest, CancelTakesSeveralIdsOrAFilterInOneRequest) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(SubmitQ(absl::StrCat(
        "--name bulk-", i, " --allow-unschedulable --gpus 1 --gpu-model A100-80GB -- true")));
  }
  int64_t keep =
      SubmitQ("--name keep --allow-unschedulable --gpus 1 --gpu-model A100-80GB -- true");
  CliRun by_name = Cli("cancel --name 'bulk-*' --state queued");
  EXPECT_EQ(by_name.exit, 0) << by_name.out;
  EXPECT_THAT(by_name.out, HasSubstr("cancelled 5 jobs"));
  for (int64_t id : ids)
    EXPECT_EQ(Api().Get(absl::StrCat("/api/v1/jobs/", id))->value("state", ""), "cancelled");
  EXPECT_EQ(Api().Get(absl::StrCat("/api/v1/jobs/", keep))->value("state", ""), "queued");
  CliRun mixed = Cli(absl::StrCat("cancel ", keep, " ", ids[0], " 999"));
  EXPECT_THAT(mixed.out, HasSubstr("cancelled 1 job: " + std::to_string(keep)));
  EXPECT_THAT(mixed.out, HasSubstr(absl::StrCat("job ", ids[0], ": no active job")));
  EXPECT_THAT(mixed.out, HasSubstr("job 999: no active job 999"));
  ExpectRefused("cancel", "name the jobs");
}

// The README walk-through found it: a service cancelled while its scale-up replica still waited
// for a node stayed "running" forever (the unplaced replica would never report an end).
TEST_F(CliTest, CancellingAServiceWhoseNewReplicaWaitsForANodeEndsIt) {
  int64_t id = SubmitQ("--kind inference --gpus 2 --gpu-model H200 -- sleep 600");
  WaitJob(id, [](const json& j) { return j.value("state", "") == "running"; });
  CliRun scale = Cli(absl::StrCat("scale ", id, " --replicas 2"));  // no node has 2 more H200s
  ASSERT_EQ(scale.exit, 0) << scale.out;
  WaitJob(id, [](const json& j) { return !j.value("explanation", "").empty(); });
  EXPECT_EQ(Cli(absl::StrCat("cancel ", id)).exit, 0);
  json job = WaitFinal(id);
  EXPECT_EQ(job.value("state", ""), "cancelled") << job.dump(2);
}

// The second red-team pass: a drained service keeps its old replica serving until the
// replacement runs; cancelled while the replacement found no node, the job ended at once with
// the old replica still running on devices the job no longer held.
TEST_F(CliTest, ACancelledServiceEndsOnlyOnceItsReplicaBeingReplacedHasStopped) {
  int64_t id = SubmitQ("--kind inference --gpus 2 --gpu-model H200 -- sleep 600");
  WaitJob(id, [](const json& j) { return j.value("state", "") == "running"; });
  ASSERT_EQ(Cli("drain gpu-a").exit, 0);  // the only node with two H200s: no place to move to
  WaitJob(id, [](const json& j) { return !j["replicas"][0].value("retire", "").empty(); });
  EXPECT_EQ(Cli(absl::StrCat("cancel ", id)).exit, 0);
  json job = WaitFinal(id);
  EXPECT_EQ(job.value("state", ""), "cancelled") << job.dump(2);
  const json& old = job["replicas"][0];
  EXPECT_EQ(old.value("state", ""), "retired") << job.dump(2);  // stopped, its evidence in
  EXPECT_EQ(old["reclaim"].value("status", ""), "verified") << job.dump(2);
}

TEST_F(CliTest, LogsTailAndWhyAFollowedJobWaits) {
  int64_t id = SubmitQ("-- sh -c 'for i in $(seq 1 40); do echo line $i; done'");
  WaitFinal(id);
  CliRun tail = Cli(absl::StrCat("logs ", id, " --tail 3"));
  EXPECT_EQ(tail.out, "line 38\nline 39\nline 40\n");
  EXPECT_EQ(Cli(absl::StrCat("logs ", id, " --tail 0")).out, "");
  int64_t waiting = SubmitQ("--allow-unschedulable --gpus 1 --gpu-model A100-80GB -- echo never");
  WaitJob(waiting, [](const json& j) { return !j.value("explanation", "").empty(); });
  CliRun follow = Cli(absl::StrCat("logs ", waiting, " -f"), "", 6);  // Ctrl-C after 6 s
  EXPECT_THAT(follow.out, HasSubstr(absl::StrCat("[job ", waiting, " is queued; waiting: ")));
  EXPECT_THAT(follow.out, HasSubstr("gpu-model-not-allowed"));
}

// `carve show` printed the raw record with epoch microseconds, and the reason a job waited was
// cleared when it started.
TEST_F(CliTest, ShowIsAPageThatKeepsWhyTheJobWaited) {
  int64_t first = SubmitQ("--gpus 2 --gpu-model H200 -- sleep 60");
  WaitJob(first, [](const json& j) { return j.value("state", "") == "running"; });
  int64_t second = SubmitQ("--gpus 2 --gpu-model H200 -- true");
  WaitJob(second, [](const json& j) { return !j.value("explanation", "").empty(); });
  EXPECT_EQ(Cli(absl::StrCat("cancel ", first)).exit, 0);
  WaitFinal(second);
  CliRun page = Cli(absl::StrCat("show ", second));
  EXPECT_THAT(page.out, HasSubstr(absl::StrCat("job ", second, " \"true\" succeeded")));
  EXPECT_THAT(page.out, HasSubstr("Timeline"));
  EXPECT_THAT(page.out, HasSubstr("waited for "));
  EXPECT_THAT(page.out, HasSubstr("insufficient-whole-gpus"));
  EXPECT_THAT(page.out, HasSubstr("reclaim  verified"));
  json record = *Api().Get(absl::StrCat("/api/v1/jobs/", second));  // times as dates, not µs
  EXPECT_THAT(page.out, Not(HasSubstr(absl::StrCat(record.value("created_us", int64_t{0})))));
  EXPECT_THAT(page.out, Not(HasSubstr("created_us")));
  CliRun placed = Cli(absl::StrCat("explain ", second));
  EXPECT_THAT(placed.out, HasSubstr("replica 0 on gpu-a, GPUs 0,1"));
  EXPECT_THAT(placed.out, HasSubstr("it had waited because: "));
  EXPECT_THAT(Cli(absl::StrCat("show ", second, " -o json")).out, HasSubstr("\"waited_for\""));
}

// sacct keeps each job's CPU time and peak memory; Carve kept neither. Each replica's reclaim
// record now carries what its cgroup measured, `carve show` and `carve history` print it, and the
// usage export has it.
TEST_F(CliTest, HistoryShowsWhatEachJobUsed) {
  int64_t id = SubmitQ(
      "--name busy --gpus 1 -- sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo "
      "done'");
  json job = WaitFinal(id);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump(2);
  const json used = job["replicas"][0]["reclaim"]["used"];
  ASSERT_TRUE(used.is_object()) << job.dump(2);
  ASSERT_TRUE(used["device"].is_object()) << used.dump();
  EXPECT_THAT(used["device"].value("source", ""), HasSubstr("peak memory"));
  if (job["replicas"][0].value("enforcement", "").rfind("cgroup", 0) == 0) {
    // A cgroup ran it: its CPU time is known, and above zero (the loop ran on a CPU).
    ASSERT_TRUE(used.contains("cpu_seconds")) << used.dump();
    EXPECT_GT(used["cpu_seconds"].get<double>(), 0.0);
    EXPECT_THAT(used.value("source", ""), HasSubstr("cgroup"));
  } else {  // no cgroup: the record says nothing was measured, and claims no figure
    EXPECT_THAT(used.value("source", ""), HasSubstr("not measured"));
    EXPECT_FALSE(used.contains("cpu_seconds"));
  }
  CliRun history = Cli("history --since 1h");
  EXPECT_THAT(history.out, HasSubstr("CPU TIME"));
  EXPECT_THAT(history.out, HasSubstr("busy"));
  EXPECT_THAT(history.out, HasSubstr("exit 0"));
  if (used.contains("cpu_seconds")) {
    EXPECT_THAT(Cli(absl::StrCat("show ", id)).out, HasSubstr(" s CPU"));
    json records = json::parse(Cli("export usage --format json").out, nullptr, false);
    bool found = false;
    for (const json& r : records) {
      if (r.value("job", int64_t{0}) == id) {
        found = true;
        EXPECT_TRUE(r["cpu_seconds_used"].is_number()) << r.dump();
      }
    }
    EXPECT_TRUE(found) << records.dump();
  }
}

// The peak device memory a replica's own processes held, sampled while it ran: the probe takes
// 2 GiB of a simulated H200 in 512 MiB steps and holds it.
TEST_F(CliTest, ShowHasThePeakDeviceMemoryAJobHeld) {
  int64_t id =
      SubmitQ(absl::StrCat("--gpus 1 --gpu-model H200 -- ", CARVE_BINARY,
                           " probe --memory-mib 2048 --step-mib 512 --hold 3s --seconds 1"));
  json job = WaitFinal(id, 60);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump(2);
  const json device = job["replicas"][0]["reclaim"]["used"]["device"];
  ASSERT_TRUE(device.contains("peak_memory_mib")) << device.dump();
  EXPECT_EQ(device["peak_memory_mib"], 2048) << device.dump();
  EXPECT_THAT(Cli(absl::StrCat("show ", id)).out, HasSubstr("on GPU   peak 2048 MiB"));
}

// The hostile-tenant pass: a simulated GPU's files are the job's to write, and a job that wrote
// 1000000 into its GPU's utilization recorded 74,350 busy seconds in 8 s. Figures stay within
// what the device has: busy time never exceeds the time it ran.
TEST_F(CliTest, AJobCannotRecordMoreBusyTimeThanItRan) {
  int64_t id = SubmitQ(
      "--gpus 1 --gpu-model H200 -- sh -c "
      "'echo 1000000 > $CARVE_SIM_GPU_DIR/$CUDA_VISIBLE_DEVICES/utilization; sleep 3'");
  json job = WaitFinal(id, 60);
  ASSERT_EQ(job.value("state", ""), "succeeded") << job.dump(2);
  const json& r = job["replicas"][0];
  const json device = r["reclaim"]["used"]["device"];
  const double ran =
      static_cast<double>(r.value("ended_us", int64_t{0}) - r.value("started_us", int64_t{0})) /
      1e6;
  ASSERT_TRUE(device.contains("busy_seconds")) << device.dump();  // a whole GPU: measured
  EXPECT_LE(device["busy_seconds"].get<double>(), ran + 1.0) << device.dump();
}

TEST_F(CliTest, EventsHaveAHeaderTimesAndFilters) {
  int64_t id = SubmitQ("-- true");
  WaitFinal(id);
  CliRun job = Cli(absl::StrCat("events --job ", id));
  EXPECT_THAT(job.out, HasSubstr("SEQ    TIME"));
  EXPECT_THAT(job.out, HasSubstr("job.submitted"));
  EXPECT_THAT(job.out, HasSubstr("job.succeeded"));
  EXPECT_THAT(job.out, Not(HasSubstr("node.registered")));
  CliRun follow = Cli(absl::StrCat("events --job ", id, " --follow"), "", 4);  // Ctrl-C at 4 s
  EXPECT_THAT(follow.out, HasSubstr("job.succeeded"));
  CliRun typed = Cli("events --type node.reg --since 1h");
  EXPECT_THAT(typed.out, HasSubstr("node.registered"));
  EXPECT_THAT(typed.out, Not(HasSubstr("job.")));
}

// maintenance, relayout, scale and drain answered with JSON dumps; they answer in sentences.
TEST_F(CliTest, OperationsAnswerInSentences) {
  CliRun window = Cli("maintenance gpu-a --in 10m --for 1h --reason firmware");
  EXPECT_THAT(window.out, HasSubstr("node gpu-a: maintenance scheduled from "));
  EXPECT_THAT(window.out, HasSubstr("(firmware, by admin); until it starts only jobs that end"));
  EXPECT_THAT(window.out, Not(HasSubstr("{")));
  EXPECT_THAT(Cli("maintenance gpu-a --cancel").out,
              HasSubstr("node gpu-a has no maintenance window"));
  CliRun relayout = Cli("relayout gpu-b --gpu 0 --layout 3g.40gb,3g.40gb");
  EXPECT_THAT(relayout.out, HasSubstr("GPU 0 of gpu-b is draining for the layout "));
  EXPECT_THAT(relayout.out, HasSubstr("no job had to move"));
  int64_t service = SubmitQ("--kind inference --gpus 1 --gpu-model H200 -- sleep 600");
  WaitJob(service, [](const json& j) { return j.value("state", "") == "running"; });
  CliRun scale = Cli(absl::StrCat("scale ", service, " --replicas 2"));
  EXPECT_THAT(scale.out,
              HasSubstr(absl::StrCat("job ", service, " now keeps 2 replica(s) running")));
  CliRun drain = Cli("drain gpu-a");
  EXPECT_THAT(drain.out, HasSubstr("node gpu-a drained"));
  EXPECT_THAT(drain.out, Not(HasSubstr("[")));
  Cli(absl::StrCat("cancel ", service));
}

TEST_F(CliTest, NodesCountFreeAndUsedGpusPerModelAndMode) {
  int64_t id = SubmitQ("--gpus 1 --gpu-model H200 -- sleep 30");
  WaitJob(id, [](const json& j) { return j.value("state", "") == "running"; });
  CliRun nodes = Cli("nodes");
  EXPECT_THAT(nodes.out, HasSubstr("MODEL        MODE        TOTAL  IN USE  FREE  DOWN"));
  EXPECT_THAT(nodes.out, HasSubstr("H200-141GB   exclusive       3       1     2     0"));
  EXPECT_THAT(nodes.out, HasSubstr("L40S         shared          2       0     2     0  2.00 GPU"));
  Cli(absl::StrCat("cancel ", id));
}

// A member's filters never reach another tenant's jobs (a bulk cancel by filter used to answer
// "no active job N" for each of them), and per-GPU grants are for admins.
TEST_F(CliTest, AMembersFiltersSeeOnlyItsOwnTenant) {
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/apply", json::array({
                                     {{"kind", "tenant"}, {"name", "acme"}},
                                     {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                     {{"kind", "tenant"}, {"name", "globex"}},
                                     {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                                 }))
          .ok());
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/users",
                {{"name", "ann"}, {"role", "member"}, {"tenant", "acme"}, {"project", "vision"}})
          .ok());
  auto token = Api().Post("/api/v1/tokens", {{"user", "ann"}, {"expires_in", "1d"}});
  ASSERT_TRUE(token.ok()) << token.status();
  json other = Submit({{"tenant", "globex"},
                       {"project", "nlp"},
                       {"name", "secret-plan"},
                       {"command", {"sleep", "60"}},
                       {"resources", {{"gpus", 1}, {"gpu_model", {"A100-80GB"}}}}},
                      "", true);
  const std::string ann = (*token)["token"].get<std::string>();
  CliRun cancel = Cli("cancel --name 'secret*' -o json", "", 60, ann);
  json out = json::parse(cancel.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << cancel.out;
  EXPECT_TRUE(out["cancelled"].empty()) << cancel.out;
  EXPECT_TRUE(out["refused"].empty()) << cancel.out;  // not even named
  EXPECT_EQ(
      Api().Get(absl::StrCat("/api/v1/jobs/", other["id"].get<int64_t>()))->value("state", ""),
      "queued");
  CliRun listed = Cli("ls -a --name 'secret*'", "", 60, ann);
  EXPECT_EQ(listed.exit, 0) << listed.out;
  EXPECT_EQ(listed.out.find("secret"), std::string::npos);
  json nodes = json::parse(Cli("nodes -o json", "", 60, ann).out, nullptr, false);
  ASSERT_TRUE(nodes.is_array());
  for (const json& n : nodes) {
    for (const json& g : n["gpus"]) EXPECT_FALSE(g.contains("grants")) << g.dump();
  }
}

TEST_F(CliTest, TheReferenceInDocsIsGeneratedFromTheCommands) {
  CliRun reference = RunShell(absl::StrCat(CARVE_BINARY, " cli-reference"));
  EXPECT_EQ(reference.out, Slurp(CARVE_SOURCE_DIR "/docs/cli.md"))
      << "docs/cli.md is out of date: run scripts/cli-reference";
}

}  // namespace
}  // namespace carve::it
