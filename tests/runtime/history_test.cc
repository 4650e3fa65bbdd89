// Finished jobs leave memory for the store (kind job.done): they stay listed and readable, across
// restarts and from stores written before job.done existed, to exactly whom they were before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "adapters/store/faulty_store.h"
#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"
#include "runtime/job_spec.h"

namespace carve {
namespace {

using json = nlohmann::json;

constexpr int64_t kT0 = 1'800'000'000'000'000;
const Principal kAdmin{"admin", Role::kAdmin, "", "", "t-admin", "u-admin"};
const Principal kAgent{"n1", Role::kNode, "", "", "t-node"};
const Principal kAcme{"ann", Role::kMember, "acme", "default", "t-ann", "u-ann"};
const Principal kGlobex{"gus", Role::kMember, "globex", "default", "t-gus", "u-gus"};

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("history-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Open();
    json gpus = json::array();
    for (int i = 0; i < 4; ++i) {
      gpus.push_back({{"index", i},
                      {"uuid", absl::StrCat("GPU-", i)},
                      {"model", "H200"},
                      {"memory_mib", 143771},
                      {"mode", "exclusive"}});
    }
    ASSERT_TRUE(cp_->Register({{"name", "n1"},
                               {"cpu_milli", 64000},
                               {"memory_mib", 262144},
                               {"backend", "simulated"},
                               {"gpus", gpus}},
                              kAgent)
                    .ok());
    ASSERT_TRUE(cp_->Apply(json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                        {{"kind", "tenant"}, {"name", "globex"}}}),
                           kAdmin)
                    .ok());
  }
  void TearDown() override {
    cp_.reset();
    faulty_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Open() {
    cp_.reset();
    faulty_.reset();
    store_.reset();
    store_ = *OpenSqliteStore((dir_ / "carve.db").string());
    faulty_ = std::make_unique<FaultyStore>(store_.get());
    ControlPlane::Options options;
    options.log_dir = (dir_ / "logs").string();
    options.node_timeout_us = 3600 * 1'000'000LL;
    auto cp = ControlPlane::Open(faulty_.get(), &catalog_, options, [this] { return now_; });
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = *std::move(cp);
  }

  int64_t Submit(const std::string& tenant, const std::string& key = "") {
    json spec = {{"name", "j"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
    if (!tenant.empty()) spec["tenant"] = tenant;
    auto job = cp_->Submit(spec, key, kAdmin);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<int64_t>() : 0;
  }

  // The agent reports the job's replica exited with `code` and its devices came back.
  absl::Status End(int64_t job, int code) {
    json report = {
        {"job", job},        {"replica", 0},      {"state", "exited"},           {"pid", 100 + job},
        {"started_us", kT0}, {"exit_code", code}, {"reclaim", VerifiedReclaim()}};
    return cp_->Heartbeat({{"node", "n1"}, {"replicas", {report}}}, kAgent).status();
  }

  // Every job `who` may read (ended ones with `all`), page by page `limit` at a time.
  std::vector<int64_t> List(bool all, const Principal& who = kAdmin, size_t limit = 1000) {
    std::vector<int64_t> ids;
    for (int64_t after = 0, pages = 0;; ++pages) {
      int64_t next = -1;
      auto page = cp_->JobsPage(all, {}, who, after, limit, &next);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok() || pages > 1000) break;
      EXPECT_LE(page->size(), limit);
      for (int64_t id : Ids(*page)) ids.push_back(id);
      if (next == 0) break;
      EXPECT_EQ(next, ids.back()) << "a page continues after its last job";
      after = next;
    }
    return ids;
  }
  static std::vector<int64_t> Ids(const json& jobs) {
    std::vector<int64_t> ids;
    for (const json& j : jobs) ids.push_back(j["id"].get<int64_t>());
    return ids;
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  std::filesystem::path dir_;
  int64_t now_ = kT0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<FaultyStore> faulty_;
  std::unique_ptr<ControlPlane> cp_;
};

// A service scaled up and cancelled before a heartbeat handed its new replica to the agent: the
// new replica is retired (a stopping job's pending replicas are never handed out, so its
// evidence would never come), and the job ends with the running replica's evidence (the README
// walk-through's scaled service stayed running once under load).
TEST_F(HistoryTest, ACancelBeforeTheAgentWasToldOfANewReplicaEndsTheService) {
  json spec = {
      {"name", "svc"}, {"kind", "inference"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
  auto submitted = cp_->Submit(spec, "", kAdmin);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t id = (*submitted)["id"];
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}, {"replicas", json::array()}}, kAgent).ok());
  json running = {
      {"job", id}, {"replica", 0}, {"state", "running"}, {"pid", 4242}, {"started_us", kT0}};
  ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}, {"replicas", {running}}}, kAgent).ok());
  ASSERT_TRUE(cp_->Scale(id, 2, kAdmin).ok());
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  ASSERT_EQ((*cp_->GetJob(id))["replicas"].size(), 2u) << cp_->GetJob(id)->dump(2);
  ASSERT_EQ((*cp_->GetJob(id))["replicas"][1]["node"], "n1");
  ASSERT_TRUE(cp_->Cancel(id, kAdmin).ok());
  EXPECT_EQ((*cp_->GetJob(id))["replicas"][1]["state"], "retired");
  ASSERT_TRUE(End(id, 143).ok());  // replica 0 stopped, its devices back
  const json job = *cp_->GetJob(id);
  EXPECT_EQ(job["state"], "cancelled") << job.dump(2);
}

