// Node credentials (Kubernetes' NodeRestriction as the model), against the real `carve server`
// and `carve agent`: the shared agent.token is a join token that only registers a node holding no
// credential yet; each agent then speaks with its own node's credential (DATA/node.token), which
// registers, heartbeats, reports and ships logs as that node only. The audit names the
// credential that acted, and users cannot take the platform's own actor names.
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/harness.h"
#include "runtime/control_plane.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kTwoNodes = {
    {"node-a", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
    {"node-b", "gpus:\n  - {model: L40S, count: 1, mode: exclusive}\n"},
};

struct Response {
  int status = 0;
  std::string body;
};

class NodeCredentialsTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kTwoNodes; }

  Response Post(const std::string& path, const std::string& token, const std::string& body) {
    httplib::Client cli(url_);
    httplib::Headers headers = {{"Authorization", "Bearer " + token}};
    httplib::Result r = cli.Post(path, headers, body, "application/json");
    if (!r) return {0, "no response"};
    return {r->status, r->body};
  }

  std::string JoinToken() { return Slurp((dir_ / "data/agent.token").string()); }

  // What node `name`'s agent authenticates with: its own credential where it has one (before
  // node credentials: the shared agent token, so every attack below runs on the old code too).
  // The agent saves it right after the registration that lists the node: wait for the file.
  std::string CredentialOf(const std::string& name) {
    std::string path = (dir_ / "agents" / name / "node.token").string();
    Eventually([&] { return !Slurp(path).empty(); }, 5);
    std::string saved = Slurp(path);
    return saved.empty() ? JoinToken() : saved;
  }

  // The id of node `name`'s live credential, "" when it has none.
  std::string CredentialId(const std::string& name) {
    const json tokens = *Api().Get("/api/v1/tokens");
    for (const json& t : tokens) {
      if (t.value("role", "") == "node" && t.value("name", "") == name &&
          !t.value("revoked", false)) {
        return t["id"];
      }
    }
    return "";
  }

  static std::string RegisterBody(const std::string& name) {
    return json{{"name", name},
                {"cpu_milli", 1000},
                {"memory_mib", 1024},
                {"backend", "simulated"},
                {"gpus", json::array()}}
        .dump();
  }

  // Starts a job on node-b's L40S that prints a line and keeps running.
  int64_t RunningJobOnB(json env) {
    json job = Submit({{"command", {"sh", "-c", "echo b-started; sleep 120"}},
                       {"env", env},
                       {"resources", {{"gpus", 1}, {"gpu_model", {"L40S"}}}}});
    int64_t id = job.value("id", int64_t{0});
    EXPECT_TRUE(Eventually([&] {
      return Job(id)["state"] == "running" && Logs(id).find("b-started") != std::string::npos;
    })) << Job(id).dump(2);
    return id;
  }
};

