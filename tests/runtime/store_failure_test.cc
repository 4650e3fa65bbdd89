// A control plane and its API server, in process, on a store that fails on request
// (adapters/store/faulty_store.h) over a real SQLite file: a failed commit answers 503, /readyz
// says why, nothing is committed after it, and a restart on the healthy file finds every
// acknowledged change and nothing the server refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "adapters/store/faulty_store.h"
#include "httplib.h"
#include "runtime/api_server.h"
#include "runtime/control_plane.h"
#include "runtime/log.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const Principal kAdmin{"admin", Role::kAdmin, "", "", "t-admin"};
constexpr char kAdminToken[] = "store-failure-admin-token";

class StoreFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("store-failure-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    OpenStore();
    faulty_ = std::make_unique<FaultyStore>(sqlite_.get());
    OpenControl(faulty_.get());
  }

  void TearDown() override {
    SetLogSinkForTest(nullptr);
    api_.reset();
    cp_.reset();
  }

  void OpenStore() {
    auto store = OpenSqliteStore((dir_ / "carve.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    sqlite_ = *std::move(store);
  }

  void OpenControl(Store* store) {
    ControlPlane::Options options;
    options.log_dir = (dir_ / "logs").string();
    auto cp = ControlPlane::Open(store, &catalog_, options, [] { return int64_t{1} << 50; });
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = *std::move(cp);
    ASSERT_TRUE(cp_->AddToken(kAdminToken, "admin", Role::kAdmin).ok());
  }

  // Serves the API on a free port. The scheduling loop runs only when a submission kicks it.
  void Serve() {
    ApiServer::Options options;
    options.port = 0;
    options.schedule_interval_ms = 3'600'000;
    api_ = std::make_unique<ApiServer>(cp_.get(), options);
    ASSERT_TRUE(api_->Start().ok());
    http_ = std::make_unique<httplib::Client>("127.0.0.1", api_->port());
    http_->set_bearer_token_auth(kAdminToken);
  }

  // The server stops; a new one opens the same file through a healthy store.
  void Restart() {
    api_.reset();
    cp_.reset();
    faulty_.reset();
    sqlite_.reset();
    OpenStore();
    OpenControl(sqlite_.get());
  }

  absl::StatusOr<json> Submit(const std::string& name) {
    return cp_->Submit({{"name", name}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}}, "",
                       kAdmin);
  }

  httplib::Result PostJob(const std::string& name) {
    json body = {{"name", name}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
    return http_->Post("/api/v1/jobs", body.dump(), "application/json");
  }

  std::vector<std::string> EventTypes(const std::string& subject) {
    std::vector<std::string> types;
    auto events = sqlite_->Events(0, 1000);
    EXPECT_TRUE(events.ok()) << events.status();
    for (const StoredEvent& e : *events) {
      if (e.subject == subject) types.push_back(e.type);
    }
    return types;
  }

  std::filesystem::path dir_;
  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  std::unique_ptr<Store> sqlite_;
  std::unique_ptr<FaultyStore> faulty_;
  std::unique_ptr<ControlPlane> cp_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<httplib::Client> http_;
};

// The API answers 503 with the store's error, /readyz fails and says why, every other call is
// refused too (memory is ahead of the store), and a restart finds the acknowledged job only.
TEST_F(StoreFailureTest, FailedCommitAnswers503AndReadyzSaysWhy) {
  Serve();
  auto first = PostJob("acknowledged");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 201) << first->body;
  faulty_->FailAllCommits();

  auto refused = PostJob("refused");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_THAT(refused->body, HasSubstr("the store failed to commit"));
  EXPECT_THAT(refused->body, HasSubstr("injected fault"));

  auto ready = http_->Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_THAT(ready->body, HasSubstr("injected fault"));
  auto list = http_->Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 503) << "a read after a failed commit shows what is not on disk";
  auto alive = http_->Get("/healthz");
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive->status, 200);

  Restart();
  Serve();
  EXPECT_EQ(http_->Get("/readyz")->status, 200);
  auto jobs = json::parse(http_->Get("/api/v1/jobs?all=true")->body);
  ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
  EXPECT_EQ(jobs[0]["name"], "acknowledged");
  EXPECT_TRUE(sqlite_->VerifyEventChain().ok());
}