// A gang over two nodes drained after one agent was handed its replica and before the other's
// heartbeat: the drain stops the started replica, and the one its agent was never told of is
// retired (a stopping job's pending replicas are never handed out), so the job is queued again
// once the started replica's evidence is in. It waited for ever for the other's evidence.
TEST_F(HistoryTest, ADrainBeforeOneAgentWasToldOfItsReplicaRequeuesTheGang) {
  const Principal n2{"n2", Role::kNode, "", "", "t-node"};
  ASSERT_TRUE(cp_->Register({{"name", "n2"},
                             {"cpu_milli", 64000},
                             {"memory_mib", 262144},
                             {"backend", "simulated"},
                             {"gpus", H200Gpus("n2", 4)}},
                            kAdmin)
                  .ok());
  json spec = {
      {"name", "gang"}, {"command", {"true"}}, {"replicas", 2}, {"resources", {{"gpus", 4}}}};
  auto submitted = cp_->Submit(spec, "", kAdmin);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t id = (*submitted)["id"];
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  const json placed = *cp_->GetJob(id);
  const int on_n1 = placed["replicas"][0]["node"] == "n1" ? 0 : 1;
  ASSERT_EQ(placed["replicas"][1 - on_n1]["node"], "n2") << placed.dump(2);
  auto beat = cp_->Heartbeat({{"node", "n1"}, {"replicas", json::array()}}, kAgent);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_EQ((*beat)["assignments"].size(), 1u);  // n2's agent has not heartbeated yet
  ASSERT_TRUE(cp_->Cordon("n1", "drain", -1, kAdmin).ok());
  EXPECT_EQ((*cp_->GetJob(id))["replicas"][1 - on_n1]["state"], "retired");
  json report = {
      {"job", id},         {"replica", on_n1}, {"state", "exited"},           {"pid", 4242},
      {"started_us", kT0}, {"exit_code", 143}, {"reclaim", VerifiedReclaim()}};
  ASSERT_TRUE(cp_->Heartbeat({{"node", "n1"}, {"replicas", {report}}}, kAgent).ok());
  const json job = *cp_->GetJob(id);
  EXPECT_EQ(job["state"], "queued") << job.dump(2);
  EXPECT_EQ(job["attempt"], 1);
  // n2's agent is never told to start it.
  auto late = cp_->Heartbeat({{"node", "n2"}, {"replicas", json::array()}}, n2);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE((*late)["assignments"].empty()) << late->dump(2);
}

