// Issue 10's API input and tenancy findings against the real server: deep bodies (H1), idempotency
// keys bound to user ids (M1), token lifetimes and per-user rate limits (M3), names and what the
// CLI prints (M6), cross-tenant existence (L1), env names, log offsets, form bodies and YAML bombs
// (L3). Each test is the attack; it failed before the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kNoNodes = {};

struct Reply {
  int status = 0;  // 0: no answer (the server died)
  std::string body;
};

// Two tenants, acme (project vision, queue acme-q) and globex (project nlp, queue globex-q), with
// a tenant-admin and a member each.
class ApiInputTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoNodes; }

  void SetUp() override {
    PlatformTest::SetUp();
    ASSERT_TRUE(Api()
                    .Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                                        {{"kind", "tenant"}, {"name", "globex"}},
                                                        {{"kind", "queue"}, {"name", "acme-q"}},
                                                        {{"kind", "queue"}, {"name", "globex-q"}},
                                                        {{"kind", "project"},
                                                         {"name", "vision"},
                                                         {"tenant", "acme"},
                                                         {"queues", {"acme-q"}}},
                                                        {{"kind", "project"},
                                                         {"name", "nlp"},
                                                         {"tenant", "globex"},
                                                         {"queues", {"globex-q"}}}}))
                    .ok());
  }

  std::string NewUser(const std::string& name, const std::string& role, const std::string& tenant,
                      const std::string& project, const std::string& life = "1d") {
    json body = {{"name", name}, {"role", role}, {"tenant", tenant}};
    if (!project.empty()) body["project"] = project;
    auto u = Api().Post("/api/v1/users", body);
    EXPECT_TRUE(u.ok()) << u.status();
    return NewToken(name, life);
  }

  std::string NewToken(const std::string& user, const std::string& life = "1d") {
    auto t = Api().Post("/api/v1/tokens", {{"user", user}, {"expires_in", life}});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? (*t)["token"].get<std::string>() : "";
  }

  Reply Call(const std::string& method, const std::string& path, const std::string& token,
             const std::string& body = "", const std::string& type = "application/json",
             const httplib::Headers& extra = {}) {
    httplib::Client cli(url_);
    cli.set_read_timeout(60, 0);
    cli.set_write_timeout(60, 0);
    httplib::Headers h = extra;
    h.emplace("Authorization", "Bearer " + token);
    auto r =
        method == "GET" ? cli.Get(path.c_str(), h) : cli.Post(path.c_str(), h, body, type.c_str());
    return r ? Reply{r->status, r->body} : Reply{};
  }

  bool Healthy() {
    auto r = httplib::Client(url_).Get("/healthz");
    return r && r->status == 200;
  }

  CliRun Carve(const std::string& args, const std::string& token) {
    return RunShell(absl::StrCat("timeout 60 ", CARVE_BINARY, " --server ", url_, " --token ",
                                 token, " ", args, " 2>&1"));
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
};

// H1: a 2 MB body nested 1,000,000 deep to POST /jobs/<own>/scale overflowed the server's stack.
// Now every route with a body, the agents' included, answers 400 and the server lives on.
TEST_F(ApiInputTest, DeepBodiesAreRefusedOnEveryRouteAndTheServerLives) {
  json job = Submit({{"command", {"true"}}});
  std::string deep =
      "{\"replicas\":" + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}";
  std::string agent = Slurp((dir_ / "data/agent.token").string());
  const std::vector<std::pair<std::string, std::string>> routes = {
      {absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>(), "/scale"), token_},
      {"/api/v1/jobs", token_},
      {"/api/v1/apply", token_},
      {"/api/v1/users", token_},
      {"/api/v1/tokens", token_},
      {"/api/v1/nodes/n/maintenance", token_},
      {"/api/v1/nodes/n/gpus/0/layout", token_},
      {"/api/v1/agents/register", agent},
      // The join token may not heartbeat at all (403 before the body is read); an admin may.
      {"/api/v1/agents/heartbeat", token_},
  };
  for (const auto& [path, token] : routes) {
    Reply r = Call("POST", path, token, deep);
    EXPECT_EQ(r.status, 400) << path;
    EXPECT_THAT(r.body, HasSubstr("the body nests deeper than 64 levels")) << path;
    ASSERT_TRUE(Healthy()) << path << " killed the server";
  }
  // Sixty-four levels are still a body (wrong here, but parsed and answered).
  std::string ok = "{\"replicas\":" + std::string(63, '[') + std::string(63, ']') + "}";
  Reply r =
      Call("POST", absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>(), "/scale"), token_, ok);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("replicas"));
  EXPECT_TRUE(Healthy());
}

