// Several `carve server`s on one PostgreSQL database (issue 17), against a private PostgreSQL the
// test starts: exactly one leads; SIGKILL it during 1,000 concurrent submissions and a follower
// takes over (the time is printed), with no acknowledged job lost or duplicated, the chain
// verified and the job running on the agent untouched; a leader paused past its lease and resumed
// writes nothing (its late commits are refused) and stops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "adapters/private_postgres.h"
#include "httplib.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

const NodeList kNoNodes = {};
constexpr const char* kNodeYaml = "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n";

class LeaderTest : public PlatformTest {
 protected:
  // The agent is started here, with every server's address.
  const NodeList& Nodes() const override { return kNoNodes; }

  void SetUp() override {
    const std::string why_not =
        pg_.Start(absl::StrCat(::testing::TempDir(), "carve-pg-leader-", getpid()));
    ASSERT_EQ(why_not, "") << "the private PostgreSQL did not start";
    pg_.CreateDatabase("carve");
    server_args_ = {"--store", pg_.Url("carve"), "--lease-ms", "1500", "--name", "s1"};
    node_timeout_ms_ = "5000";  // the agent's heartbeats move to the new leader in time
    PlatformTest::SetUp();      // the first server leads
    ASSERT_FALSE(HasFatalFailure());
    urls_ = {url_};
    pids_ = {server_};
    for (int k = 2; k <= 3; ++k) {
      const std::filesystem::path data = dir_ / absl::StrCat("data-", k);
      pids_.push_back(Spawn(
          {CARVE_BINARY, "server", "--data", data.string(), "--listen", "127.0.0.1:0", "--store",
           pg_.Url("carve"), "--lease-ms", "1500", "--name", absl::StrCat("s", k),
           "--schedule-interval-ms", "50", "--node-timeout-ms", "5000", "--lost-after-ms", "5000"},
          (dir_ / absl::StrCat("server-", k, ".log")).string()));
      ASSERT_TRUE(Eventually([&] {
        std::string url = Slurp((data / "server").string());
        return !url.empty() && url.back() == '\n';
      })) << Logs();
      std::string url = Slurp((data / "server").string());
      url.pop_back();
      urls_.push_back(url);
      ASSERT_TRUE(Eventually([&] { return Role(url) == "follower"; })) << Logs();
    }
    all_ = absl::StrJoin(urls_, ",");
    std::ofstream((dir_ / "gpu-a.yaml").string()) << kNodeYaml;
    agents_.push_back(Spawn({CARVE_BINARY,     "agent",
                             "--server",       all_,
                             "--token-file",   (dir_ / "data/agent.token").string(),
                             "--node",         "gpu-a",
                             "--devices",      (dir_ / "gpu-a.yaml").string(),
                             "--cpu",          "16",
                             "--memory",       "64Gi",
                             "--data",         (dir_ / "agents/gpu-a").string(),
                             "--jobs-dir",     (dir_ / "jobs/gpu-a").string(),
                             "--heartbeat-ms", "100"},
                            (dir_ / "gpu-a.log").string()));
    ASSERT_TRUE(Eventually([&] {
      auto nodes = Api().Get("/api/v1/nodes");
      return nodes.ok() && nodes->size() == 1;
    })) << Logs();
  }

  void TearDown() override {
    for (size_t k = 1; k < pids_.size(); ++k) Kill(pids_[k], SIGKILL);
    PlatformTest::TearDown();
    // The agent's job groups, as the harness sweeps those of the agents it starts.
    const std::string data = (dir_ / "agents/gpu-a").string();
    SweptGroups swept = MakePosixLauncher("carve")->Sweep(
        absl::StrCat("gpu-a-", Sha256Hex(data).substr(0, 8), "-job-"), {});
    EXPECT_TRUE(swept.failed.empty()) << absl::StrJoin(swept.failed, "; ");
  }

  // "leader", "follower" or "" (no answer), as GET /readyz says.
  static std::string Role(const std::string& url) {
    httplib::Client c(url);
    c.set_connection_timeout(1, 0);
    c.set_read_timeout(1, 0);  // a paused server accepts and never answers
    auto r = c.Get("/readyz");
    if (!r) return "";
    json j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j.value("role", "") : "";
  }

  // The server that leads now (its index), or -1.
  int Leader() {
    for (size_t k = 0; k < urls_.size(); ++k) {
      if (!Dead(pids_[k]) && Role(urls_[k]) == "leader") return static_cast<int>(k);
    }
    return -1;
  }

  std::string Logs() {
    std::string all = ServerLog();
    for (int k = 2; k <= 3; ++k) {
      all += absl::StrCat("\n--- server-", k, ".log ---\n",
                          Slurp((dir_ / absl::StrCat("server-", k, ".log")).string()));
    }
    return all;
  }

