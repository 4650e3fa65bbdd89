// The integration harness: real `carve server` and `carve agent` processes in a temporary
// directory, with helpers to submit jobs and wait for their end. Tests derive from PlatformTest
// (override Nodes() for other simulated nodes).
#ifndef CARVE_TESTS_INTEGRATION_HARNESS_H_
#define CARVE_TESTS_INTEGRATION_HARNESS_H_

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ports/process.h"
#include "runtime/api_client.h"
#include "runtime/control_plane.h"
#include "runtime/records.h"
#include "runtime/states.h"

extern char** environ;

namespace carve::it {

using json = nlohmann::json;

// Gone, or a zombie waiting for init to reap it (its process group was killed).
inline bool Dead(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string stat;
  std::getline(std::ifstream(absl::StrCat("/proc/", pid, "/stat")), stat);
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

inline pid_t Spawn(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Stops `pid`, a child of this process, and returns once all its threads have stopped. kill()
// alone returns before the stop is complete: only one thread is woken to take the signal, and on
// a loaded machine the others keep running, and answering requests, until it runs.
inline bool StopChild(pid_t pid) {
  if (kill(pid, SIGSTOP) != 0) return false;
  int status = 0;
  pid_t got = 0;
  do {
    got = waitpid(pid, &status, WUNTRACED);
  } while (got < 0 && errno == EINTR);
  return got == pid && WIFSTOPPED(status);
}

inline void Kill(pid_t pid, int sig) {
  if (pid <= 0) return;
  kill(pid, sig);
  waitpid(pid, nullptr, 0);
}

// Whether `job`, as the REST API shows it, is in a final state.
inline bool JobEnded(const nlohmann::json& job) {
  const auto state = job.find("state");
  if (state == job.end() || !state->is_string()) return false;
  const std::optional<JobState> parsed = ParseJobState(state->get<std::string>());
  return parsed && IsFinal(*parsed);
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

using NodeList = std::vector<std::pair<std::string, std::string>>;  // name, devices YAML

inline const NodeList kNodes = {
    {"gpu-a",
     "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"
     "  - {model: L40S, count: 2, mode: shared}\n"},
    {"gpu-b",
     "gpus:\n  - {model: A100-80GB, count: 1, mode: partition, layout: dynamic}\n"
     "  - {model: H200, count: 1, mode: exclusive}\n"},
};

class PlatformTest : public ::testing::Test {
 protected:
  // The simulated nodes the test starts agents for.
  virtual const NodeList& Nodes() const { return kNodes; }
  // More `carve agent` flags for node `i` (e.g. --label pool=a).
  virtual std::vector<std::string> AgentFlags(int /*i*/) const { return {}; }

  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("carve-it-", getpid(), "-", counter_++);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(Shared());
    // Jobs run as their tenant's user: they write what a test reads back into Shared().
    std::filesystem::permissions(Shared(),
                                 std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
    StartServer();
    if (HasFatalFailure()) return;
    for (size_t i = 0; i < Nodes().size(); ++i) {
      const auto& [name, yaml] = Nodes()[i];
      std::ofstream((dir_ / absl::StrCat(name, ".yaml")).string()) << yaml;
      agents_.push_back(StartAgent(static_cast<int>(i)));
    }
    ASSERT_TRUE(Eventually([&] {
      auto nodes = Api().Get("/api/v1/nodes");
      return nodes.ok() && nodes->size() == Nodes().size();
    })) << ServerLog()
        << Slurp((dir_ / "gpu-a.log").string());
  }

  pid_t StartAgent(int i) {
    const std::string& name = Nodes()[i].first;
    std::vector<std::string> args = {
        CARVE_BINARY,     "agent",
        "--server",       url_,
        "--token-file",   (dir_ / "data/agent.token").string(),
        "--node",         name,
        "--devices",      (dir_ / absl::StrCat(name, ".yaml")).string(),
        "--cpu",          "16",
        "--memory",       "64Gi",
        "--data",         (dir_ / "agents" / name).string(),
        "--jobs-dir",     (dir_ / "jobs" / name).string(),
        "--heartbeat-ms", heartbeat_ms_};
    if (!ca_.empty()) args.insert(args.end(), {"--ca", ca_});
    args.insert(args.end(), agent_args_.begin(), agent_args_.end());
    std::vector<std::string> flags = AgentFlags(i);
    args.insert(args.end(), flags.begin(), flags.end());
    return Spawn(args, (dir_ / absl::StrCat(name, ".log")).string());
  }

  void TearDown() override {
    for (pid_t a : agents_) Kill(a, SIGTERM);
    Kill(server_, SIGKILL);
    // An agent stopped with SIGTERM leaves its replicas running (a restart adopts them); the test
    // is over, so its agents' cgroups go with it, as a restarted agent's leftovers do
    // (Agent::SweepGroups). Left, they piled up by the hundred on a machine that ran the suite
    // often, and a job looking for its own group among them ran out of time.
    std::unique_ptr<ProcessLauncher> launcher = MakePosixLauncher("carve");
    for (const auto& [name, yaml] : Nodes()) {
      const std::string data = (dir_ / "agents" / name).string();
      SweptGroups swept =
          launcher->Sweep(absl::StrCat(name, "-", Sha256Hex(data).substr(0, 8), "-job-"), {});
      EXPECT_TRUE(swept.failed.empty()) << absl::StrJoin(swept.failed, "; ");
    }
    // --check-scheduler-state: the cluster the scheduler kept between cycles always matched
    // the one rebuilt from the job records.
    EXPECT_EQ(ServerLog().find("the cluster kept between cycles differs"), std::string::npos)
        << ServerLog();
  }

  // Starts `carve server` on a free port the first time and on the same port after that (a
  // restart keeps the URL the agents know); the server writes its URL to data/server.
  void StartServer() {
    std::filesystem::remove(dir_ / "data/server");
    std::vector<std::string> args = {CARVE_BINARY,
                                     "server",
                                     "--data",
                                     (dir_ / "data").string(),
                                     "--listen",
                                     absl::StrCat("127.0.0.1:", port_),
                                     "--schedule-interval-ms",
                                     schedule_interval_ms_,
                                     "--node-timeout-ms",
                                     node_timeout_ms_,
                                     "--lost-after-ms",
                                     "500",
                                     "--check-scheduler-state"};
    args.insert(args.end(), server_args_.begin(), server_args_.end());
    server_ = Spawn(args, (dir_ / "server.log").string());
    Eventually(
        [&] {
          std::string url = Slurp((dir_ / "data/server").string());
          return (!url.empty() && url.back() == '\n') || Dead(server_);
        },
        10);
    url_ = Slurp((dir_ / "data/server").string());
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
    ASSERT_FALSE(url_.empty()) << "the server did not start: " << ServerLog();
    size_t colon = url_.rfind(':');
    ASSERT_NE(colon, std::string::npos) << url_;
    port_ = std::stoi(url_.substr(colon + 1));
    token_ = Slurp((dir_ / "data/admin.token").string());
  }

  std::string ServerLog() {
    return "\n--- server.log ---\n" + Slurp((dir_ / "server.log").string());
  }

  ApiClient Api() { return ApiClient(url_, token_, ca_); }

  // GET/POST as the admin; a failed call fails the test (with the server's log) and gives null.
  json ApiGet(const std::string& path) {
    auto r = Api().Get(path);
    if (r.ok()) return *r;
    ADD_FAILURE() << "GET " << path << ": " << r.status() << ServerLog();
    return json();
  }
  json ApiPost(const std::string& path, const json& body) {
    auto r = Api().Post(path, body);
    if (r.ok()) return *r;
    ADD_FAILURE() << "POST " << path << ": " << r.status() << ServerLog();
    return json();
  }

  // A directory every job may write (mode 1777), for files a test reads back.
  std::filesystem::path Shared() const { return dir_ / "shared"; }

  // `unschedulable`: queue it even when no node could ever hold it (?allow_unschedulable=true).
  json Submit(json spec, const std::string& key = "", bool unschedulable = false) {
    std::map<std::string, std::string> headers;
    if (!key.empty()) headers["Idempotency-Key"] = key;
    auto job = Api().Post(unschedulable ? "/api/v1/jobs?allow_unschedulable=true" : "/api/v1/jobs",
                          spec, headers);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : json();
  }

  json WaitFinal(int64_t id, int seconds = 20) {
    json job;
    for (int i = 0; i < seconds * 20; ++i) {
      auto got = Api().Get(absl::StrCat("/api/v1/jobs/", id));
      if (!got.ok()) {
        ADD_FAILURE() << "job " << id << ": " << got.status() << ServerLog();
        return json();
      }
      job = *got;
      if (JobEnded(job)) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " did not end: " << job.dump(2);
    return job;
  }

  // Polls `done` every 50 ms for up to `seconds`; true once it holds.
  template <typename Pred>
  bool Eventually(Pred done, int seconds = 20) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  json Job(int64_t id) { return ApiGet(absl::StrCat("/api/v1/jobs/", id)); }

  // A new member of `tenant`'s `project` and a token of theirs for a day.
  std::string MemberToken(const std::string& name, const std::string& tenant,
                          const std::string& project) {
    EXPECT_TRUE(
        Api()
            .Post("/api/v1/users",
                  {{"name", name}, {"role", "member"}, {"tenant", tenant}, {"project", project}})
            .ok());
    auto t = Api().Post("/api/v1/tokens", {{"user", name}, {"expires_in", "1d"}});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? (*t)["token"].get<std::string>() : "";
  }

  json Node(const std::string& name) {
    const json nodes = ApiGet("/api/v1/nodes");
    for (const json& n : nodes) {
      if (n["name"] == name) return n;
    }
    return json();
  }

  // Events of `type` (all of them when empty), oldest first.
  json EventsOf(const std::string& type) {
    json out = json::array();
    const json events = ApiGet("/api/v1/events?after=0&limit=100000");
    for (const json& e : events) {
      if (type.empty() || e["type"] == type) out.push_back(e);
    }
    return out;
  }

  // The whole log, page by page (the server answers at most 1 MiB per request).
  std::string Logs(int64_t id) {
    std::string all;
    while (true) {
      std::map<std::string, std::string> headers;
      auto text =
          Api().GetText(absl::StrCat("/api/v1/jobs/", id, "/logs?offset=", all.size()), &headers);
      if (!text.ok()) return text.status().ToString();
      all += *text;
      size_t size = 0;
      if (!absl::SimpleAtoi(headers["X-Carve-Log-Size"], &size) || text->empty() ||
          all.size() >= size) {
        return all;
      }
    }
  }

  static inline int counter_ = 0;
  int port_ = 0;  // 0 until the first StartServer: any free port
  std::filesystem::path dir_;
  std::string url_;
  std::string token_;
  pid_t server_ = 0;
  std::vector<std::string> server_args_;     // more `carve server` flags (set before SetUp)
  std::string heartbeat_ms_ = "100";         // the agents' heartbeat period (set before SetUp)
  std::string schedule_interval_ms_ = "50";  // the server's cycle period (set before SetUp)
  std::string node_timeout_ms_ = "1000";     // silence before a node is not-ready (before SetUp)
  std::vector<std::string> agent_args_;      // more `carve agent` flags (set before SetUp)
  std::string ca_;  // the PEM CA that Api() and the agents trust (TLS tests; set before SetUp)
  std::vector<pid_t> agents_;
};

}  // namespace carve::it

#endif  // CARVE_TESTS_INTEGRATION_HARNESS_H_
