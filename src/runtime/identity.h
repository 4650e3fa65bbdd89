#ifndef CARVE_RUNTIME_IDENTITY_H_
#define CARVE_RUNTIME_IDENTITY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"
#include "runtime/tenancy.h"

namespace carve {

// Identity: users, API tokens and node credentials, and who a bearer token is. It owns its
// tables behind its own reader-writer lock, so a token check (every request) never waits for the
// control plane's lock, a scheduling cycle or a commit.
//
// Writes put their records and events into the caller's StoreBatch, which the caller commits.
// The control plane makes every write under its own lock (taken before this one), which keeps
// the journal in the order memory changed and lets one batch carry a node and its credential (a
// join). Whether a caller may make a change is decided here, with the authorizer (tenancy.h).
class Identity {
 public:
  using Clock = std::function<int64_t()>;  // microseconds since the epoch
  // Adds an event to a batch: actor, type, subject, reason, details (the control plane's Event).
  using Recorder = std::function<void(StoreBatch&, const std::string&, const std::string&,
                                      const std::string&, const std::string&, nlohmann::json)>;

  Identity(Clock now, Recorder record);

  // Loads users and tokens; DataLoss for a record this server cannot read.
  absl::Status Load(Store& store);

  // Unauthenticated, saying why, for a token that is missing, unknown, revoked, expired or whose
  // user was removed.
  absl::StatusOr<Principal> Authenticate(const std::string& token) const;

  // A bootstrap token (no expiry): false when it is registered already.
  bool AddBootstrap(const std::string& token, const std::string& name, Role role,
                    StoreBatch& batch);
  // The user a request describes, checked on its own: fields, name, role and where it belongs,
  // and whether `who` may make it. Whether its tenant and project exist is the caller's to check.
  static absl::StatusOr<UserRecord> NewUser(const nlohmann::json& body, const Principal& who);
  absl::StatusOr<nlohmann::json> CreateUser(UserRecord user, const Principal& who,
                                            StoreBatch& batch);
  // Removes a user and revokes its tokens.
  absl::StatusOr<nlohmann::json> RemoveUser(const std::string& name, const Principal& who,
                                            StoreBatch& batch);
  // Answers with the secret once; only its hash is stored.
  absl::StatusOr<nlohmann::json> CreateToken(const nlohmann::json& body, const Principal& who,
                                             StoreBatch& batch);
  absl::StatusOr<nlohmann::json> RevokeToken(const std::string& id, const Principal& who,
                                             StoreBatch& batch);
  nlohmann::json ListUsers(const Principal& who) const;
  nlohmann::json ListTokens(const Principal& who) const;

  // A join token's registration of `node`, proposing the credential whose SHA-256 is `proposed`
  // ("": the server makes one): the credential's id when it is the node's live one already (the
  // same join retried), nullopt when a credential is to be bound, PermissionDenied when the node
  // holds another, InvalidArgument when the proposed one is someone else's.
  absl::StatusOr<std::optional<std::string>> CheckJoin(const std::string& node,
                                                       const std::string& proposed) const;
  // Binds the credential whose SHA-256 is `hash` to `node` (only the hash is stored); its id.
  std::string BindNodeCredential(const std::string& node, const std::string& hash,
                                 StoreBatch& batch);
  // Revokes the node's credential, so the join token may register the name again.
  absl::StatusOr<nlohmann::json> RevokeNodeCredential(const std::string& node, const Principal& who,
                                                      StoreBatch& batch);

 private:
  const TokenRecord* NodeCredential(const std::string& node) const;  // under mu_
  // The user a token belongs to: the user of its name, unless that user was created after the
  // token (a removed user's name taken again). Null for bootstrap tokens and node credentials.
  const UserRecord* OwnerOf(const TokenRecord& t) const;  // under mu_
  // The tenant of the token's user ("" for bootstrap tokens and node credentials).
  std::string TenantOf(const TokenRecord& t) const;  // under mu_
  bool IdTaken(const std::string& id) const;         // under mu_

  Clock now_;
  Recorder record_;
  mutable std::shared_mutex mu_;
  std::map<std::string, TokenRecord> tokens_;  // sha256 hex -> token
  std::map<std::string, UserRecord> users_;    // name -> user
};

}  // namespace carve

#endif  // CARVE_RUNTIME_IDENTITY_H_