// (1) the join token cannot heartbeat; (2) it cannot register a name that already holds a
// credential. A new name joins once, and after an admin revokes its credential it joins again.
TEST_F(NodeCredentialsTest, JoinTokenOnlyRegistersNodesWithoutACredential) {
  for (const auto& [name, yaml] : Nodes()) {
    std::string path = (dir_ / "agents" / name / "node.token").string();
    CredentialOf(name);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path << " was not saved";
    EXPECT_EQ(st.st_mode & 0777, 0600u) << path;
    EXPECT_THAT(Slurp(path), Not(HasSubstr(JoinToken())));
    EXPECT_FALSE(CredentialId(name).empty()) << name;
  }
  Response beat = Post("/api/v1/agents/heartbeat", JoinToken(), json{{"node", "node-a"}}.dump());
  EXPECT_EQ(beat.status, 403) << beat.body;
  EXPECT_THAT(beat.body, HasSubstr("join token only registers"));
  Response taken = Post("/api/v1/agents/register", JoinToken(), RegisterBody("node-a"));
  EXPECT_EQ(taken.status, 403) << taken.body;
  EXPECT_THAT(taken.body, HasSubstr("already joined"));
  EXPECT_THAT(taken.body, HasSubstr("carve revoke-node-credential node-a"));
  EXPECT_EQ(Node("node-a")["gpus"].size(), 1u);  // not replaced by the forged registration

  // A new node joins once: the answer carries its credential, which acts as that node only.
  Response joined = Post("/api/v1/agents/register", JoinToken(), RegisterBody("node-c"));
  ASSERT_EQ(joined.status, 200) << joined.body;
  std::string secret = json::parse(joined.body).value("node_token", "");
  ASSERT_THAT(secret, HasSubstr("carve_"));
  EXPECT_EQ(Post("/api/v1/agents/heartbeat", secret, json{{"node", "node-c"}}.dump()).status, 200);
  EXPECT_EQ(Post("/api/v1/agents/register", JoinToken(), RegisterBody("node-c")).status, 403);
  // An admin releases the name: the old credential stops working, the join token works again.
  std::string old_id = CredentialId("node-c");
  FILE* p = popen(absl::StrCat(CARVE_BINARY, " --server ", url_, " --token ", token_,
                               " revoke-node-credential node-c 2>&1")
                      .c_str(),
                  "r");
  char buf[4096];
  std::string out(buf, fread(buf, 1, sizeof(buf), p));
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_THAT(out, HasSubstr(old_id));
  EXPECT_EQ(Post("/api/v1/agents/heartbeat", secret, json{{"node", "node-c"}}.dump()).status, 401);
  json revoked = EventsOf("node.credential-revoked");
  ASSERT_EQ(revoked.size(), 1u);
  EXPECT_EQ(revoked[0]["details"]["credentials"], json::array({old_id}));
  EXPECT_EQ(revoked[0]["actor"], "user:admin");
  Response again = Post("/api/v1/agents/register", JoinToken(), RegisterBody("node-c"));
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_NE(CredentialId("node-c"), old_id);
}

// An agent that dies after the server bound its credential and before it read the answer. The
// agent makes and saves its credential before it asks, so its restart speaks with it. Before, the
// server made the credential, the answer died with the agent, and the restarted agent was refused
// as "already joined" until an admin revoked the name (seen under load: an agent killed right
// after it registered).
TEST_F(NodeCredentialsTest, AnAgentThatDiesMidJoinRejoinsWithTheCredentialItSaved) {
  CredentialOf("node-a");
  Kill(agents_[0], SIGKILL);
  ASSERT_EQ(Api().Post("/api/v1/nodes/node-a/credential/revoke", json::object()).status().code(),
            absl::StatusCode::kOk);
  // The join as the dead agent left it: its credential saved, its request served, the answer
  // lost.
  const std::string secret = "carve_" + RandomHex(32);
  std::string path = (dir_ / "agents/node-a/node.token").string();
  std::ofstream(path, std::ios::trunc) << secret;
  json body = json::parse(RegisterBody("node-a"));
  body["node_credential_sha256"] = Sha256Hex(secret);
  Response joined = Post("/api/v1/agents/register", JoinToken(), body.dump());
  ASSERT_EQ(joined.status, 200) << joined.body;
  EXPECT_FALSE(json::parse(joined.body).contains("node_token")) << "the agent has it already";
  std::string id = CredentialId("node-a");
  EXPECT_EQ(id, Sha256Hex(secret).substr(0, 12));
  // The same join again, as an agent retries it when the server died before it answered
  // (ReclaimTimeoutTest restarts the server right after the agents join): served, bound once.
  Response again = Post("/api/v1/agents/register", JoinToken(), body.dump());
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(json::parse(again.body).value("node_credential", ""), id);
  EXPECT_EQ(EventsOf("node.joined").size(), 3u) << "node-a, node-b, node-a's new credential";

  size_t before = EventsOf("node.re-registered").size();
  agents_[0] = StartAgent(0);
  ASSERT_TRUE(Eventually([&] { return EventsOf("node.re-registered").size() > before; }))
      << Slurp((dir_ / "node-a.log").string());
  EXPECT_FALSE(Dead(agents_[0])) << Slurp((dir_ / "node-a.log").string());
  EXPECT_EQ(Slurp(path), secret);
  EXPECT_EQ(CredentialId("node-a"), id);
  EXPECT_EQ(Post("/api/v1/agents/heartbeat", secret, json{{"node", "node-a"}}.dump()).status, 200);

  // A proposal is a digest; and it never takes over a token that exists.
  body["name"] = "node-c";
  body["node_credential_sha256"] = "not-a-digest";
  Response bad = Post("/api/v1/agents/register", JoinToken(), body.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("node_credential_sha256"));
  body["node_credential_sha256"] = Sha256Hex(token_);  // the admin's token
  Response taken = Post("/api/v1/agents/register", JoinToken(), body.dump());
  EXPECT_EQ(taken.status, 400) << taken.body;
  EXPECT_THAT(taken.body, HasSubstr("already in use"));
  EXPECT_EQ(Api().Get("/api/v1/nodes").status().code(), absl::StatusCode::kOk)
      << "the admin token still acts as the admin";
}

