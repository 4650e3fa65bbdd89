// The authorization matrix: every endpoint x every role x own/other tenant (lists answer 200
// to every person; what they contain is ListsShowOnlyTheCallersTenantAndProject's), against the
// real `carve server`, asserting the status code and, for every refusal, that nothing changed. One
// server, no agents, many requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <regex>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kNoNodes = {};

struct Response {
  int status = 0;
  std::string body;
};

class AuthzTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoNodes; }

  enum Role { kAdmin, kTenantAdmin, kMember, kViewer, kAgent, kAnonymous, kRoles };
  static constexpr const char* kRoleNames[] = {"admin",  "tenant-admin", "member",
                                               "viewer", "agent",        "anonymous"};

  void SetUp() override {
    PlatformTest::SetUp();
    ASSERT_TRUE(Api()
                    .Post("/api/v1/apply",
                          json::array({
                              {{"kind", "tenant"}, {"name", "acme"}},
                              {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                              {{"kind", "project"}, {"name", "audio"}, {"tenant", "acme"}},
                              {{"kind", "tenant"}, {"name", "globex"}},
                              {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                          }))
                    .ok());
    tokens_[kAdmin] = token_;
    tokens_[kTenantAdmin] = NewUserToken("acme-admin", "tenant-admin", "acme", "");
    tokens_[kMember] = NewUserToken("acme-member", "member", "acme", "vision");
    tokens_[kViewer] = NewUserToken("acme-viewer", "viewer", "acme", "vision");
    tokens_[kAgent] = Slurp((dir_ / "data/agent.token").string());
    tokens_[kAnonymous] = "";
    globex_token_ = NewUserToken("globex-member", "member", "globex", "nlp");
    own_job_ = NewJob("acme", "vision");
    other_job_ = NewJob("globex", "nlp");
  }

  std::string NewUserToken(const std::string& name, const std::string& role,
                           const std::string& tenant, const std::string& project) {
    json body = {{"name", name}, {"role", role}, {"tenant", tenant}};
    if (!project.empty()) body["project"] = project;
    EXPECT_TRUE(Api().Post("/api/v1/users", body).ok());
    auto t = Api().Post("/api/v1/tokens", {{"user", name}, {"expires_in", "1d"}});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? (*t)["token"].get<std::string>() : "";
  }

  int64_t NewJob(const std::string& tenant, const std::string& project) {
    json job = Submit({{"tenant", tenant}, {"project", project}, {"command", {"true"}}});
    return job.value("id", int64_t{0});
  }

  std::string NewTokenId(const std::string& user) {
    auto t = Api().Post("/api/v1/tokens", {{"user", user}, {"expires_in", "1h"}});
    return t.ok() ? (*t)["id"].get<std::string>() : "";
  }

  int64_t EventSeq(const std::string& type, int64_t job) {
    json events = *Api().Get("/api/v1/events?limit=100000");
    for (const json& e : events) {
      if (e["type"] == type && e["subject"] == absl::StrCat("job/", job)) return e["seq"];
    }
    return 0;
  }

  // Every job call on the other tenant's job answers, for each of this tenant's roles, byte for
  // byte as the same call on a job that does not exist.
  void ExpectOtherTenantsJobLooksLikeNoJob() {
    int64_t missing = other_job_ + 1000;
    for (std::string suffix : {"", "/explain", "/logs", "/cancel", "/renew"}) {
      std::string method = suffix == "/cancel" || suffix == "/renew" ? "POST" : "GET";
      for (const std::string& token : {tokens_[kMember], tokens_[kViewer], tokens_[kTenantAdmin]}) {
        Response hidden =
            Call(method, absl::StrCat("/api/v1/jobs/", other_job_, suffix), token, "{}");
        Response absent = Call(method, absl::StrCat("/api/v1/jobs/", missing, suffix), token, "{}");
        EXPECT_EQ(hidden.status, 404) << suffix;
        EXPECT_EQ(hidden.status, absent.status) << suffix;
        EXPECT_EQ(std::regex_replace(absent.body, std::regex(std::to_string(missing)),
                                     std::to_string(other_job_)),
                  hidden.body)
            << suffix;
      }
    }
  }

  Response Call(const std::string& method, const std::string& path, const std::string& token,
                const std::string& body = "") {
    httplib::Client cli(url_);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    httplib::Result r = method == "GET" ? cli.Get(path, headers)
                                        : cli.Post(path, headers, body, "application/json");
    if (!r) return {0, "no response"};
    return {r->status, r->body};
  }

  // Everything a request could change, as the admin sees it (the scheduler's own notes aside).
  json Snapshot() {
    json jobs = json::array();
    const json all_jobs = *Api().Get("/api/v1/jobs?all=true");
    for (const json& j : all_jobs) {
      jobs.push_back({j["id"], j["state"], j["cancel_requested"], j["spec"]});
    }
    json events = json::array();
    const json all_events = *Api().Get("/api/v1/events?limit=100000");
    for (const json& e : all_events) {
      if (e["actor"] != "scheduler") events.push_back({e["seq"], e["type"], e["subject"]});
    }
    return {{"jobs", jobs},
            {"events", events},
            {"users", *Api().Get("/api/v1/users")},
            {"tokens", *Api().Get("/api/v1/tokens")},
            {"tenants", *Api().Get("/api/v1/tenants")},
            {"projects", *Api().Get("/api/v1/projects")},
            {"nodes", *Api().Get("/api/v1/nodes")}};
  }

  struct Row {
    std::string name;
    std::string method;
    std::function<std::string(bool own)> path;  // evaluated right before the call
    std::function<std::string(bool own)> body;
    int own[kRoles];
    int other[kRoles];
  };

  std::string tokens_[kRoles];
  std::string globex_token_;
  int64_t own_job_ = 0;
  int64_t other_job_ = 0;
  int counter_ = 0;
};

TEST_F(AuthzTest, EveryEndpointEveryRoleOwnAndOtherTenant) {
  int64_t own_seq = EventSeq("job.submitted", own_job_);
  int64_t other_seq = EventSeq("job.submitted", other_job_);
  ASSERT_GT(own_seq, 0);
  ASSERT_GT(other_seq, 0);
  auto job = [this](const std::string& suffix) {
    return [this, suffix](bool own) {
      return absl::StrCat("/api/v1/jobs/", own ? own_job_ : other_job_, suffix);
    };
  };
  auto fixed = [](const std::string& path) { return [path](bool) { return path; }; };
  auto none = [](bool) { return std::string(); };
  auto empty = [](bool) { return std::string("{}"); };
  const std::vector<Row> rows = {
      {"get job",
       "GET",
       job(""),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"explain",
       "GET",
       job("/explain"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"logs",
       "GET",
       job("/logs"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"renew",
       "POST",
       job("/renew"),
       empty,
       {409, 409, 409, 403, 403, 401},
       {409, 404, 404, 404, 403, 401}},
      {"cancel",
       "POST",
       [this](bool own) {
         return absl::StrCat("/api/v1/jobs/",
                             own ? NewJob("acme", "vision") : NewJob("globex", "nlp"), "/cancel");
       },
       empty,
       {200, 200, 200, 403, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"submit",
       "POST",
       fixed("/api/v1/jobs"),
       [](bool own) {
         return json{{"tenant", own ? "acme" : "globex"},
                     {"project", own ? "vision" : "nlp"},
                     {"command", {"true"}}}
             .dump();
       },
       {201, 201, 201, 403, 403, 401},
       {201, 403, 403, 403, 403, 401}},
      {"event",
       "GET",
       [=](bool own) { return absl::StrCat("/api/v1/events/", own ? own_seq : other_seq); },
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"scale",
       "POST",
       job("/scale"),
       [](bool) {
         return json{{"replicas", 2}}.dump();
       },
       {409, 409, 409, 403, 403, 401},
       {409, 404, 404, 404, 403, 401}},
      {"declare dead",
       "POST",
       fixed("/api/v1/nodes/no-such-node/dead"),
       empty,
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"revoke node credential",
       "POST",
       fixed("/api/v1/nodes/no-such-node/credential/revoke"),
       empty,
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"maintenance",
       "POST",
       fixed("/api/v1/nodes/no-such-node/maintenance"),
       [](bool) {
         return json{{"start", "1h"}, {"duration", "1h"}}.dump();
       },
       {400, 403, 403, 403, 403, 401},
       {400, 403, 403, 403, 403, 401}},
      {"relayout",
       "POST",
       fixed("/api/v1/nodes/no-such-node/gpus/0/layout"),
       [](bool) {
         return json{{"layout", {"3g.40gb@0"}}}.dump();
       },
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"list jobs",
       "GET",
       fixed("/api/v1/jobs?all=true"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list events",
       "GET",
       fixed("/api/v1/events"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list nodes",
       "GET",
       fixed("/api/v1/nodes"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list tenants",
       "GET",
       fixed("/api/v1/tenants"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list projects",
       "GET",
       fixed("/api/v1/projects"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list queues",
       "GET",
       fixed("/api/v1/queues"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list reservations",
       "GET",
       fixed("/api/v1/reservations/status"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list users",
       "GET",
       fixed("/api/v1/users"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"list tokens",
       "GET",
       fixed("/api/v1/tokens"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"queue status",
       "GET",
       fixed("/api/v1/queues/status"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"whoami",
       "GET",
       fixed("/api/v1/whoami"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"usage",
       "GET",
       fixed("/api/v1/usage?by=project"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"usage records",
       "GET",
       fixed("/api/v1/usage/records?format=csv"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"cost",
       "GET",
       fixed("/api/v1/cost?by=project"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"prices",
       "GET",
       fixed("/api/v1/prices"),
       none,
       {200, 200, 200, 200, 403, 401},
       {200, 200, 200, 200, 403, 401}},
      {"invoice",
       "GET",
       [](bool own) {
         return absl::StrCat("/api/v1/invoices?month=2026-01&tenant=", own ? "acme" : "globex");
       },
       none,
       {200, 200, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"export",
       "GET",
       fixed("/api/v1/export/job.done"),
       none,
       {200, 403, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"apply a notification",
       "POST",
       fixed("/api/v1/apply"),
       [](bool own) {
         return json::array({{{"kind", "notification"},
                              {"name", own ? "hook-acme" : "hook-globex"},
                              {"tenant", own ? "acme" : "globex"},
                              {"url", "https://hooks.example.com/carve"},
                              {"secret", "a-webhook-secret-0123456789"}}})
             .dump();
       },
       {200, 200, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"uncordon",
       "POST",
       fixed("/api/v1/nodes/no-such-node/uncordon"),
       empty,
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"drain",
       "POST",
       fixed("/api/v1/nodes/no-such-node/drain"),
       empty,
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"cordon",
       "POST",
       fixed("/api/v1/nodes/no-such-node/cordon"),
       empty,
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
      {"apply",
       "POST",
       fixed("/api/v1/apply"),
       [](bool own) {
         return json::array({{{"kind", "project"},
                              {"name", own ? "vision" : "nlp"},
                              {"tenant", own ? "acme" : "globex"}}})
             .dump();
       },
       {200, 403, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"create user",
       "POST",
       fixed("/api/v1/users"),
       [this](bool own) {
         return json{{"name", absl::StrCat("u", ++counter_)},
                     {"role", "member"},
                     {"tenant", own ? "acme" : "globex"},
                     {"project", own ? "vision" : "nlp"}}
             .dump();
       },
       {201, 201, 403, 403, 403, 401},
       {201, 403, 403, 403, 403, 401}},
      {"remove user",
       "POST",
       [this](bool own) {
         std::string name = absl::StrCat("r", ++counter_);
         EXPECT_TRUE(Api()
                         .Post("/api/v1/users", {{"name", name},
                                                 {"role", "viewer"},
                                                 {"tenant", own ? "acme" : "globex"},
                                                 {"project", own ? "vision" : "nlp"}})
                         .ok());
         return absl::StrCat("/api/v1/users/", name, "/remove");
       },
       empty,
       {200, 200, 404, 404, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"create token",
       "POST",
       fixed("/api/v1/tokens"),
       [](bool own) {
         return json{{"user", own ? "acme-member" : "globex-member"}, {"expires_in", "1h"}}.dump();
       },
       {201, 201, 201, 404, 403, 401},
       {201, 404, 404, 404, 403, 401}},
      {"revoke token",
       "POST",
       [this](bool own) {
         return absl::StrCat("/api/v1/tokens/", NewTokenId(own ? "acme-member" : "globex-member"),
                             "/revoke");
       },
       empty,
       {200, 200, 200, 404, 403, 401},
       {200, 404, 404, 404, 403, 401}},
      {"audit export",
       "GET",
       [](bool own) { return absl::StrCat("/api/v1/audit?tenant=", own ? "acme" : "globex"); },
       none,
       {200, 200, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"audit verify",
       "GET",
       fixed("/api/v1/audit/verify"),
       none,
       {200, 403, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"utilization",
       "GET",
       fixed("/api/v1/utilization"),
       none,
       {200, 403, 403, 403, 403, 401},
       {200, 403, 403, 403, 403, 401}},
      {"metrics",
       "GET",
       fixed("/metrics"),
       none,
       {200, 200, 403, 403, 403, 401},
       {200, 200, 403, 403, 403, 401}},
      {"register",
       "POST",
       fixed("/api/v1/agents/register"),
       empty,
       {400, 403, 403, 403, 400, 401},
       {400, 403, 403, 403, 400, 401}},
      {"heartbeat",
       "POST",
       fixed("/api/v1/agents/heartbeat"),
       [](bool) {
         return json{{"node", "no-such-node"}}.dump();
       },
       {404, 403, 403, 403, 403, 401},  // the join token only registers
       {404, 403, 403, 403, 403, 401}},
      {"ship logs",
       "POST",
       [this](bool own) {
         return absl::StrCat("/api/v1/agents/logs?job=", own ? own_job_ : other_job_,
                             "&replica=0&offset=0");
       },
       [](bool) { return std::string("forged log line\n"); },
       {404, 403, 403, 403, 403, 401},
       {404, 403, 403, 403, 403, 401}},
  };
  int checked = 0;
  for (const Row& row : rows) {
    for (bool own : {true, false}) {
      for (int role = 0; role < kRoles; ++role) {
        int want = own ? row.own[role] : row.other[role];
        std::string path = row.path(own);
        std::string body = row.body(own);
        json before = want >= 400 ? Snapshot() : json();
        Response r = Call(row.method, path, tokens_[role], body);
        std::string where = absl::StrCat(row.name, " as ", kRoleNames[role], " on ",
                                         own ? "own" : "other", " tenant: ", path);
        EXPECT_EQ(r.status, want) << where << "\n" << r.body;
        if (want >= 400) {
          EXPECT_EQ(Snapshot(), before) << where << " changed something";
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(rows.size()) * 2 * kRoles);
}

// Another tenant's job answers byte for byte like a job that does not exist.
TEST_F(AuthzTest, OtherTenantsJobLooksExactlyLikeNoJob) {
  ExpectOtherTenantsJobLooksLikeNoJob();
  // The same holds for the other tenant's own events.
  Response hidden =
      Call("GET", absl::StrCat("/api/v1/events/", EventSeq("job.submitted", other_job_)),
           tokens_[kMember]);
  EXPECT_EQ(hidden.status, 404);
  EXPECT_THAT(hidden.body, HasSubstr("no event"));
}

// Finished jobs leave the server's memory for the store (kind job.done): another tenant's still
// answers exactly like no job, and lists hold the same jobs for each role as before.
TEST_F(AuthzTest, FinishedJobsAreHiddenAndListedAsLiveOnesAre) {
  for (int64_t id : {own_job_, other_job_}) {
    Response cancelled =
        Call("POST", absl::StrCat("/api/v1/jobs/", id, "/cancel"), tokens_[kAdmin], "{}");
    ASSERT_EQ(cancelled.status, 200) << cancelled.body;
    ASSERT_EQ(json::parse(cancelled.body)["state"], "cancelled");
  }
  ExpectOtherTenantsJobLooksLikeNoJob();
  Response own = Call("GET", absl::StrCat("/api/v1/jobs/", own_job_), tokens_[kViewer]);
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_EQ(Call("GET", absl::StrCat("/api/v1/jobs/", own_job_, "/logs"), tokens_[kViewer]).status,
            200);
  Response again =
      Call("POST", absl::StrCat("/api/v1/jobs/", own_job_, "/cancel"), tokens_[kMember], "{}");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_THAT(again.body, HasSubstr("already ended (cancelled)"));
  EXPECT_EQ(Call("POST", absl::StrCat("/api/v1/jobs/", own_job_, "/cancel"), tokens_[kViewer], "{}")
                .status,
            403);
  auto list = [&](int role) {
    std::set<int64_t> out;
    for (const json& j : json::parse(Call("GET", "/api/v1/jobs?all=true", tokens_[role]).body)) {
      out.insert(j["id"].get<int64_t>());
    }
    return out;
  };
  EXPECT_EQ(list(kAdmin), (std::set<int64_t>{own_job_, other_job_}));
  EXPECT_EQ(list(kTenantAdmin), std::set<int64_t>{own_job_});
  EXPECT_EQ(list(kMember), std::set<int64_t>{own_job_});
  EXPECT_TRUE(json::parse(Call("GET", "/api/v1/jobs", tokens_[kAdmin]).body).empty());
}

// Lists show only what the caller may see.
TEST_F(AuthzTest, ListsShowOnlyTheCallersTenantAndProject) {
  int64_t audio_job = NewJob("acme", "audio");
  auto ids = [](const json& jobs) {
    std::set<int64_t> out;
    for (const json& j : jobs) out.insert(j["id"].get<int64_t>());
    return out;
  };
  auto list = [&](int role) {
    return ids(json::parse(Call("GET", "/api/v1/jobs?all=true", tokens_[role]).body));
  };
  EXPECT_EQ(list(kAdmin), (std::set<int64_t>{own_job_, other_job_, audio_job}));
  EXPECT_EQ(list(kTenantAdmin), (std::set<int64_t>{own_job_, audio_job}));
  EXPECT_EQ(list(kMember), (std::set<int64_t>{own_job_}));
  EXPECT_EQ(list(kViewer), (std::set<int64_t>{own_job_}));
  for (int role : {kTenantAdmin, kMember, kViewer}) {
    for (const char* path : {"/api/v1/events?limit=100000", "/api/v1/tenants", "/api/v1/projects",
                             "/api/v1/usage/records", "/api/v1/users", "/api/v1/tokens",
                             "/api/v1/usage?by=tenant", "/api/v1/cost?by=tenant"}) {
      Response r = Call("GET", path, tokens_[role]);
      EXPECT_EQ(r.status, 200) << path;
      EXPECT_THAT(r.body, Not(HasSubstr("globex"))) << kRoleNames[role] << " " << path;
    }
  }
  Response metrics = Call("GET", "/metrics", tokens_[kTenantAdmin]);
  EXPECT_THAT(metrics.body, HasSubstr("tenant=\"acme\""));
  EXPECT_THAT(metrics.body, Not(HasSubstr("globex")));
  Response audit = Call("GET", "/api/v1/audit", tokens_[kTenantAdmin]);
  EXPECT_THAT(audit.body, HasSubstr("\"tenant\":\"acme\""));
  EXPECT_THAT(audit.body, Not(HasSubstr("globex")));
  // A member's job lands in its own project when the spec names none.
  Response mine = Call("POST", "/api/v1/jobs", tokens_[kMember], R"({"command": ["true"]})");
  ASSERT_EQ(mine.status, 201) << mine.body;
  EXPECT_EQ(json::parse(mine.body)["spec"]["tenant"], "acme");
  EXPECT_EQ(json::parse(mine.body)["spec"]["project"], "vision");
}

TEST_F(AuthzTest, TokensExpireAndRevokedOrRemovedOnesStopWorking) {
  auto t = Api().Post("/api/v1/tokens", {{"user", "acme-member"}, {"expires_in", "1s"}});
  ASSERT_TRUE(t.ok()) << t.status();
  std::string secret = (*t)["token"];
  EXPECT_EQ(Call("GET", "/api/v1/jobs", secret).status, 200);
  // Only the hash is stored: the secret appears nowhere in the listing or the store's events.
  EXPECT_THAT(Call("GET", "/api/v1/tokens", token_).body, Not(HasSubstr(secret)));
  EXPECT_THAT(Call("GET", "/api/v1/events?limit=100000", token_).body, Not(HasSubstr(secret)));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Response expired = Call("GET", "/api/v1/jobs", secret);
  EXPECT_EQ(expired.status, 401);
  EXPECT_THAT(expired.body, HasSubstr("expired"));

  std::string id = NewTokenId("acme-viewer");
  EXPECT_EQ(Call("POST", "/api/v1/tokens/" + id + "/revoke", tokens_[kTenantAdmin], "{}").status,
            200);
  EXPECT_EQ(Call("POST", "/api/v1/users/acme-member/remove", tokens_[kTenantAdmin], "{}").status,
            200);
  Response removed = Call("GET", "/api/v1/jobs", tokens_[kMember]);
  EXPECT_EQ(removed.status, 401);
  // Bad input names what was wrong and changes nothing.
  json before = Snapshot();
  Response bad = Call("POST", "/api/v1/tokens", token_,
                      json{{"user", "acme-viewer"}, {"expires_in", "900d"}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("expires_in"));
  Response role = Call("POST", "/api/v1/users", token_,
                       json{{"name", "x"}, {"role", "root"}, {"tenant", "acme"}}.dump());
  EXPECT_EQ(role.status, 400);
  EXPECT_THAT(role.body, HasSubstr("role"));
  Response cross =
      Call("POST", "/api/v1/users", token_,
           json{{"name", "y"}, {"role", "member"}, {"tenant", "acme"}, {"project", "nlp"}}.dump());
  EXPECT_EQ(cross.status, 400);
  Response typed = Call("POST", "/api/v1/apply", token_, R"([{"kind": {"gpus": "4"}}])");
  EXPECT_EQ(typed.status, 400);
  EXPECT_THAT(typed.body, HasSubstr("kind: must be a string"));
  Response listed = Call("POST", "/api/v1/jobs", tokens_[kTenantAdmin], R"({"project": ["x"]})");
  EXPECT_EQ(listed.status, 400);
  EXPECT_THAT(listed.body, HasSubstr("project: must be a string"));
  Response beat = Call("POST", "/api/v1/agents/heartbeat", token_, "[1]");
  EXPECT_EQ(beat.status, 400);
  EXPECT_THAT(cross.body, HasSubstr("no project \\\"nlp\\\""));
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace carve

namespace carve {
namespace {

// A job's working directory, log and checkpoint directory are under its tenant's owner-only
// directories on the agent; a workdir that tries to leave them is refused at submission.
TEST_F(PlatformTest, JobsRunInTheirTenantsOwnerOnlyDirectories) {
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/apply",
                json::array({{{"kind", "tenant"}, {"name", "acme"}},
                             {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}}}))
          .ok());
  json job = Submit({{"tenant", "acme"},
                     {"project", "vision"},
                     {"workdir", "runs/exp1"},
                     {"command", {"sh", "-c", "pwd; echo ckpt=$CARVE_CHECKPOINT_DIR"}}});
  json done = WaitFinal(job["id"]);
  ASSERT_EQ(done["state"], "succeeded") << done.dump(2);
  std::string node = done["replicas"][0]["node"];
  std::filesystem::path work =
      std::filesystem::canonical(dir_ / "jobs" / node / "work/tenants/acme/vision/runs/exp1");
  std::string logs = Logs(job["id"]);
  EXPECT_THAT(logs, HasSubstr(work.string() + "\n"));
  EXPECT_THAT(logs, HasSubstr("/checkpoints/tenants/acme/job-"));
  for (const std::filesystem::path& p :
       {dir_ / "jobs" / node / "work/tenants/acme", work, dir_ / "data/logs/tenants/acme"}) {
    EXPECT_EQ(std::filesystem::status(p).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all)
        << p;
  }
  for (const char* bad : {"/etc", "../other", "runs/../../x"}) {
    auto r = Api().Post("/api/v1/jobs", {{"workdir", bad}, {"command", {"true"}}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("workdir")) << bad;
  }
}

}  // namespace
}  // namespace carve
