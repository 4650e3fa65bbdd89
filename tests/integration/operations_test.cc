// Operating the server: the operator's log on stderr (--log-level), and a store that fails under
// the real `carve server` (its data directory on a full file system).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

json OneGpuJob(const std::string& name) {
  return {{"name", name}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
}

class OperationsTest : public PlatformTest {};

// At the default level (info) the server logs what it decided, one line each, after the commit.
TEST_F(OperationsTest, ServerLogsItsDecisions) {
  json job = Submit(OneGpuJob("logged"));
  ASSERT_TRUE(job.is_object());
  int64_t id = job["id"];
  EXPECT_EQ(WaitFinal(id)["state"], "succeeded");
  std::string scheduled = absl::StrCat(" info job.scheduled job/", id, " by scheduler: placed on");
  std::string ended = absl::StrCat(" info job.succeeded job/", id, " by scheduler");
  ASSERT_TRUE(Eventually([&] {
    std::string log = Slurp((dir_ / "server.log").string());
    return log.find(scheduled) != std::string::npos && log.find(ended) != std::string::npos;
  })) << ServerLog();
  std::string log = Slurp((dir_ / "server.log").string());
  EXPECT_THAT(log, HasSubstr(" info store opened: "));
  EXPECT_THAT(log, HasSubstr(" info API listening on 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr(" info node.registered node/gpu-a by agent:gpu-a"));
  EXPECT_THAT(log, Not(HasSubstr("job.submitted"))) << "routine steps are debug";
}

class QuietServerTest : public PlatformTest {
 protected:
  void SetUp() override {
    server_args_ = {"--log-level", "warn"};
    PlatformTest::SetUp();
  }
};

TEST_F(QuietServerTest, LogLevelWarnHidesDecisions) {
  json job = Submit(OneGpuJob("quiet"));
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(WaitFinal(job["id"])["state"], "succeeded");
  EXPECT_THAT(Slurp((dir_ / "server.log").string()), Not(HasSubstr(" info ")));
}

// `carve server` with its data directory on a small tmpfs that a file then fills: the commit
// that finds the disk full answers 503 with SQLite's error, /readyz fails and says why, every
// other call is refused, the server keeps running, and logs it once; restarted with room again,
// it has every acknowledged job.
class FullDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("carve-full-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "data");
    if (::mount("tmpfs", (dir_ / "data").c_str(), "tmpfs", 0, "size=4m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
    }
    mounted_ = true;
  }

  void TearDown() override {
    Kill(server_, SIGKILL);
    if (mounted_) ::umount2((dir_ / "data").c_str(), MNT_DETACH);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void StartServer() {
    std::filesystem::remove(dir_ / "data/server");
    server_ = Spawn({CARVE_BINARY, "server", "--data", (dir_ / "data").string(), "--listen",
                     "127.0.0.1:0", "--schedule-interval-ms", "50"},
                    (dir_ / "server.log").string());
    for (int i = 0; i < 400; ++i) {
      url_ = Slurp((dir_ / "data/server").string());
      if ((!url_.empty() && url_.back() == '\n') || Dead(server_)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    while (!url_.empty() && url_.back() == '\n') url_.pop_back();
    ASSERT_FALSE(url_.empty()) << Log();
    token_ = Slurp((dir_ / "data/admin.token").string());
  }

  // Writes a file until the file system is full.
  void Fill() {
    std::ofstream filler((dir_ / "data/filler").string(), std::ios::binary);
    std::string block(64 << 10, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size())) &&
           filler.flush()) {
    }
  }

  std::string Log() { return "\n--- server.log ---\n" + Slurp((dir_ / "server.log").string()); }

  std::filesystem::path dir_;
  bool mounted_ = false;
  pid_t server_ = 0;
  std::string url_;
  std::string token_;
};

TEST_F(FullDiskTest, FullDiskAnswers503AndLosesNothingAcknowledged) {
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  ApiClient api(url_, token_);
  std::vector<int64_t> acknowledged;
  for (int i = 0; i < 3; ++i) {
    auto job = api.Post("/api/v1/jobs", OneGpuJob(absl::StrCat("before-", i)));
    ASSERT_TRUE(job.ok()) << job.status() << Log();
    acknowledged.push_back((*job)["id"]);
  }
  Fill();
  // SQLite may still have room in pages it holds: submit until a commit needs a new one.
  absl::Status refused;
  for (int i = 0; i < 500 && refused.ok(); ++i) {
    auto job = api.Post("/api/v1/jobs", OneGpuJob(absl::StrCat("after-", i)));
    if (job.ok()) acknowledged.push_back((*job)["id"]);
    refused = job.status();
  }
  ASSERT_FALSE(refused.ok()) << "the store never failed" << Log();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("the store failed to commit"));
  httplib::Client http(url_);
  auto ready = http.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_THAT(ready->body, HasSubstr("the store failed to commit"));
  EXPECT_EQ(api.Get("/api/v1/jobs").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Dead(server_)) << Log();
  std::string log = Slurp((dir_ / "server.log").string());
  EXPECT_THAT(log, HasSubstr(" error the store failed to commit")) << Log();

  std::filesystem::remove(dir_ / "data/filler");
  Kill(server_, SIGTERM);
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  ApiClient again(url_, token_);
  auto jobs = again.Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(jobs.ok()) << jobs.status() << Log();
  std::set<int64_t> found;
  for (const json& j : *jobs) found.insert(j["id"].get<int64_t>());
  for (int64_t id : acknowledged) EXPECT_TRUE(found.count(id)) << "acknowledged job " << id;
  auto chain = again.Get("/api/v1/audit/verify");
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_TRUE((*chain)["ok"].get<bool>()) << chain->dump();
}

}  // namespace
}  // namespace carve
