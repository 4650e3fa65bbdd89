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
