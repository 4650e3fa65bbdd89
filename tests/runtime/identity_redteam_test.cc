// Red-team findings against Identity (issue: a node credential's hash is chosen by the join
// token's holder, and tokens are looked up by their 12-digit public id, first in hash order).
#include <gtest/gtest.h>

#include "runtime/control_plane.h"
#include "runtime/identity.h"

namespace carve {
namespace {

using json = nlohmann::json;

const Principal kBootAdmin{"admin", Role::kAdmin, "", "", "t-admin"};

class IdentityRedTeamTest : public ::testing::Test {
 protected:
  IdentityRedTeamTest()
      : identity_([this] { return now_; }, [](StoreBatch&, const std::string&, const std::string&,
                                              const std::string&, const std::string&, json) {}) {}

  void AddMember(const std::string& name) {
    auto user = Identity::NewUser(
        {{"name", name}, {"role", "member"}, {"tenant", "acme"}, {"project", "vision"}},
        kBootAdmin);
    ASSERT_TRUE(user.ok()) << user.status();
    StoreBatch batch;
    ASSERT_TRUE(identity_.CreateUser(*user, kBootAdmin, batch).ok());
  }
  std::string Token(const std::string& user, const std::string& life) {
    StoreBatch batch;
    auto made = identity_.CreateToken({{"user", user}, {"expires_in", life}}, kBootAdmin, batch);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? (*made)["token"].get<std::string>() : "";
  }
  // What the join token's holder can do: propose any 64-hex "SHA-256" for a new node name. This
  // one starts with `id` (a real token's public id) and sorts before every real hash with it.
  void JoinShadowing(const std::string& node, const std::string& id) {
    std::string fake = id + std::string(64 - id.size(), '0');
    auto join = identity_.CheckJoin(node, fake);
    if (!join.ok()) {  // refused: the shadow cannot be made (the fix)
      EXPECT_TRUE(absl::IsInvalidArgument(join.status())) << join.status();
      return;
    }
    StoreBatch batch;
    identity_.BindNodeCredential(node, fake, batch);
  }

