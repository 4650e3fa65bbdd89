// Leaving, or moving in (runtime/archive.h), with the real binaries: a server's configuration
// and history exported with `carve export all`, imported with `carve import` into a new data
// directory, a server started on it exports the same configuration, finished jobs and usage
// (same SHA-256), its audit check verifies the imported event log to the exported head; a file
// changed after the export, or a store that is not empty, is refused and nothing is written.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_split.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

class ArchiveTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    if (HasFatalFailure()) return;
    auto applied =
        Api().Post("/api/v1/apply",
                   json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                {{"kind", "queue"}, {"name", "research"}, {"quota", {{"gpus", 4}}}},
                                {{"kind", "project"},
                                 {"name", "vision"},
                                 {"tenant", "acme"},
                                 {"queues", {"research"}}},
                                {{"kind", "notification"},
                                 {"name", "acme-hook"},
                                 {"tenant", "acme"},
                                 {"url", "https://hooks.example.com/carve"},
                                 {"secret", "acme-webhook-secret-0123456789"}},
                                {{"kind", "price"},
                                 {"name", "list-2026"},
                                 {"effective_from", "2026-01-01"},
                                 {"currency", "EUR"},
                                 {"gpu_hour", {{"*", 2.0}}}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  CliRun Cli(const std::string& args) {
    return RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                                 " ", args, " 2>&1"));
  }

  CliRun Import(const std::string& from, const std::filesystem::path& data) {
    return RunShell(
        absl::StrCat(CARVE_BINARY, " import ", from, " --data ", data.string(), " 2>&1"));
  }

  static json Manifest(const std::filesystem::path& dir) {
    return json::parse(Slurp((dir / "manifest.json").string()));
  }
  static json Entry(const json& manifest, const std::string& path) {
    for (const json& f : manifest["files"]) {
      if (f["path"] == path) return f;
    }
    return json();
  }
  static std::set<std::string> Lines(const std::filesystem::path& file) {
    std::vector<std::string> lines = absl::StrSplit(Slurp(file.string()), '\n', absl::SkipEmpty());
    return {lines.begin(), lines.end()};
  }
};

TEST_F(ArchiveTest, AnImportedServerExportsTheSameConfigurationHistoryAndChain) {
  json spec = {{"tenant", "acme"},
               {"project", "vision"},
               {"queue", "research"},
               {"resources", {{"gpus", 1}, {"cpu", "1"}, {"memory", "1Gi"}}},
               {"command", {"true"}}};
  int64_t last = 0;
  for (int i = 0; i < 2; ++i) {
    last = Submit(spec)["id"];
    ASSERT_EQ(WaitFinal(last)["state"], "succeeded");
  }
  // A job no node can hold stays queued: live, it is counted and not exported.
  json waiting = spec;
  waiting["resources"]["gpus"] = 64;
  Submit(waiting, "", true);

  const std::filesystem::path a = dir_ / "export-a", b = dir_ / "export-b";
  CliRun exported = Cli("export all --out " + a.string());
  ASSERT_EQ(exported.exit, 0) << exported.out;
  EXPECT_THAT(exported.out, HasSubstr("records/job.done.jsonl: 2 records"));
  const json ma = Manifest(a);
  EXPECT_EQ(ma["live_jobs"], 1);
  EXPECT_EQ(Entry(ma, "records/usage.jsonl")["records"], 2);
  EXPECT_EQ(std::filesystem::status(a / "config.yaml").permissions() &
                std::filesystem::perms::others_read,
            std::filesystem::perms::none);  // it holds the webhook's secret
  // The configuration is re-applyable as it is.
  CliRun reapplied = Cli("apply -f " + (a / "config.yaml").string());
  EXPECT_EQ(reapplied.exit, 0) << reapplied.out;

  // The new server: a new data directory, imported, then started where the old one was.
  Kill(server_, SIGKILL);
  std::filesystem::rename(dir_ / "data", dir_ / "old-data");
  CliRun imported = Import(a.string(), dir_ / "data");
  ASSERT_EQ(imported.exit, 0) << imported.out;
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  CliRun again = Cli("export all --out " + b.string());
  ASSERT_EQ(again.exit, 0) << again.out;
  const json mb = Manifest(b);
  for (const char* path : {"config.yaml", "records/job.done.jsonl", "records/usage.jsonl",
                           "records/node-modes.jsonl"}) {
    EXPECT_EQ(Entry(mb, path)["sha256"], Entry(ma, path)["sha256"]) << path;
    EXPECT_EQ(Entry(mb, path)["records"], Entry(ma, path)["records"]) << path;
  }
  // What keeps growing on a running server holds at least what was exported.
  for (const char* path : {"records/user.jsonl", "records/utilization.jsonl",
                           "records/queue_usage.jsonl", "records/counter.jsonl"}) {
    std::set<std::string> before = Lines(a / path), after = Lines(b / path);
    for (const std::string& line : before) EXPECT_EQ(after.count(line), 1u) << path << ": " << line;
  }
  // The imported log verifies to the exported head; the new chain records the import.
  json verify = ApiGet("/api/v1/audit/verify");
  EXPECT_EQ(verify["ok"], true) << verify.dump(2);
  EXPECT_EQ(verify["imported"]["events"], ma["events"]["events"]);
  EXPECT_EQ(verify["imported"]["head_hash"], ma["events"]["head_hash"]);
  EXPECT_EQ(EventsOf("store.imported").size(), 1u);
  // History reads as before, and a new job's id follows the imported ones.
  EXPECT_EQ(Job(last)["state"], "succeeded");
  EXPECT_GT(Submit(waiting, "", true)["id"].get<int64_t>(), last);
}

TEST_F(ArchiveTest, AChangedFileOrAStoreInUseIsRefusedAndNothingIsWritten) {
  const std::filesystem::path a = dir_ / "export";
  ASSERT_EQ(Cli("export all --out " + a.string()).exit, 0);
  // Not into a directory that is not empty, and not by a member.
  CliRun twice = Cli("export all --out " + a.string());
  EXPECT_NE(twice.exit, 0);
  EXPECT_THAT(twice.out, HasSubstr("holds files already"));
  ApiClient member(url_, MemberToken("alice", "acme", "vision"), ca_);
  EXPECT_EQ(member.Get("/api/v1/export/job.done").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Api().Get("/api/v1/export/token").status().code(),
            absl::StatusCode::kInvalidArgument);  // secrets are never exported

  // A store that holds anything (the running server's) is refused.
  CliRun busy = Import(a.string(), dir_ / "data");
  EXPECT_NE(busy.exit, 0);
  // A byte changed after the export: refused, naming the file; the new store stays empty.
  std::string config = Slurp((a / "config.yaml").string());
  config.replace(config.find("acme"), 4, "acmf");
  std::ofstream(a / "config.yaml", std::ios::trunc) << config;
  CliRun tampered = Import(a.string(), dir_ / "fresh");
  EXPECT_NE(tampered.exit, 0);
  EXPECT_THAT(tampered.out, HasSubstr("config.yaml: its SHA-256 is not the manifest's"));
  Kill(server_, SIGKILL);
  std::filesystem::rename(dir_ / "data", dir_ / "old-data");
  std::filesystem::rename(dir_ / "fresh", dir_ / "data");
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  const json tenants = ApiGet("/api/v1/tenants");
  ASSERT_EQ(tenants.size(), 1u) << tenants.dump();  // the built-in default alone
  EXPECT_EQ(tenants[0]["name"], "default");
  EXPECT_EQ(EventsOf("store.imported").size(), 0u);
}

}  // namespace
}  // namespace carve::it