// Once a commit failed, no later change reaches the store, even if the store works again: each
// was made on top of the lost one (here: a cancel of a job whose submission was lost).
TEST_F(StoreFailureTest, NothingIsCommittedAfterAFailedCommit) {
  ASSERT_TRUE(Submit("acknowledged").ok());
  faulty_->FailNthCommit(1);
  auto lost = Submit("lost");
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable);
  auto cancel = cp_->Cancel(2, kAdmin);
  EXPECT_EQ(cancel.status().code(), absl::StatusCode::kUnavailable) << cancel.status();
  auto other = cp_->Cancel(1, kAdmin);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kUnavailable) << other.status();
  EXPECT_EQ(cp_->ScheduleOnce().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(cp_->healthy());

  Restart();
  EXPECT_TRUE(EventTypes("job/2").empty()) << "job 2 was never acknowledged";
  EXPECT_THAT(EventTypes("job/1"), ::testing::ElementsAre("job.submitted"));
  auto job = cp_->GetJob(1);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["state"], "queued");
  EXPECT_TRUE(sqlite_->VerifyEventChain().ok());
}

// A commit written but reported failed (fsync): the caller is told 503, so it may or may not be
// there after a restart; everything acknowledged before it is.
TEST_F(StoreFailureTest, CommitWrittenButReportedFailedLosesNothingAcknowledged) {
  ASSERT_TRUE(Submit("a").ok());
  ASSERT_TRUE(Submit("b").ok());
  faulty_->FailNthCommitAfterWrite(1);
  EXPECT_EQ(Submit("unknown").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(cp_->healthy());
  Restart();
  EXPECT_TRUE(cp_->healthy());
  EXPECT_TRUE(cp_->GetJob(1).ok());
  EXPECT_TRUE(cp_->GetJob(2).ok());
  EXPECT_TRUE(Submit("after").ok());
  EXPECT_TRUE(sqlite_->VerifyEventChain().ok());
}

// Slow commits delay answers but lose nothing: concurrent submissions share commits.
TEST_F(StoreFailureTest, SlowCommitsAcknowledgeEverySubmission) {
  faulty_->SlowCommits(absl::Milliseconds(20));
  std::vector<std::thread> clients;
  std::atomic<int> acknowledged{0};
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 5; ++i) acknowledged += Submit(absl::StrCat("c", c, "-", i)).ok();
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(acknowledged, 40);
  EXPECT_TRUE(cp_->healthy());
  Restart();
  int64_t next = 0;
  auto jobs = cp_->JobsPage(true, {}, kAdmin, 0, 1000, &next);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 40u);
}

// The failure is in the operator's log once, at error level, with the store's own message.
TEST_F(StoreFailureTest, FailureIsLoggedOnceAtErrorLevel) {
  std::vector<std::string> errors;
  std::mutex mu;
  SetLogSinkForTest([&](LogLevel level, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    if (level == LogLevel::kError) errors.push_back(line);
  });
  faulty_->FailAllCommits();
  EXPECT_FALSE(Submit("a").ok());
  EXPECT_FALSE(Submit("b").ok());
  EXPECT_FALSE(cp_->ScheduleOnce().ok());
  SetLogSinkForTest(nullptr);
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  EXPECT_THAT(errors[0], HasSubstr("the store failed to commit"));
  EXPECT_THAT(errors[0], HasSubstr("injected fault"));
}

// A store that cannot be read is not an empty or broken log: the event list answered 200 with no
// events, one event 404, and the chain's check 200 saying the chain was broken.
TEST_F(StoreFailureTest, AnEventLogThatCannotBeReadAnswers503NotAnEmptyOrBrokenLog) {
  Serve();
  auto job = PostJob("logged");
  ASSERT_TRUE(job);
  ASSERT_EQ(job->status, 201) << job->body;
  faulty_->FailReads();
  for (const char* path : {"/api/v1/events", "/api/v1/events/1", "/api/v1/audit/verify",
                           "/api/v1/audit?format=json"}) {
    auto answer = http_->Get(path);
    ASSERT_TRUE(answer) << path;
    EXPECT_EQ(answer->status, 503) << path << ": " << answer->body;
    EXPECT_THAT(answer->body, HasSubstr("injected read failure")) << path;
  }
  faulty_->Heal();
  auto events = http_->Get("/api/v1/events");
  ASSERT_TRUE(events);
  ASSERT_EQ(events->status, 200);
  EXPECT_FALSE(json::parse(events->body).empty());
  auto verify = http_->Get("/api/v1/audit/verify");
  ASSERT_TRUE(verify);
  EXPECT_EQ(json::parse(verify->body)["ok"], true) << verify->body;
}

}  // namespace
}  // namespace carve
