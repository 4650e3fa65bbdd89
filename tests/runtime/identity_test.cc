// Identity (users, tokens, node credentials) and the authorizer: token checks that never wait
// for the control plane's lock, records it cannot read, and which role may do what.
#include "runtime/identity.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "control_plane_fixture.h"
#include "runtime/control_plane.h"

namespace carve {
namespace {

using json = nlohmann::json;

constexpr char kAdminToken[] = "carve_identity_test_admin";
const Principal kAdmin{"admin", Role::kAdmin, "", "", "t-admin"};

class IdentityTest : public ControlPlaneFixture {
 protected:
  void Open(ControlPlane::Options options = {}) {
    OpenPlane("identity", std::move(options), [this] { return now_; });
    ASSERT_TRUE(cp_->AddToken(kAdminToken, "admin", Role::kAdmin).ok());
  }
  int64_t now_ = 1'700'000'000'000'000;
};

// Every request checks its token; with the check under the control plane's one lock, each call
// waited for whatever step of a scheduling cycle held it (issue 12). Here a token is checked,
// from another thread, while the cycle holds the lock: it must be answered before the cycle
// lets go. On the old structure the check waited on the lock, and this test failed at wait_for.
TEST_F(IdentityTest, TokenChecksAreAnsweredWhileACycleHoldsTheLock) {
  std::future_status checked = std::future_status::deferred;
  // Outlives the hook: a check that waits for the lock finishes once the cycle lets go of it
  // (a future of std::async waits for its task when destroyed).
  std::future<absl::StatusOr<Principal>> check;
  ControlPlane::Options options;
  options.while_locked = [&] {
    if (check.valid()) return;  // once
    check = std::async(std::launch::async, [&] { return cp_->Authenticate(kAdminToken); });
    // Bounded only so that a failure ends the test instead of hanging it: the answer comes at
    // once unless the check waits for this very lock.
    checked = check.wait_for(std::chrono::seconds(30));
  };
  Open(std::move(options));
  ASSERT_TRUE(cp_->ScheduleOnce().ok());
  ASSERT_TRUE(check.valid());
  absl::StatusOr<Principal> who = check.get();
  EXPECT_EQ(checked, std::future_status::ready) << "the token check waited for the cycle's lock";
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ(who->role, Role::kAdmin);
}

// A stored user or token whose role this server does not know is refused at load, not mapped
// to a guess (an unknown role once read as "" would have matched no check, or the wrong one).
TEST_F(IdentityTest, AStoredRoleThisServerDoesNotKnowIsRefusedAtLoad) {
  Open();
  cp_.reset();
  StoreBatch batch;
  batch.puts.push_back(
      {"user", "eve",
       json{
           {"id", "u-0123456789abcdef"}, {"name", "eve"}, {"role", "superuser"}, {"tenant", "acme"}}
           .dump()});
  ASSERT_TRUE(store_->Commit(batch).ok());
  ControlPlane::Options options;
  options.log_dir = (dir_ / "logs").string();
  auto reopened = ControlPlane::Open(store_.get(), &catalog_, options, [this] { return now_; });
  ASSERT_FALSE(reopened.ok());
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(reopened.status().message().find("\"superuser\""), std::string::npos)
      << reopened.status();
}

TEST_F(IdentityTest, TheJoinTokenBindsOneCredentialPerNodeAndARetryGetsTheSameOne) {
  Open();
  const Principal join{"agents", Role::kAgent, "", "", "t-join"};
  const std::string hash = Sha256Hex("carve_node_a_secret");
  json node = {{"name", "node-a"},       {"cpu_milli", 1000},     {"memory_mib", 1024},
               {"backend", "simulated"}, {"gpus", json::array()}, {"node_credential_sha256", hash}};
  auto first = cp_->Register(node, join);
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = cp_->Register(node, join);  // the answer was lost; the agent asks again
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)["node_credential"], (*first)["node_credential"]);
  auto as_node = cp_->Authenticate("carve_node_a_secret");
  ASSERT_TRUE(as_node.ok()) << as_node.status();
  EXPECT_EQ(as_node->role, Role::kNode);
  EXPECT_EQ(as_node->name, "node-a");
  node["node_credential_sha256"] = Sha256Hex("another secret");
  EXPECT_EQ(cp_->Register(node, join).status().code(), absl::StatusCode::kPermissionDenied);
  node["name"] = "node-b";
  node["node_credential_sha256"] = hash;  // node-a's: never bound to a second node
  EXPECT_EQ(cp_->Register(node, join).status().code(), absl::StatusCode::kInvalidArgument);
}