TEST_F(HistoryTest, FinishedJobsLeaveMemoryAndStayReadableAcrossRestarts) {
  int64_t a = Submit("acme");
  int64_t b = Submit("acme");
  int64_t c = Submit("globex");
  ASSERT_EQ(*cp_->ScheduleOnce(), 3);
  now_ += 60'000'000;
  ASSERT_TRUE(End(a, 0).ok());
  ASSERT_TRUE(End(c, 1).ok());
  int64_t queued = Submit("");
  ASSERT_TRUE(cp_->Cancel(queued, kAdmin).ok());  // ends at once, never scheduled
  EXPECT_EQ(cp_->JobsInMemory(), 1u);             // b only
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "before the restart" : "after the restart");
    EXPECT_EQ((*cp_->GetJob(a))["state"], "succeeded");
    EXPECT_EQ((*cp_->GetJob(c))["state"], "failed");
    EXPECT_EQ((*cp_->GetJob(queued))["state"], "cancelled");
    EXPECT_EQ(List(true), (std::vector<int64_t>{a, b, c, queued}));
    EXPECT_EQ(List(false), std::vector<int64_t>{b});
    EXPECT_TRUE(cp_->Explain(a).ok());
    EXPECT_TRUE(absl::IsNotFound(cp_->GetJob(99).status()));
    auto cancel = cp_->Cancel(a, kAdmin);
    EXPECT_TRUE(absl::IsFailedPrecondition(cancel.status())) << cancel.status();
    EXPECT_THAT(cancel.status().message(), ::testing::HasSubstr("already ended (succeeded)"));
    EXPECT_EQ(cp_->JobsInMemory(), 1u);
    Open();
  }
  // Ids never repeat, though the newest job left memory before the restart.
  EXPECT_EQ(Submit("acme"), queued + 1);
}

TEST_F(HistoryTest, AFinishedJobIsSeenOnlyByItsTenant) {
  int64_t a = Submit("acme");
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  now_ += 60'000'000;
  ASSERT_TRUE(End(a, 0).ok());
  ASSERT_EQ(cp_->JobsInMemory(), 0u);
  EXPECT_TRUE(cp_->CheckJob(a, kAcme, Access::kRead).ok());
  absl::Status other = cp_->CheckJob(a, kGlobex, Access::kRead);
  EXPECT_TRUE(absl::IsNotFound(other)) << other;
  EXPECT_EQ(other.message(), NoJobMessage(a));  // as for a job that does not exist
  Principal viewer{"vic", Role::kViewer, "acme", "default", "t-vic", "u-vic"};
  EXPECT_TRUE(absl::IsPermissionDenied(cp_->CheckJob(a, viewer, Access::kWrite)));
  EXPECT_EQ(cp_->UsageRecords(0, 0, kAcme).size(), 1u);
  EXPECT_EQ(cp_->UsageRecords(0, 0, kGlobex).size(), 0u);
}

// A finished job's output may still arrive after the job left memory. When the store cannot be
// read, the answer must not be "no replica" (404): on that the agent stops shipping those bytes,
// and they were lost for good because AppendLog dropped the store's error ((void)Ended).
TEST_F(HistoryTest, LateOutputOfAFinishedJobIsKeptWhenTheStoreCannotBeRead) {
  int64_t a = Submit("");
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  ASSERT_TRUE(End(a, 0).ok());
  ASSERT_EQ(cp_->JobsInMemory(), 0u);
  faulty_->FailReads();
  absl::Status refused = cp_->AppendLog(a, 0, 0, "late line\n", kAgent);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(absl::IsNotFound(refused)) << refused;
  faulty_->Heal();  // the agent ships the same bytes again
  ASSERT_TRUE(cp_->AppendLog(a, 0, 0, "late line\n", kAgent).ok());
  int64_t size = 0;
  auto log = cp_->ReadLog(a, 0, 0, 1024, &size);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(*log, "late line\n");
}