// M1: keys were matched by user name: a re-created user (here in another tenant) replayed a key
// and got the first user's job record with its env secrets.
TEST_F(ApiInputTest, AnIdempotencyKeyBelongsToAUserIdNotAName) {
  std::string bob = NewUser("bob", "member", "acme", "vision");
  httplib::Headers key = {{"Idempotency-Key", "k-1"}};
  std::string spec =
      json{{"command", {"true"}}, {"queue", "acme-q"}, {"env", {{"SECRET", "acme-s3cret"}}}}.dump();
  Reply first = Call("POST", "/api/v1/jobs", bob, spec, "application/json", key);
  ASSERT_EQ(first.status, 201) << first.body;
  int64_t id = json::parse(first.body)["id"];
  // The same user's retry is still the same job, also after a restart.
  Reply again = Call("POST", "/api/v1/jobs", bob, spec, "application/json", key);
  EXPECT_EQ(json::parse(again.body)["id"], id);
  Kill(server_, SIGKILL);
  StartServer();
  again = Call("POST", "/api/v1/jobs", bob, spec, "application/json", key);
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(json::parse(again.body)["id"], id);
  // bob leaves; a new "bob" of globex replays the key.
  ASSERT_TRUE(Api().Post("/api/v1/users/bob/remove", json::object()).ok());
  std::string other = NewUser("bob", "member", "globex", "nlp");
  Reply replay = Call("POST", "/api/v1/jobs", other,
                      R"({"command": ["true"], "queue": "globex-q"})", "application/json", key);
  ASSERT_EQ(replay.status, 201) << replay.body;
  EXPECT_NE(json::parse(replay.body)["id"], id);
  EXPECT_THAT(replay.body, Not(HasSubstr("acme-s3cret")));
  EXPECT_EQ(json::parse(replay.body)["spec"]["tenant"], "globex");
}