// (5) Another node's assignments, with their env secrets, never reach a node credential: node-b's
// agent is down and node-a's credential heartbeats as node-b while node-b's job is placed. The
// restarted node-b agent re-registers with its saved credential and runs the job.
TEST_F(NodeCredentialsTest, AnotherNodesAssignmentsAndSecretsNeverReachANode) {
  std::string b_credential = CredentialOf("node-b");
  Kill(agents_[1], SIGTERM);
  agents_[1] = 0;
  json job = Submit({{"command", {"sh", "-c", "echo $B_SECRET | wc -c; sleep 120"}},
                     {"env", {{"B_SECRET", "b-secret-4242"}}},
                     {"resources", {{"gpus", 1}, {"gpu_model", {"L40S"}}}}});
  int64_t id = job["id"];
  std::string tok_a = CredentialOf("node-a");
  std::vector<Response> answers;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    answers.push_back(Post("/api/v1/agents/heartbeat", tok_a,
                           json{{"node", "node-b"}, {"replicas", json::array()}}.dump()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(answers.empty());
  for (const Response& r : answers) {
    EXPECT_EQ(r.status, 403) << r.body;
    ASSERT_THAT(r.body, Not(HasSubstr("b-secret-4242")));
  }
  agents_[1] = StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  EXPECT_EQ(Job(id)["replicas"][0]["node"], "node-b");
  // The restart re-registered with the saved credential: no new one was issued.
  EXPECT_EQ(Slurp((dir_ / "agents/node-b/node.token").string()), b_credential);
  EXPECT_EQ(EventsOf("node.joined").size(), 2u);  // node-a and node-b, once each
  EXPECT_EQ(EventsOf("node.re-registered").size(), 1u);
  EXPECT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object()).ok());
  EXPECT_EQ(WaitFinal(id)["state"], "cancelled");
}