  testing_pg::PrivatePostgres pg_;
  std::vector<std::string> urls_;
  std::vector<pid_t> pids_;
  std::string all_;  // every server's URL, comma-separated, as clients and agents are given
};

TEST_F(LeaderTest, AFollowerTakesOverFromAKilledLeaderAndLosesNoAcknowledgedJob) {
  EXPECT_EQ(Leader(), 0);
  const int64_t running = Submit({{"command", {"sleep", "300"}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(running)["state"] == "running"; })) << Logs();
  const json before = Job(running)["replicas"][0];

  std::mutex mu;
  std::map<std::string, int64_t> acked;  // idempotency key -> job id
  std::atomic<int> sent{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      ApiClient api(all_, token_);
      for (int i = 0; i < 250; ++i) {
        const std::string key = absl::StrCat("c", c, "-", i);
        ++sent;
        // A client retries what was not acknowledged, with the same key, until a leader answers.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
          // Queued, not run: the submissions' commits are what is tested, not 1,000 processes.
          auto job = api.Post("/api/v1/jobs?allow_unschedulable=true",
                              json{{"name", key},
                                   {"command", {"true"}},
                                   {"resources", {{"gpus", 8}, {"gpu_model", {"H200"}}}}},
                              {{"Idempotency-Key", key}});
          if (job.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            acked[key] = (*job)["id"];
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }
  while (sent < 300) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Kill(pids_[0], SIGKILL);
  server_ = 0;  // reaped
  const auto killed = std::chrono::steady_clock::now();
  int next = -1;
  ASSERT_TRUE(Eventually([&] { return (next = Leader()) > 0; }, 30)) << Logs();
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::cout << "failover: server s" << next + 1 << " leads " << took_s
            << " s after the leader was killed (lease 1.5 s)\n";
  EXPECT_LT(took_s, 5.0) << Logs();
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(acked.size(), 1000u) << "every submission was acknowledged, before or after";

  url_ = urls_[next];
  auto jobs = Api().Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::map<std::string, int> by_name;
  std::set<int64_t> ids;
  for (const json& j : *jobs) {
    ++by_name[j.value("name", "")];
    ids.insert(j["id"].get<int64_t>());
  }
  for (const auto& [key, id] : acked) {
    EXPECT_EQ(by_name[key], 1) << key << " lost or duplicated";
    EXPECT_TRUE(ids.count(id)) << key;
  }
  json verify = ApiGet("/api/v1/audit/verify");
  EXPECT_EQ(verify["ok"], true) << verify.dump(2);
  json after = Job(running);
  EXPECT_EQ(after["state"], "running") << after.dump(2);
  EXPECT_EQ(after["attempt"], 0);
  EXPECT_EQ(after["replicas"][0]["pid"], before["pid"]) << "the job's process was not touched";
}

TEST_F(LeaderTest, APausedLeaderIsFencedAndStopsWhenResumed) {
  ASSERT_EQ(Leader(), 0);
  const size_t jobs_before = Api().Get("/api/v1/jobs?all=true")->size();
  ASSERT_TRUE(StopChild(pids_[0]));
  // A submission sent to the paused leader alone: it waits in the kernel until SIGCONT.
  auto late = std::async(std::launch::async, [&] {
    return ApiClient(urls_[0], token_).Post("/api/v1/jobs", json{{"command", {"true"}}});
  });
  int next = -1;
  ASSERT_TRUE(Eventually([&] { return (next = Leader()) > 0; }, 30)) << Logs();
  url_ = urls_[next];
  const int64_t fresh = Submit({{"command", {"true"}}})["id"];
  kill(pids_[0], SIGCONT);
  auto late_reply = late.get();
  EXPECT_FALSE(late_reply.ok()) << "a commit of the deposed leader was acknowledged: "
                                << (late_reply.ok() ? late_reply->dump() : "") << Logs();
  int status = 0;
  ASSERT_EQ(waitpid(pids_[0], &status, 0), pids_[0]);
  server_ = 0;  // reaped
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << status << Logs();
  // Lost at its first renewal, or stopped by the watchdog first: both name the lease.
  EXPECT_THAT(ServerLog(), ::testing::HasSubstr("the leader's lease (term 1)"));
  auto jobs = Api().Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), jobs_before + 1) << "only the new leader's job was written";
  EXPECT_EQ(WaitFinal(fresh)["state"], "succeeded");
  json verify = ApiGet("/api/v1/audit/verify");
  EXPECT_EQ(verify["ok"], true) << verify.dump(2);
}

}  // namespace
}  // namespace carve::it