// M3: a 1-day token minted a 366-day token, and each new token was a fresh rate-limit bucket.
TEST_F(ApiInputTest, ATokenCannotOutliveItsParentAndNewTokensGetNoNewRequests) {
  NewUser("carol", "member", "acme", "vision");
  auto parent = Api().Post("/api/v1/tokens", {{"user", "carol"}, {"expires_in", "1d"}});
  ASSERT_TRUE(parent.ok());
  std::string day = (*parent)["token"];
  Reply longer = Call("POST", "/api/v1/tokens", day, R"({"expires_in": "366d"})");
  EXPECT_EQ(longer.status, 400) << longer.body;
  EXPECT_THAT(longer.body, HasSubstr("cannot outlive the token that creates it"));
  EXPECT_THAT(longer.body, HasSubstr("at most 23h"));
  Reply shorter = Call("POST", "/api/v1/tokens", day, R"({"expires_in": "12h"})");
  EXPECT_EQ(shorter.status, 201) << shorter.body;
  Reply unasked = Call("POST", "/api/v1/tokens", day, "{}");
  ASSERT_EQ(unasked.status, 201) << unasked.body;
  int64_t child = json::parse(unasked.body)["expires_us"];
  EXPECT_GT(child, 0);
  EXPECT_LE(child, (*parent)["expires_us"].get<int64_t>());
  // Four tokens of one user, each used no more than its own burst (200): the user's bucket
  // limits them together.
  std::vector<std::string> tokens = {NewToken("carol"), NewToken("carol"), NewToken("carol"),
                                     NewToken("carol")};
  std::atomic<int> limited{0}, served{0};
  std::vector<std::thread> threads;
  for (const std::string& t : tokens) {
    threads.emplace_back([&, t] {
      httplib::Client cli(url_);
      for (int i = 0; i < 200; ++i) {
        auto r = cli.Get("/api/v1/whoami", {{"Authorization", "Bearer " + t}});
        if (r && r->status == 429) ++limited;
        if (r && r->status == 200) ++served;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(limited + served, 800);
  EXPECT_GT(limited.load(), 0);
  Reply limit = Call("GET", "/api/v1/whoami", tokens[0]);
  if (limit.status == 429) {
    EXPECT_THAT(limit.body, HasSubstr("per user"));
  }
}

// M6: a 3 MB job name was stored, and ANSI escapes in names reached the admin's terminal.
TEST_F(ApiInputTest, NamesAreShortAndPrintableAndTheCliEscapesWhatItPrints) {
  size_t before = Api().Get("/api/v1/jobs?all=true")->size();
  Reply huge = Call("POST", "/api/v1/jobs", token_,
                    json{{"command", {"true"}}, {"name", std::string(3 << 20, 'n')}}.dump());
  EXPECT_EQ(huge.status, 400);
  EXPECT_THAT(huge.body, HasSubstr("name: 3145728 bytes; at most 128"));
  Reply ansi =
      Call("POST", "/api/v1/jobs", token_,
           json{{"command", {"true"}}, {"name", "ok\x1b[2J\x1b]0;pwned\x07\nforged"}}.dump());
  EXPECT_EQ(ansi.status, 400);
  EXPECT_THAT(ansi.body, HasSubstr("name: holds the control character \\\\x1b"));
  Reply reason = Call("POST", "/api/v1/nodes/n/maintenance", token_,
                      R"({"lasts": "1h", "reason": "a\u001b[31m"})");
  EXPECT_EQ(reason.status, 400);
  EXPECT_THAT(reason.body, HasSubstr("reason: holds the control character"));
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), before);
  // What the CLI prints in tables and errors carries no control characters.
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/apply", json::array({{{"kind", "tenant"},
                                               {"name", "initech"},
                                               {"description", "red\x1b[31m\nFORGED ROW"}}}))
          .ok());
  CliRun tenants = Carve("get tenants", token_);
  EXPECT_EQ(tenants.exit, 0) << tenants.out;
  EXPECT_THAT(tenants.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(tenants.out, HasSubstr("red\\x1b[31m\\nFORGED ROW"));
  std::string member = NewUser("dave", "member", "acme", "vision");
  std::string file = WriteFile("evil.yaml", "tenant: \"\\e[2Jglobex\"\ncommand: [\"true\"]\n");
  CliRun refused = Carve("submit -f " + file, member);
  EXPECT_NE(refused.exit, 0);
  EXPECT_THAT(refused.out, Not(HasSubstr("\x1b")));
  EXPECT_THAT(refused.out, HasSubstr("\\x1b[2Jglobex"));
}

// L1: other tenants' queue usage, per-GPU utilization, and user and project existence leaked.
TEST_F(ApiInputTest, OtherTenantsObjectsAnswerAsIfTheyDidNotExist) {
  std::string globex = NewUser("gm", "member", "globex", "nlp");
  ASSERT_EQ(Call("POST", "/api/v1/jobs", globex,
                 R"({"command": ["true"], "queue": "globex-q", "resources": {"gpus": 8}})")
                .status,
            201);
  std::string acme = NewUser("am", "member", "acme", "vision");
  json queues = json::parse(Call("GET", "/api/v1/queues/status", acme).body);
  std::vector<std::string> names;
  for (const json& q : queues) names.push_back(q["name"]);
  EXPECT_THAT(names, ::testing::Contains("acme-q"));
  EXPECT_THAT(names, Not(::testing::Contains("globex-q")));
  json all = json::parse(Call("GET", "/api/v1/queues/status", token_).body);
  EXPECT_EQ(all.size(), 3u);  // default, acme-q, globex-q: admins see all
  // A user name taken in another tenant: not which tenant, not "exists".
  std::string globex_admin = NewUser("globex-admin", "tenant-admin", "globex", "");
  Reply clash = Call("POST", "/api/v1/users", globex_admin,
                     R"({"name": "am", "role": "member", "project": "nlp"})");
  EXPECT_EQ(clash.status, 409);
  EXPECT_THAT(clash.body, HasSubstr("is not available"));
  std::string said = json::parse(clash.body)["error"]["message"];
  EXPECT_THAT(said, Not(HasSubstr("exists")));
  EXPECT_THAT(said, Not(HasSubstr("acme")));
  // Another tenant's project answers byte for byte like a missing one.
  std::string acme_admin = NewUser("acme-admin", "tenant-admin", "acme", "");
  Reply foreign =
      Call("POST", "/api/v1/jobs", acme_admin, R"({"command": ["true"], "project": "nlp"})");
  Reply missing =
      Call("POST", "/api/v1/jobs", acme_admin, R"({"command": ["true"], "project": "nlq"})");
  EXPECT_EQ(foreign.status, missing.status);
  EXPECT_THAT(foreign.body, Not(HasSubstr("globex")));
  std::string f = foreign.body, m = missing.body;
  f.replace(f.find("nlp"), 3, "nlq");
  EXPECT_EQ(f, m);
}

