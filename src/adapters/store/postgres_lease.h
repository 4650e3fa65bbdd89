// Leadership among several `carve server`s on one PostgreSQL database (issue 17): one row,
// carve_leader, names the server that leads, its address, a term and when its lease expires (the
// database's clock, so the servers' clocks do not matter). The leader renews it well before it
// expires; a follower takes it over once it has expired, raising the term. The term is the
// fencing token: the leader's store (OpenFencedPostgresStore) refuses every commit once the row
// names another term or the lease ran out, so a paused or cut-off leader writes nothing late.
// Taking, renewing and committing all hold the writers' advisory lock: they never interleave.
#ifndef CARVE_ADAPTERS_STORE_POSTGRES_LEASE_H_
#define CARVE_ADAPTERS_STORE_POSTGRES_LEASE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace carve {

struct LeaseRow {
  std::string holder;
  std::string address;  // where the leader's API answers
  int64_t term = 0;
  int64_t expires_in_ms = 0;  // negative: expired that long ago
};

class PostgresLease {
 public:
  // `holder` names this server uniquely among those on the database (e.g. host:port), `address`
  // is its API's URL for clients that ask a follower; `lease_ms` how long a renewal lasts.
  static absl::StatusOr<std::unique_ptr<PostgresLease>> Open(const std::string& url,
                                                             std::string holder,
                                                             std::string address, int64_t lease_ms);
  ~PostgresLease();

  // Takes the lease when nobody holds it, it has expired, or it is this holder's own (a restart):
  // returns the new term, or 0 while another server holds it.
  absl::StatusOr<int64_t> TryAcquire();
  // Extends the lease of `term` by lease_ms. FailedPrecondition once it is not ours any more
  // (taken over, or expired: a leader that missed its renewals steps down).
  absl::Status Renew(int64_t term);
  // Ends the lease of `term` now (a clean stop), so that a follower takes over at once.
  absl::Status Release(int64_t term);
  // The row as it is; nullopt before any server has led.
  absl::StatusOr<std::optional<LeaseRow>> Current();

  const std::string& holder() const { return holder_; }
  int64_t lease_ms() const { return lease_ms_; }

 private:
  struct Connection;  // libpqxx's, reopened when it breaks
  PostgresLease(std::string url, std::string holder, std::string address, int64_t lease_ms);
  template <typename T, typename F>
  absl::StatusOr<T> Run(const char* what, F f);

  const std::string url_, holder_, address_;
  const int64_t lease_ms_;
  std::mutex mu_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace carve

#endif  // CARVE_ADAPTERS_STORE_POSTGRES_LEASE_H_