  int64_t now_ = 1'700'000'000'000'000;
  Identity identity_;
};

// Repro against the real binary (carve dev): `POST /api/v1/agents/register` with the join token,
// name "evil", node_credential_sha256 = ID + 52 zeros; then `POST /api/v1/tokens/ID/revoke`
// answers 404 to the token's owner, and 200 to an admin but revokes evil's credential, while the
// token keeps authenticating.
TEST_F(IdentityRedTeamTest, AJoinCannotShadowAnotherTokensIdAndMakeItUnrevocable) {
  ASSERT_NO_FATAL_FAILURE(AddMember("ann"));
  std::string secret = Token("ann", "30d");
  auto ann = identity_.Authenticate(secret);
  ASSERT_TRUE(ann.ok());
  ASSERT_NO_FATAL_FAILURE(JoinShadowing("evil", ann->token_id));

  StoreBatch batch;
  auto own = identity_.RevokeToken(ann->token_id, *ann, batch);
  EXPECT_TRUE(own.ok()) << "the owner cannot revoke its own token: " << own.status();
  auto by_admin = identity_.RevokeToken(ann->token_id, kBootAdmin, batch);
  if (by_admin.ok()) {
    EXPECT_EQ(by_admin->value("name", ""), "") << *by_admin;  // not "evil"
  }
  EXPECT_TRUE(absl::IsUnauthenticated(identity_.Authenticate(secret).status()))
      << "a token whose revocation was answered 200 still authenticates";
}

// The same shadow makes ExpiryOf(token_id) read the node credential's "never expires", so a
// 1-hour token mints a 366-day one (M3 again).
TEST_F(IdentityRedTeamTest, AJoinCannotLiftTheParentLifetimeCap) {
  ASSERT_NO_FATAL_FAILURE(AddMember("ann"));
  auto ann = identity_.Authenticate(Token("ann", "1h"));
  ASSERT_TRUE(ann.ok());
  ASSERT_NO_FATAL_FAILURE(JoinShadowing("evil2", ann->token_id));
  StoreBatch batch;
  auto longer = identity_.CreateToken({{"expires_in", "366d"}}, *ann, batch);
  EXPECT_TRUE(absl::IsInvalidArgument(longer.status()))
      << "a 1h token minted a token until " << (longer.ok() ? longer->dump() : "");
}

// The join token's holder knows its own id (the SHA-256 of the secret it holds), so a stolen join
// token shields itself: an admin's `carve token revoke ID` revokes the shadow (200), a second
// one answers "already revoked", and the join token keeps registering nodes. Repro (carve dev):
// JID=$(printf %s "$(cat DATA/agent.token)" | sha256sum | cut -c1-12); register "shield" with
// node_credential_sha256=$JID+52 zeros; POST /api/v1/tokens/$JID/revoke twice.
TEST_F(IdentityRedTeamTest, AStolenJoinTokenCannotShieldItselfFromRevocation) {
  const std::string join_secret = "carve_join_secret";
  StoreBatch boot;
  ASSERT_TRUE(identity_.AddBootstrap(join_secret, "agents", Role::kAgent, boot));
  auto join = identity_.Authenticate(join_secret);
  ASSERT_TRUE(join.ok());
  ASSERT_NO_FATAL_FAILURE(JoinShadowing("shield", join->token_id));
  StoreBatch batch;
  auto first = identity_.RevokeToken(join->token_id, kBootAdmin, batch);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = identity_.RevokeToken(join->token_id, kBootAdmin, batch);
  EXPECT_TRUE(absl::IsUnauthenticated(identity_.Authenticate(join_secret).status()))
      << "revoked (" << first->dump() << "), then " << second.status()
      << ", and the join token still authenticates";
}

// A removed user's tokens stayed listed under a re-created user of the same name, in whatever
// tenant that one belongs to (tokens name their user by name): another tenant's admin read their
// descriptions. A token belongs to the user of its name only if made after that user was.
TEST_F(IdentityRedTeamTest, ARecreatedUserDoesNotInheritTheRemovedOnesTokens) {
  ASSERT_NO_FATAL_FAILURE(AddMember("vw"));
  std::string old = Token("vw", "30d");
  StoreBatch batch;
  ASSERT_TRUE(identity_.RemoveUser("vw", kBootAdmin, batch).ok());
  now_ += 1'000'000;
  auto globex = Identity::NewUser(
      {{"name", "vw"}, {"role", "viewer"}, {"tenant", "globex"}, {"project", "nlp"}}, kBootAdmin);
  ASSERT_TRUE(globex.ok()) << globex.status();
  ASSERT_TRUE(identity_.CreateUser(*globex, kBootAdmin, batch).ok());
  const Principal globex_admin{"gus", Role::kTenantAdmin, "globex", "", "t-gus", "u-gus"};
  EXPECT_EQ(identity_.ListTokens(globex_admin).size(), 0u) << identity_.ListTokens(globex_admin);
  auto vw = identity_.Authenticate(Token("vw", "1h"));
  ASSERT_TRUE(vw.ok()) << vw.status();
  EXPECT_EQ(identity_.ListTokens(*vw).size(), 1u);  // its own new token only
  EXPECT_TRUE(absl::IsUnauthenticated(identity_.Authenticate(old).status()));
}

// A stored token whose role is JSON null ended the server with an uncaught exception at load;
// it is now a DataLoss error that names the record.
TEST(IdentityRecordsTest, AMalformedStoredTokenIsAnErrorNotACrash) {
  auto t = TokenRecord::FromJson(json{{"id", "abc"}, {"role", nullptr}});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  // A removed user or revoked token never authenticates: an unreadable role is no reason to
  // refuse the whole store.
  EXPECT_TRUE(UserRecord::FromJson(json{{"name", "gone"}, {"role", ""}, {"removed", true}}).ok());
  EXPECT_TRUE(TokenRecord::FromJson(json{{"id", "x"}, {"role", "root"}, {"revoked", true}}).ok());
  EXPECT_FALSE(TokenRecord::FromJson(json{{"id", "x"}, {"role", "root"}}).ok());
}

}  // namespace
}  // namespace carve