// L1: per-GPU utilization shows how busy other tenants' jobs keep each GPU.
TEST_F(PlatformTest, NodesShowPerGpuUtilizationToAdminsOnly) {
  ASSERT_TRUE(
      Api().Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}}})).ok());
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/users",
                {{"name", "m"}, {"role", "member"}, {"tenant", "acme"}, {"project", "default"}})
          .ok());
  std::string token = (*Api().Post("/api/v1/tokens", {{"user", "m"}}))["token"];
  auto nodes = ApiClient(url_, token).Get("/api/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  ASSERT_FALSE(nodes->empty());
  for (const json& n : *nodes) {
    for (const json& g : n["gpus"]) EXPECT_FALSE(g.contains("utilization_pct")) << g.dump();
  }
  bool admin_sees = false;
  const json all = *Api().Get("/api/v1/nodes");
  for (const json& n : all) {
    for (const json& g : n["gpus"]) admin_sees |= g.contains("utilization_pct");
  }
  EXPECT_TRUE(admin_sees);
}

// L3: env names that failed only at launch, a negative log offset that gave a 500 with an empty
// body, and form bodies over 8 KiB that got 413 though the limit is 4 MiB.
TEST_F(ApiInputTest, BadEnvNamesOffsetsAndFormBodiesGetClearErrors) {
  size_t before = Api().Get("/api/v1/jobs?all=true")->size();
  for (const std::string& name : {std::string(""), std::string("X=EVIL")}) {
    Reply r = Call("POST", "/api/v1/jobs", token_,
                   json{{"command", {"true"}}, {"env", {{name, "v"}}}}.dump());
    EXPECT_EQ(r.status, 400) << name;
    EXPECT_THAT(r.body, HasSubstr("is not a variable name")) << name;
  }
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), before);
  json job = Submit({{"command", {"true"}}});
  Reply offset = Call(
      "GET", absl::StrCat("/api/v1/jobs/", job["id"].get<int64_t>(), "/logs?offset=-100"), token_);
  EXPECT_EQ(offset.status, 400);
  EXPECT_THAT(offset.body, HasSubstr("offset: \\\"-100\\\" is not a non-negative integer"));
  // Form bodies, small or large, are refused the same way; JSON passes 8 KiB as before.
  std::string spec = json{{"command", {"true"}}, {"env", {{"PAD", std::string(9000, 'p')}}}}.dump();
  for (const std::string& body : {std::string("a=b"), spec}) {
    Reply form = Call("POST", "/api/v1/jobs", token_, body, "application/x-www-form-urlencoded");
    EXPECT_EQ(form.status, 415) << body.size();
    EXPECT_THAT(form.body, HasSubstr("Content-Type: application/json")) << body.size();
  }
  EXPECT_EQ(Call("POST", "/api/v1/jobs", token_, spec).status, 201);
}