// The authorizer's table: which role may do each verb, and nothing else decides it.
TEST(AuthorizerTest, EachVerbAllowsItsRolesOnly) {
  const Role roles[] = {Role::kAdmin,  Role::kTenantAdmin, Role::kMember,
                        Role::kViewer, Role::kAgent,       Role::kNode};
  struct Row {
    Verb verb;
    const char* allowed;  // one letter per role above: A T M V G N
  };
  const Row rows[] = {
      {Verb::kRead, "ATMV.."},    {Verb::kWrite, "ATMV.."},    {Verb::kConfigure, "A....."},
      {Verb::kOperate, "A....."}, {Verb::kInspect, "A....."},  {Verb::kReport, "AT...."},
      {Verb::kJoin, "A...GN"},    {Verb::kNodeCall, "A....N"},
  };
  for (const Row& row : rows) {
    for (size_t i = 0; i < 6; ++i) {
      Principal who{"x", roles[i], "acme", "vision", "t-x"};
      absl::Status s = Authorize(who, row.verb);
      EXPECT_EQ(s.ok(), row.allowed[i] != '.')
          << "verb " << static_cast<int>(row.verb) << " role " << Name(roles[i]) << ": " << s;
      if (!s.ok()) {
        EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
      }
    }
  }
  EXPECT_TRUE(ActsAs(Principal{"node-a", Role::kNode}, "node-a", "heartbeats").ok());
  EXPECT_FALSE(ActsAs(Principal{"node-a", Role::kNode}, "node-b", "heartbeats").ok());
  EXPECT_TRUE(ActsAs(Principal{"root", Role::kAdmin}, "node-b", "heartbeats").ok());
}

}  // namespace
}  // namespace carve

namespace carve {
namespace {

// Identity on its own, on a virtual clock: what each write puts into the batch, and when a token
// stops working.
class IdentityServiceTest : public ::testing::Test {
 protected:
  IdentityServiceTest()
      : identity_([this] { return now_; },
                  [this](StoreBatch&, const std::string& actor, const std::string& type,
                         const std::string& subject, const std::string&,
                         json) { events_.push_back(type + " " + subject + " by " + actor); }) {}

  // A user `name` of tenant acme, project vision, made by the bootstrap admin.
  void AddUser(const std::string& name, const std::string& role) {
    json body = {{"name", name}, {"role", role}, {"tenant", "acme"}};
    if (role != "tenant-admin") body["project"] = "vision";
    auto user = Identity::NewUser(body, kAdmin);
    ASSERT_TRUE(user.ok()) << user.status();
    StoreBatch batch;
    ASSERT_TRUE(identity_.CreateUser(*user, kAdmin, batch).ok());
    EXPECT_EQ(batch.puts.size(), 1u);
  }
  // A token for `user`, as `who`; its secret.
  std::string Token(const std::string& user, const Principal& who, const std::string& life) {
    StoreBatch batch;
    auto made = identity_.CreateToken({{"user", user}, {"expires_in", life}}, who, batch);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? (*made)["token"].get<std::string>() : "";
  }

  int64_t now_ = 1'700'000'000'000'000;
  std::vector<std::string> events_;
  Identity identity_;
};

TEST_F(IdentityServiceTest, ATokenWorksUntilItExpiresAndNotAfterItsUserIsRemoved) {
  ASSERT_NO_FATAL_FAILURE(AddUser("ann", "member"));
  std::string secret = Token("ann", kAdmin, "2h");
  auto ann = identity_.Authenticate(secret);
  ASSERT_TRUE(ann.ok()) << ann.status();
  EXPECT_EQ(ann->role, Role::kMember);
  EXPECT_EQ(ann->tenant, "acme");
  now_ += int64_t{2} * 3600 * 1'000'000 - 1;  // the last microsecond of its life
  EXPECT_TRUE(identity_.Authenticate(secret).ok());
  now_ += 1;
  EXPECT_TRUE(absl::IsUnauthenticated(identity_.Authenticate(secret).status()));

  std::string fresh = Token("ann", kAdmin, "1h");
  StoreBatch batch;
  auto removed = identity_.RemoveUser("ann", kAdmin, batch);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ((*removed)["tokens_revoked"], 2);
  EXPECT_EQ(batch.puts.size(), 3u);  // the user and its two tokens
  EXPECT_TRUE(absl::IsUnauthenticated(identity_.Authenticate(fresh).status()));
  EXPECT_EQ(events_.back(), "user.removed user/ann by user:admin");
}

TEST_F(IdentityServiceTest, ATokenCannotOutliveTheTokenThatMadeIt) {
  ASSERT_NO_FATAL_FAILURE(AddUser("ann", "member"));
  std::string parent = Token("ann", kAdmin, "1h");
  auto ann = identity_.Authenticate(parent);
  ASSERT_TRUE(ann.ok());
  StoreBatch batch;
  auto longer = identity_.CreateToken({{"expires_in", "2h"}}, *ann, batch);
  EXPECT_TRUE(absl::IsInvalidArgument(longer.status())) << longer.status();
  EXPECT_TRUE(batch.puts.empty());  // a refused write puts nothing into the batch
  auto capped = identity_.CreateToken(json::object(), *ann, batch);  // left out: capped
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ((*capped)["expires_us"], now_ + int64_t{3600} * 1'000'000);
}

TEST_F(IdentityServiceTest, ATenantAdminManagesItsTenantOnly) {
  ASSERT_NO_FATAL_FAILURE(AddUser("tom", "tenant-admin"));
  auto tom = identity_.Authenticate(Token("tom", kAdmin, "1h"));
  ASSERT_TRUE(tom.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(
      Identity::NewUser({{"name", "root2"}, {"role", "admin"}, {"tenant", ""}}, *tom).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(
      Identity::NewUser({{"name", "gus"}, {"tenant", "globex"}, {"project", "p"}}, *tom).status()));
  auto ok = Identity::NewUser({{"name", "amy"}, {"project", "vision"}}, *tom);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tenant, "acme");  // a tenant-admin's users default to its tenant
  StoreBatch batch;
  EXPECT_TRUE(absl::IsNotFound(identity_.RemoveUser("nobody", *tom, batch).status()));
}

}  // namespace
}  // namespace carve