// Pages of any size list every job once, in id order, memory's and the store's merged; a tenant's
// pages skip other tenants' jobs and still reach the end.
TEST_F(HistoryTest, TheJobListPagesThroughMemoryAndTheStore) {
  std::vector<int64_t> all, acme;
  for (int i = 0; i < 7; ++i) {
    all.push_back(Submit(i % 3 == 0 ? "globex" : "acme"));
    if (i % 3 != 0) acme.push_back(all.back());
  }
  ASSERT_EQ(*cp_->ScheduleOnce(), 4);  // n1 has 4 GPUs
  now_ += 60'000'000;
  for (int64_t id : {all[0], all[1], all[3]}) ASSERT_TRUE(End(id, 0).ok());
  ASSERT_EQ(*cp_->ScheduleOnce(), 3);
  now_ += 60'000'000;
  ASSERT_TRUE(End(all[6], 0).ok());
  ASSERT_EQ(cp_->JobsInMemory(), 3u);  // all[2], all[4], all[5]: ended ones are in the store
  for (size_t limit : {1u, 2u, 3u, 1000u}) {
    SCOPED_TRACE(limit);
    EXPECT_EQ(List(true, kAdmin, limit), all);
    EXPECT_EQ(List(true, kAcme, limit), acme);
    EXPECT_EQ(List(false, kAdmin, limit), (std::vector<int64_t>{all[2], all[4], all[5]}));
  }
  int64_t next = 0;
  auto page = cp_->JobsPage(true, {}, kAdmin, all[4], 2, &next);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(Ids(*page), (std::vector<int64_t>{all[5], all[6]}));
}

// Jobs that end between two page requests move from memory to the store: the pages after still
// list every job once (none twice, none left out), for an admin and for a tenant alike.
TEST_F(HistoryTest, JobsEndingBetweenPagesAreListedOnce) {
  std::vector<int64_t> all, acme;
  for (int i = 0; i < 4; ++i) {
    all.push_back(Submit(i % 2 == 0 ? "acme" : "globex"));
    if (i % 2 == 0) acme.push_back(all.back());
  }
  ASSERT_EQ(*cp_->ScheduleOnce(), 4);
  for (const Principal& who : {kAdmin, kAcme}) {
    SCOPED_TRACE(who.name);
    const std::vector<int64_t>& expected = who.role == Role::kAdmin ? all : acme;
    std::vector<int64_t> listed;
    int64_t after = 0;
    for (int pages = 0; pages < 10; ++pages) {
      int64_t next = -1;
      auto page = cp_->JobsPage(true, {}, who, after, 1, &next);
      ASSERT_TRUE(page.ok()) << page.status();
      for (int64_t id : Ids(*page)) listed.push_back(id);
      // Between two pages the job the next page starts with ends (from memory to the store).
      if (who.role == Role::kAdmin && pages + 1 < static_cast<int>(all.size())) {
        ASSERT_TRUE(End(all[pages + 1], 0).ok());
      }
      if (next == 0) break;
      after = next;
    }
    EXPECT_EQ(listed, expected);
  }
  EXPECT_EQ(cp_->JobsInMemory(), 1u);  // all[0], which never ended
}

TEST_F(HistoryTest, AnIdempotencyKeyReplaysAFinishedJob) {
  int64_t a = Submit("acme", "key-1");
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  ASSERT_TRUE(End(a, 0).ok());
  ASSERT_EQ(cp_->JobsInMemory(), 0u);
  EXPECT_EQ(Submit("acme", "key-1"), a);
  Open();
  EXPECT_EQ(Submit("acme", "key-1"), a);
  EXPECT_EQ(Submit("acme", "key-2"), a + 1);
}

