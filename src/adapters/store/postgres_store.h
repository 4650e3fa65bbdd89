// The Store port on PostgreSQL (libpqxx): records and the hash-chained event log in two tables of
// one database, for a controller whose state must outlive its machine (issue 17). Every commit is
// one transaction under a transaction-scoped advisory lock, so writers in several processes append
// one chain; PostgreSQL's synchronous commit makes it durable before Commit returns.
#ifndef CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_
#define CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ports/store.h"

namespace carve {

// Whether `url` names a PostgreSQL store (postgres:// or postgresql://).
bool IsPostgresUrl(const std::string& url);

// Connects (a libpq connection URI or key=value string) and creates the tables when missing.
// Unavailable, naming the server without its password, when it cannot connect.
absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url);

// The store of the leader of several servers on one database (postgres_lease.h): every commit
// first checks, under the writers' lock, that `holder` still holds the lease with `term` and that
// it has not expired, and fails FailedPrecondition ("fenced") otherwise, writing nothing. A paused
// or cut-off leader's late commits are refused once another server has taken over, or its lease
// ran out. Its sessions end a transaction left idle for `idle_ms` (PostgreSQL's
// idle_in_transaction_session_timeout), so a leader paused inside a commit cannot hold the
// writers' lock, and with it every follower's take-over, for longer than that.
absl::StatusOr<std::unique_ptr<Store>> OpenFencedPostgresStore(const std::string& url,
                                                               const std::string& holder,
                                                               int64_t term, int64_t idle_ms);

// For messages: the URL without its password.
std::string RedactedPostgresUrl(const std::string& url);
// The transaction-scoped advisory lock that serializes the database's writers (commits, and
// taking or renewing the lease) across processes.
inline constexpr int64_t kPostgresWriterLock = 0x63617276650001;  // "carve" 1

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_
