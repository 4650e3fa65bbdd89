// The imported event log (runtime/archive.h): kept apart from the new store's own chain and
// verified link by link; a changed field, a missing event or a wrong link names where it breaks.
#include "runtime/archive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_format.h"
#include "adapters/store/event_hash.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

StoredEvent Event(int64_t seq, const std::string& subject) {
  StoredEvent e;
  e.seq = seq;
  e.time_us = 1'800'000'000'000'000 + seq;
  e.actor = "user:admin";
  e.type = "tenant.applied";
  e.subject = subject;
  e.reason = "applied";
  e.details_json = R"({"job":1})";
  return e;
}

class ImportedEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / absl::StrCat("archive-", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = *OpenSqliteStore((dir_ / "carve.db").string());
  }

  // Three events chained as a store chains them, as `carve import` keeps them.
  std::vector<json> Chain() {
    std::vector<json> out;
    std::string prev = GenesisHash();
    for (int64_t seq = 1; seq <= 3; ++seq) {
      StoredEvent e = Event(seq, absl::StrCat("tenant/t", seq));
      e.hash = *EventHash(e, prev);
      e.prev_hash = prev;
      out.push_back(ImportedEventDoc(e));
      prev = e.hash;
    }
    return out;
  }

  void Keep(const std::vector<json>& events) {
    StoreBatch batch;
    for (const json& e : events) {
      batch.puts.push_back(
          {kImportedEventKind, absl::StrFormat("%012d", e["seq"].get<int64_t>()), e.dump()});
    }
    ASSERT_TRUE(store_->Commit(std::move(batch)).ok());
  }

  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(ImportedEventsTest, AWholeChainVerifiesToItsHead) {
  std::vector<json> chain = Chain();
  Keep(chain);
  auto r = VerifyImportedEvents(*store_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["events"], 3);
  EXPECT_EQ((*r)["head_hash"], chain.back()["hash"]);
}

TEST_F(ImportedEventsTest, AChangedFieldNamesItsEvent) {
  std::vector<json> chain = Chain();
  chain[1]["reason"] = "rewritten";
  Keep(chain);
  auto r = VerifyImportedEvents(*store_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("broken at seq 2"));
}

TEST_F(ImportedEventsTest, AMissingEventBreaksTheChainWhereItWas) {
  std::vector<json> chain = Chain();
  chain.erase(chain.begin() + 1);
  Keep(chain);
  auto r = VerifyImportedEvents(*store_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("broken at seq 2"));
}

TEST(ArchivedEventTest, AnExportedEventIsCheckedAgainstItsPredecessor) {
  StoredEvent e = Event(1, "job/1");
  e.hash = *EventHash(e, GenesisHash());
  json line = {{"seq", 1},
               {"time_us", e.time_us},
               {"actor", e.actor},
               {"type", e.type},
               {"subject", e.subject},
               {"reason", e.reason},
               {"details", {{"job", 1}}},
               {"hash", e.hash}};
  EXPECT_TRUE(ArchivedEvent(line, GenesisHash()).ok());
  EXPECT_EQ(ArchivedEvent(line, std::string(64, 'f')).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(IsArchiveKind("token"));
  EXPECT_TRUE(IsArchiveKind("job.done"));
}

}  // namespace
}  // namespace carve
