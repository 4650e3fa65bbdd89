// Acceptance reports kept by the server (runtime/poc_reports.h; issue 15: the dashboard lists
// them). A report is checked against the server that keeps it (each job exists, each recorded
// chain head is the event it names), kept with a poc.report-kept event, listed newest first and
// read whole by admins only; a report that cannot be read is refused naming why, and nothing is
// kept.
#include <string>
#include <vector>

#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

json Head(const json& event) { return {{"seq", event["seq"]}, {"hash", event["hash"]}}; }

json Record(const std::string& id, const std::string& verdict, std::vector<int64_t> jobs,
            json start, json end) {
  return {{"id", id},
          {"title", id},
          {"suite", "software"},
          {"jobs", jobs},
          {"chain_start", start},
          {"chain_end", end},
          {"verdict", verdict},
          {"checks", json::array()}};
}

class PocReportsTest : public PlatformTest {
 protected:
  // A report of two tests: one that ran job `job` inside the chain's first and last events.
  json Report(int64_t job) {
    const json events = ApiGet("/api/v1/events?after=0&limit=100000");
    const json empty = {{"seq", 0}, {"hash", ""}};
    return {
        {"meta", {{"suite", "software"}, {"owner", "buyer"}, {"server_version", "test"}}},
        {"records",
         {Record("software.reclamation", "pass", {job}, Head(events.front()), Head(events.back())),
          Record("software.contention", "not-run", {}, empty, empty)}},
        {"verify", {{{"name", "the chain verifies"}, {"ok", true}}}}};
  }
  json Claim(const json& kept, const std::string& name) {
    for (const json& c : kept["server_checks"]) {
      if (c["name"] == name) return c;
    }
    return json();
  }
};

TEST_F(PocReportsTest, AReportIsCheckedAgainstTheServerKeptAndListedNewestFirst) {
  const int64_t job = Submit({{"command", {"true"}}})["id"];
  ASSERT_EQ(WaitFinal(job)["state"], "succeeded");
  const json good = Report(job);
  json kept = ApiPost("/api/v1/poc/reports", good);
  EXPECT_EQ(kept["id"], 1) << kept.dump(2);
  EXPECT_EQ(kept["counts"], json({{"pass", 1}, {"not-run", 1}}));
  EXPECT_EQ(kept["server_checks"], json({{"held", 5}, {"of", 5}})) << kept.dump(2);
  EXPECT_EQ(kept["claims"], json({{"held", 1}, {"of", 1}}));
  EXPECT_EQ(kept["kept_by"], "admin");

  // A forged record: the chain's last hash rewritten, a job this server never ran.
  json forged = good;
  forged["records"][0]["chain_end"]["hash"] = std::string(64, 'f');
  forged["records"][0]["jobs"] = {job, 999999};
  kept = ApiPost("/api/v1/poc/reports", forged);
  EXPECT_EQ(kept["id"], 2);
  EXPECT_EQ(kept["server_checks"], json({{"held", 4}, {"of", 6}})) << kept.dump(2);
  json whole = ApiGet("/api/v1/poc/reports/2");
  EXPECT_FALSE(Claim(whole, "software.reclamation: job 999999 exists on this server")["ok"]);
  EXPECT_TRUE(Claim(
      whole, absl::StrCat("software.reclamation: job ", job, " exists on this server"))["ok"]);
  json head = Claim(whole, "software.reclamation: the chain head after it");
  EXPECT_FALSE(head["ok"]) << whole.dump(2);
  EXPECT_THAT(head["expected"].get<std::string>(), HasSubstr(std::string(64, 'f')));
  EXPECT_EQ(whole["records"], forged["records"]);

  json list = ApiGet("/api/v1/poc/reports");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], 2);
  EXPECT_EQ(list[1]["id"], 1);
  EXPECT_EQ(list[1]["tests"][0], json({{"id", "software.reclamation"},
                                       {"title", "software.reclamation"},
                                       {"verdict", "pass"},
                                       {"reason", ""}}));
  json events = EventsOf("poc.report-kept");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["subject"], "poc/1");
  EXPECT_EQ(events[0]["details"]["sha256"], list[1]["sha256"]);
  EXPECT_THAT(events[1]["reason"].get<std::string>(),
              HasSubstr("1 pass, 0 fail, 0 inconclusive, 1 not-run; 4 of 6 server checks hold"));

  auto page = Api().GetText("/api/v1/poc/reports/1/report.html");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("software.reclamation"));

  // Kept across a restart, and the ids go on.
  Kill(server_, SIGKILL);
  StartServer();
  EXPECT_EQ(ApiGet("/api/v1/poc/reports").size(), 2u);
  EXPECT_EQ(ApiPost("/api/v1/poc/reports", good)["id"], 3);
}

TEST_F(PocReportsTest, OnlyAdminsKeepOrReadThemAndABadReportIsRefusedNamingWhy) {
  const json good = Report(0);
  ASSERT_TRUE(Api()
                  .Post("/api/v1/users", {{"name", "member"},
                                          {"role", "member"},
                                          {"tenant", "default"},
                                          {"project", "default"}})
                  .ok());
  const std::string token = (*Api().Post("/api/v1/tokens", {{"user", "member"}}))["token"];
  ApiClient member(url_, token, ca_);
  EXPECT_EQ(member.Post("/api/v1/poc/reports", good).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(member.Get("/api/v1/poc/reports").status().code(), absl::StatusCode::kPermissionDenied);

  auto refused = [&](json body, const std::string& why) {
    auto r = Api().Post("/api/v1/poc/reports", body);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body.dump();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(why));
  };
  refused({{"meta", good["meta"]}, {"records", json::array()}}, "records: must be a non-empty");
  refused({{"records", good["records"]}}, "meta: must be an object");
  json bad = good;
  bad["records"][1]["verdict"] = "passed";
  refused(bad, "records[1]: unknown verdict \"passed\"");
  bad = good;
  bad["records"][1]["id"] = "software.reclamation";
  refused(bad, "records[1]: test software.reclamation twice");
  bad = good;
  bad["records"][0].erase("chain_end");
  refused(bad, "records[0]: record field \"chain_end\"");
  bad = good;
  bad["verify"] = {{{"name", "x"}}};
  refused(bad, "verify[0]: a claim is");
  bad = good;
  bad["meta"]["suite"] = 5;  // (the summary threw on it after the id was taken: a 500, a gap)
  refused(bad, "meta.suite: must be a string");
  EXPECT_TRUE(ApiGet("/api/v1/poc/reports").empty());
  EXPECT_TRUE(EventsOf("poc.report-kept").empty());
  EXPECT_EQ(Api().Get("/api/v1/poc/reports/7").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace carve::it