// Submit reads a key's finished job from the store before it takes the control plane's lock. A
// job with the key that ends and leaves memory right after that read is neither in memory nor in
// what the read found: the submission reads again under the lock instead of making a second job.
TEST_F(HistoryTest, AKeyWhoseJobLeavesMemoryDuringTheReadStillReplays) {
  int64_t a = Submit("acme", "key-1");
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  const int64_t reads = faulty_->gets("idempotency");
  faulty_->AfterNextGet("idempotency", [&] {
    ASSERT_TRUE(End(a, 0).ok());  // the lock is free: the read happened outside it
    ASSERT_EQ(cp_->JobsInMemory(), 0u);
  });
  EXPECT_EQ(Submit("acme", "key-1"), a);
  EXPECT_EQ(faulty_->gets("idempotency"), reads + 2);  // before the lock, and again under it
  EXPECT_EQ(List(true), (std::vector<int64_t>{a}));
  // Nothing left memory during the next read: it is not repeated.
  EXPECT_EQ(Submit("acme", "key-2"), a + 1);
  EXPECT_EQ(faulty_->gets("idempotency"), reads + 3);
}

// A store written before finished jobs had their own kind: every job is a `job` record.
TEST_F(HistoryTest, AnOldStoreMigratesItself) {
  int64_t a = Submit("acme", "old-key");
  int64_t b = Submit("globex");
  ASSERT_EQ(*cp_->ScheduleOnce(), 2);
  now_ += 60'000'000;
  ASSERT_TRUE(End(a, 0).ok());
  json usage = cp_->UsageRecords(0, 0, kAdmin);
  json finished = *cp_->GetJob(a);
  cp_.reset();
  // Rewrite the store as the previous version left it.
  StoreBatch old;
  std::string id = absl::StrFormat("%012d", a);
  old.puts.push_back({"job", id, finished.dump()});
  old.deletes.push_back({"job.done", id});
  for (const char* kind : {"usage", "idempotency", "counter"}) {
    std::vector<StoredRecord> records = store_->Load(kind).value();
    for (const StoredRecord& r : records) old.deletes.push_back({kind, r.id});
  }
  ASSERT_TRUE(store_->Commit(old).ok());
  ASSERT_EQ(store_->Load("job.done")->size(), 0u);

  Open();
  EXPECT_EQ(cp_->JobsInMemory(), 1u);
  EXPECT_EQ((*cp_->GetJob(a))["state"], "succeeded");
  EXPECT_EQ(List(true), (std::vector<int64_t>{a, b}));
  EXPECT_EQ(store_->Load("job")->size(), 1u);  // b: live
  EXPECT_EQ(store_->Load("job.done")->size(), 1u);
  // Usage of a finished job other than its live one's "now" is as before.
  json after = cp_->UsageRecords(0, 0, kAdmin);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], usage[0]);
  EXPECT_EQ(Submit("acme", "old-key"), a);
  EXPECT_EQ(Submit("acme"), b + 1);
}

// A commit that fails while a job ends keeps the job in memory (the server refuses work), and
// a restart finds it as the store last had it: nothing acknowledged is lost.
TEST_F(HistoryTest, AFailedCommitOfAnEndLosesNothing) {
  int64_t a = Submit("acme");
  ASSERT_EQ(*cp_->ScheduleOnce(), 1);
  faulty_->FailNthCommit(1);
  EXPECT_FALSE(End(a, 0).ok());
  EXPECT_EQ(cp_->JobsInMemory(), 1u);
  EXPECT_FALSE(cp_->Ready().ok());
  Open();
  EXPECT_EQ((*cp_->GetJob(a))["state"], "scheduled");
  ASSERT_TRUE(End(a, 0).ok());
  EXPECT_EQ((*cp_->GetJob(a))["state"], "succeeded");
  EXPECT_EQ(cp_->JobsInMemory(), 0u);
}

}  // namespace
}  // namespace carve