// (3) heartbeat as another node, (4) reports about another node's replica, (6) logs for another
// node's replica, (7) registering as another node: all refused, and nothing changes. (8) The job
// start names node-b's credential.
TEST_F(NodeCredentialsTest, ANodeCredentialActsOnlyForItsOwnNode) {
  int64_t id = RunningJobOnB({{"B_SECRET", "b-secret-4242"}});
  std::string tok_a = CredentialOf("node-a");
  std::string b_log = Logs(id);
  json forged_exit = json::array({{{"job", id},
                                   {"replica", 0},
                                   {"state", "exited"},
                                   {"exit_code", 0},
                                   {"ended_us", 1},
                                   {"reclaim", {{"status", "verified"}}}}});
  // (3) A heartbeat as node-b reporting its job's exit with a fake verified reclaim.
  Response as_b = Post("/api/v1/agents/heartbeat", tok_a,
                       json{{"node", "node-b"}, {"replicas", forged_exit}}.dump());
  EXPECT_EQ(as_b.status, 403) << as_b.body;
  EXPECT_THAT(as_b.body, HasSubstr("belongs to node \\\"node-a\\\""));
  EXPECT_THAT(as_b.body, Not(HasSubstr("b-secret-4242")));
  EXPECT_EQ(Job(id)["state"], "running");
  // (4) The same report as node-a itself: node-b's replica is not node-a's to report.
  Response as_a = Post("/api/v1/agents/heartbeat", tok_a,
                       json{{"node", "node-a"}, {"replicas", forged_exit}}.dump());
  EXPECT_EQ(as_a.status, 200) << as_a.body;
  EXPECT_THAT(as_a.body, Not(HasSubstr("b-secret-4242")));
  EXPECT_EQ(Job(id)["state"], "running");
  EXPECT_EQ(Job(id)["replicas"][0]["state"], "running");
  EXPECT_TRUE(EventsOf("job.replica-exited").empty());
  // (6) Logs for node-b's replica answer like a missing replica; node-b's log is unchanged.
  Response missing =
      Post(absl::StrCat("/api/v1/agents/logs?job=", id + 1000, "&replica=0"), tok_a, "x");
  Response forged =
      Post(absl::StrCat("/api/v1/agents/logs?job=", id, "&replica=0&offset=", b_log.size()), tok_a,
           "forged log line\n");
  EXPECT_EQ(forged.status, 404) << forged.body;
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(Logs(id), b_log);
  // (7) Registering as node-b.
  Response reg = Post("/api/v1/agents/register", tok_a, RegisterBody("node-b"));
  EXPECT_EQ(reg.status, 403) << reg.body;
  EXPECT_EQ(Node("node-b")["gpus"].size(), 1u);
  EXPECT_TRUE(EventsOf("node.re-registered").empty());
  // node-b itself still runs, reports and ships its job (its own credential works).
  EXPECT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", id, "/cancel"), json::object()).ok());
  json done = WaitFinal(id);
  EXPECT_EQ(done["state"], "cancelled") << done.dump(2);
  // (8) The job's start names the credential that reported it: node-b's own.
  json started = EventsOf("job.started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0]["actor"], "agent:node-b");
  EXPECT_EQ(started[0]["details"].value("actor_token", ""), CredentialId("node-b"));
  EXPECT_EQ(started[0]["details"].value("actor_node", ""), "node-b");
  EXPECT_EQ(started[0]["details"].value("actor_role", ""), "node");
}

// (9) Users cannot take the names the audit gives the platform's own actors; user actions name
// the token and tenant that acted.
TEST_F(NodeCredentialsTest, SystemNamesAreReservedAndUserActionsNameTheirCredential) {
  ASSERT_TRUE(
      Api().Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}}})).ok());
  ASSERT_TRUE(Api()
                  .Post("/api/v1/users",
                        {{"name", "acme-boss"}, {"role", "tenant-admin"}, {"tenant", "acme"}})
                  .ok());
  auto boss = Api().Post("/api/v1/tokens", {{"user", "acme-boss"}, {"expires_in", "1d"}});
  ASSERT_TRUE(boss.ok()) << boss.status();
  std::string boss_token = (*boss)["token"];
  std::string boss_id = (*boss)["id"];
  for (const char* name : {"admin", "agents", "scheduler", "system", "root", "agent-x", "node.7"}) {
    Response r =
        Post("/api/v1/users", boss_token, json{{"name", name}, {"role", "tenant-admin"}}.dump());
    EXPECT_EQ(r.status, 400) << name << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr("reserved")) << name;
  }
  Response admin = Post("/api/v1/users", token_, json{{"name", "admin"}, {"role", "admin"}}.dump());
  EXPECT_EQ(admin.status, 400) << admin.body;
  const json users = *Api().Get("/api/v1/users");
  EXPECT_EQ(users.size(), 1u) << users.dump();
  Response alice =
      Post("/api/v1/users", boss_token, json{{"name", "alice"}, {"role", "tenant-admin"}}.dump());
  ASSERT_EQ(alice.status, 201) << alice.body;
  json created = EventsOf("user.created");
  ASSERT_EQ(created.size(), 2u);
  EXPECT_EQ(created[1]["actor"], "user:acme-boss");
  EXPECT_EQ(created[1]["details"].value("actor_token", ""), boss_id);
  EXPECT_EQ(created[1]["details"].value("actor_tenant", ""), "acme");
  EXPECT_EQ(created[1]["details"].value("actor_role", ""), "tenant-admin");
  auto audit = Api().GetText("/api/v1/audit?tenant=acme&format=jsonl");
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_THAT(*audit, HasSubstr(absl::StrCat("\"actor_token\":\"", boss_id, "\"")));
}

}  // namespace
}  // namespace carve
