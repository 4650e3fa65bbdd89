// The Store port on PostgreSQL (libpqxx): records and the hash-chained event log in two tables of
// one database, for a controller whose state must outlive its machine (issue 17). Every commit is
// one transaction under a transaction-scoped advisory lock, so writers in several processes append
// one chain; PostgreSQL's synchronous commit makes it durable before Commit returns.
#ifndef CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_
#define CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_

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

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_POSTGRES_STORE_H_
