// The audit trail end to end: user actions and scheduler decisions as records naming actor,
// tenant, time, target and reason; export per tenant and time range; tamper detection on the
// SQLite file itself.
#include <sqlite3.h>
#include <stdio.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "integration/cli.h"
#include "integration/harness.h"
#include "runtime/control_plane.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

CliRun Carve(const std::string& args) {
  return RunShell(absl::StrCat(CARVE_BINARY, " ", args, " 2>&1"));
}

std::vector<json> JsonLines(const std::string& text) {
  std::vector<json> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    out.push_back(json::parse(line));
  }
  return out;
}

class AuditTest : public PlatformTest {
 protected:
  std::string Cli(const std::string& token) {
    return absl::StrCat("--server ", url_, " --token ", token, " ");
  }
  void Sql(const std::string& statement) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "data/carve.db").string().c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
  }
};

TEST_F(AuditTest, ActionsAndDecisionsAreRecordsExportedPerTenant) {
  ASSERT_TRUE(Api()
                  .Post("/api/v1/apply",
                        json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                     {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                     {{"kind", "tenant"}, {"name", "globex"}}}))
                  .ok());
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/users", {{"name", "carol"}, {"role", "tenant-admin"}, {"tenant", "acme"}})
          .ok());
  std::string carol = (*Api().Post("/api/v1/tokens", {{"user", "carol"}}))["token"];
  json ok = Submit({{"tenant", "acme"}, {"project", "vision"}, {"command", {"true"}}});
  json cancelled = Submit({{"tenant", "acme"},
                           {"project", "vision"},
                           {"command", {"sleep", "30"}},
                           {"resources", {{"gpus", 1}}}});
  json other = Submit({{"tenant", "globex"}, {"command", {"true"}}});
  EXPECT_EQ(WaitFinal(ok["id"])["state"], "succeeded");
  EXPECT_EQ(WaitFinal(other["id"])["state"], "succeeded");
  int64_t cancel_id = cancelled["id"];
  for (int i = 0; i < 100; ++i) {
    if ((*Api().Get(absl::StrCat("/api/v1/jobs/", cancel_id)))["state"] == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CliRun cancel = Carve(Cli(carol) + absl::StrCat("cancel ", cancel_id));
  EXPECT_EQ(cancel.exit, 0) << cancel.out;
  EXPECT_EQ(WaitFinal(cancel_id)["state"], "cancelled");

  CliRun exported = Carve(Cli(token_) + "audit export --tenant acme --format jsonl");
  ASSERT_EQ(exported.exit, 0) << exported.out;
  std::vector<json> records = JsonLines(exported.out);
  std::set<std::string> actions;
  for (const json& r : records) {
    EXPECT_EQ(r["tenant"], "acme") << r.dump();
    for (const char* field : {"seq", "time", "actor", "action", "target", "reason", "details"}) {
      EXPECT_TRUE(r.contains(field)) << field << " in " << r.dump();
    }
    if (r["target"] == absl::StrCat("job/", ok["id"].get<int64_t>()) ||
        r["target"] == absl::StrCat("job/", cancel_id) || r["action"] == "user.created" ||
        r["action"] == "token.created") {
      actions.insert(
          absl::StrCat(r["action"].get<std::string>(), " by ", r["actor"].get<std::string>()));
    }
  }
  // User actions (with who did them) and every scheduler decision on the job's way.
  for (const char* want :
       {"job.submitted by user:admin", "job.scheduled by scheduler", "job.started by agent:gpu-",
        "job.reclaiming by scheduler", "job.succeeded by scheduler",
        "job.cancel-requested by user:carol", "job.cancelled by scheduler",
        "user.created by user:admin", "token.created by user:admin"}) {
    bool found = std::any_of(actions.begin(), actions.end(),
                             [&](const std::string& a) { return a.rfind(want, 0) == 0; });
    EXPECT_TRUE(found) << want << "\nhave: " << json(actions).dump(1);
  }
  EXPECT_THAT(exported.out, Not(HasSubstr("globex")));

  // CSV has the same records, with a header.
  CliRun csv = Carve(Cli(token_) + "audit export --tenant acme --format csv");
  ASSERT_EQ(csv.exit, 0);
  std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  EXPECT_EQ(lines[0], "seq,time,actor,tenant,project,action,target,reason,details,hash");
  EXPECT_GE(lines.size(), records.size() + 1);  // embedded newlines in reasons quote, not split

  // A tenant-admin exports its own tenant only.
  CliRun own = Carve(Cli(carol) + "audit export");
  EXPECT_EQ(own.exit, 0) << own.out;
  EXPECT_EQ(JsonLines(own.out).size(), records.size());
  CliRun theirs = Carve(Cli(carol) + "audit export --tenant globex");
  EXPECT_NE(theirs.exit, 0);
  EXPECT_THAT(theirs.out, HasSubstr("a tenant-admin exports only its tenant (acme)"));

  // --since/--until bound the records by time.
  int64_t middle = records[records.size() / 2]["time_us"];
  CliRun since = Carve(
      Cli(token_) + absl::StrCat("audit export --tenant acme --since @", middle / 1'000'000 + 1));
  for (const json& r : JsonLines(since.out)) EXPECT_GE(r["time_us"].get<int64_t>(), middle);
  CliRun until = Carve(
      Cli(token_) + absl::StrCat("audit export --tenant acme --until @", middle / 1'000'000 + 1));
  std::vector<json> before = JsonLines(until.out);
  for (const json& r : before) {
    EXPECT_LT(r["time_us"].get<int64_t>(), (middle / 1'000'000 + 1) * 1'000'000);
  }
  EXPECT_EQ(JsonLines(since.out).size() + before.size(), records.size());
}

TEST_F(AuditTest, VerifyCatchesAnEditedRecordAndARewrittenChain) {
  Submit({{"command", {"true"}}});
  CliRun good = Carve(Cli(token_) + "audit verify");
  ASSERT_EQ(good.exit, 0) << good.out;
  EXPECT_THAT(good.out, HasSubstr("audit chain verified"));
  json head = *Api().Get("/api/v1/audit/verify");
  std::string anchor =
      absl::StrCat(head["head_seq"].get<int64_t>(), ":", head["head_hash"].get<std::string>());
  // Someone with the file edits a stored record: the link it breaks is named.
  Sql("UPDATE events SET reason = 'nothing happened' WHERE seq = 3");
  CliRun bad = Carve(Cli(token_) + "audit verify");
  EXPECT_EQ(bad.exit, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("BROKEN"));
  EXPECT_THAT(bad.out, HasSubstr("broken at seq 3"));
  CliRun offline = Carve(absl::StrCat("audit verify --data ", (dir_ / "data").string()));
  EXPECT_EQ(offline.exit, 1) << offline.out;
  EXPECT_THAT(offline.out, HasSubstr("broken at seq 3"));

  // A forger who recomputes every later hash gets a chain that verifies on its own, but not
  // against a head recorded elsewhere before the edit.
  Kill(server_, SIGKILL);  // the forger works on a quiet file
  server_ = 0;
  std::string prev;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "data/carve.db").string().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT seq, time_us, actor, type, subject, reason, details_json, prev_hash "
                     "FROM events ORDER BY seq",
                     -1, &st, nullptr);
  std::vector<std::pair<int64_t, std::string>> rehash;
  while (sqlite3_step(st) == SQLITE_ROW) {
    auto text = [&](int c) {
      return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, c)));
    };
    if (prev.empty()) prev = text(7);
    std::string hash = Sha256Hex(
        absl::StrCat(prev, "\n", sqlite3_column_int64(st, 0), "\n", sqlite3_column_int64(st, 1),
                     "\n", text(2), "\n", text(3), "\n", text(4), "\n", text(5), "\n", text(6)));
    rehash.push_back({sqlite3_column_int64(st, 0), hash});
    prev = hash;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  std::string sql = "BEGIN;";
  for (size_t i = 0; i < rehash.size(); ++i) {
    absl::StrAppend(&sql, "UPDATE events SET hash = '", rehash[i].second, "'",
                    i > 0 ? absl::StrCat(", prev_hash = '", rehash[i - 1].second, "'") : "",
                    " WHERE seq = ", rehash[i].first, ";");
  }
  Sql(sql + "COMMIT;");
  CliRun forged = Carve(absl::StrCat("audit verify --data ", (dir_ / "data").string()));
  EXPECT_EQ(forged.exit, 0) << forged.out;
  CliRun anchored = Carve(
      absl::StrCat("audit verify --data ", (dir_ / "data").string(), " --expect-head ", anchor));
  EXPECT_EQ(anchored.exit, 1) << anchored.out;
  EXPECT_THAT(anchored.out, HasSubstr("the log was rewritten"));
}

}  // namespace
}  // namespace carve