// A hostile-tenant run: a report's window that is not an integer (`/api/v1/cost?since_us=abc`)
// was quietly read as the default, so the answer covered all time while the caller believed it
// covered the window asked for. Every report window, page and limit now refuses it by name.
TEST_F(ApiInputTest, UnparseableWindowsAndPagesAreRefusedNotDefaulted) {
  for (const std::string& path :
       {std::string("/api/v1/cost?since_us=abc"), std::string("/api/v1/usage?until_us=1e6"),
        std::string("/api/v1/usage/records?since_us=-5"), std::string("/api/v1/audit?since_us=x"),
        std::string("/api/v1/utilization?until_us=soon"),
        std::string("/api/v1/queues/history?since_us=yesterday"),
        std::string("/api/v1/events?after=abc"), std::string("/api/v1/events?limit=lots"),
        std::string("/api/v1/export/job?limit=many")}) {
    Reply r = Call("GET", path, token_);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    const std::string param = path.substr(path.find('?') + 1, path.find('=') - path.find('?') - 1);
    EXPECT_THAT(r.body, HasSubstr(param + ": \\\"")) << path << ": " << r.body;
  }
  EXPECT_EQ(Call("GET", "/api/v1/cost?since_us=0&until_us=0", token_).status, 200);
}

// Red team: an integer above INT64_MAX was read as a wrapped int64, so `"priority":
// 18446744073709551615` passed the range check and was stored as priority -1 (a record of what
// was never asked). It is refused as out of range and nothing is stored.
TEST_F(ApiInputTest, IntegersAboveInt64AreRefusedNotWrapped) {
  size_t before = Api().Get("/api/v1/jobs?all=true")->size();
  for (const char* big : {"18446744073709551615", "18446744073709551000", "9223372036854775808"}) {
    Reply r = Call("POST", "/api/v1/jobs", token_,
                   absl::StrCat(R"({"command":["true"],"priority":)", big, "}"));
    EXPECT_EQ(r.status, 400) << big << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr("priority: ")) << big;
    EXPECT_THAT(r.body, HasSubstr("out of range")) << big;
  }
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), before);
  // `carve scale` truncated to an int: 4294967298 replicas scaled the service to 2.
  json svc = Submit({{"command", {"sleep", "300"}}, {"kind", "inference"}});
  const std::string scale = absl::StrCat("/api/v1/jobs/", svc["id"].get<int64_t>(), "/scale");
  for (const char* big : {"4294967298", "18446744073709551615", "-4294967295"}) {
    Reply r = Call("POST", scale, token_, absl::StrCat(R"({"replicas":)", big, "}"));
    EXPECT_EQ(r.status, 400) << big << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr(absl::StrCat("replicas: ", big, " is not between 1 and 1000")));
  }
  EXPECT_EQ(
      (*Api().Get(absl::StrCat("/api/v1/jobs/", svc["id"].get<int64_t>())))["spec"]["replicas"], 1);
}

// L3: a YAML alias bomb aborted the CLI; a deep file must not crash it either.
TEST_F(ApiInputTest, YamlBombsAndDeepFilesGiveTheCliAClearError) {
  std::string bomb = "command: [\"true\"]\nenv:\n  a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += absl::StrCat("  ", std::string(1, c), ": &", std::string(1, c), " [");
    for (int i = 0; i < 9; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
  }
  CliRun submit = Carve("submit -f " + WriteFile("bomb.yaml", bomb), token_);
  EXPECT_EQ(submit.exit, 2) << submit.out;
  EXPECT_THAT(submit.out, HasSubstr("more than 200000 values"));
  CliRun apply = Carve("apply -f " + WriteFile("bomb-apply.yaml", "kind: tenant\n" + bomb), token_);
  EXPECT_EQ(apply.exit, 2) << apply.out;
  EXPECT_THAT(apply.out, HasSubstr("more than 200000 values"));
  std::string deep = "command: " + std::string(100, '[') + std::string(100, ']') + "\n";
  CliRun nested = Carve("submit -f " + WriteFile("deep.yaml", deep), token_);
  EXPECT_EQ(nested.exit, 2) << nested.out.substr(0, 500);
  EXPECT_THAT(nested.out, HasSubstr("nests deeper than 64 levels"));
  std::string deeper = "command: " + std::string(10'000, '[') + std::string(10'000, ']') + "\n";
  CliRun parser = Carve("submit -f " + WriteFile("deeper.yaml", deeper), token_);
  EXPECT_EQ(parser.exit, 2) << parser.out.substr(0, 500);
  EXPECT_THAT(parser.out, HasSubstr("invalid YAML"));
}

}  // namespace
}  // namespace carve
