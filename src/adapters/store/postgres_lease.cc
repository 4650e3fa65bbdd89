#include "adapters/store/postgres_lease.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <utility>

#include "absl/strings/str_cat.h"
#include "adapters/store/postgres_store.h"

namespace carve {

struct PostgresLease::Connection {
  pqxx::connection c;
};

PostgresLease::PostgresLease(std::string url, std::string holder, std::string address,
                             int64_t lease_ms)
    : url_(std::move(url)),
      holder_(std::move(holder)),
      address_(std::move(address)),
      lease_ms_(lease_ms) {}

PostgresLease::~PostgresLease() = default;

absl::StatusOr<std::unique_ptr<PostgresLease>> PostgresLease::Open(const std::string& url,
                                                                   std::string holder,
                                                                   std::string address,
                                                                   int64_t lease_ms) {
  if (lease_ms < 100) {
    return absl::InvalidArgumentError(absl::StrCat("a lease of ", lease_ms, " ms is too short"));
  }
  // The store creates the tables, the lease's among them.
  if (auto store = OpenPostgresStore(url); !store.ok()) return store.status();
  std::unique_ptr<PostgresLease> lease(
      new PostgresLease(url, std::move(holder), std::move(address), lease_ms));
  if (auto row = lease->Current(); !row.ok()) return row.status();  // connects
  return lease;
}

namespace {

// The lease's connection gives up on a silent server within a third of the lease (the kernel's
// TCP_USER_TIMEOUT), so a renewal never hangs past the point where it matters.
std::string WithTimeouts(const std::string& url, int64_t lease_ms) {
  return absl::StrCat(url, url.find('?') == std::string::npos ? "?" : "&",
                      "connect_timeout=2&tcp_user_timeout=", std::max<int64_t>(100, lease_ms / 3));
}

}  // namespace

template <typename T, typename F>
absl::StatusOr<T> PostgresLease::Run(const char* what, F f) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (conn_ == nullptr || !conn_->c.is_open()) {
      conn_.reset(new Connection{pqxx::connection(WithTimeouts(url_, lease_ms_))});
    }
    return f(conn_->c);
  } catch (const pqxx::broken_connection& e) {
    conn_.reset();
    return absl::UnavailableError(absl::StrCat("postgres ", RedactedPostgresUrl(url_), ": lease ",
                                               what, ": the connection broke: ", e.what()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("postgres ", RedactedPostgresUrl(url_), ": lease ", what, ": ", e.what()));
  }
}

absl::StatusOr<int64_t> PostgresLease::TryAcquire() {
  return Run<int64_t>("take", [&](pqxx::connection& c) {
    pqxx::work w(c);
    // A writers' lock held by a paused leader's commit fails this try instead of blocking it.
    w.exec(absl::StrCat("SET LOCAL lock_timeout = ", std::max<int64_t>(100, lease_ms_ / 6)));
    w.exec_params("SELECT pg_advisory_xact_lock($1)", kPostgresWriterLock);
    pqxx::result r = w.exec_params(
        "INSERT INTO carve_leader (id, term, holder, address, expires) VALUES (1, 1, $1, $2, "
        "clock_timestamp() + $3 * interval '1 millisecond') "
        "ON CONFLICT (id) DO UPDATE SET term = carve_leader.term + 1, holder = EXCLUDED.holder, "
        "address = EXCLUDED.address, expires = EXCLUDED.expires "
        "WHERE carve_leader.expires < clock_timestamp() OR carve_leader.holder = EXCLUDED.holder "
        "RETURNING term",
        holder_, address_, lease_ms_);
    w.commit();
    return r.empty() ? int64_t{0} : r[0][0].as<int64_t>();
  });
}

absl::Status PostgresLease::Renew(int64_t term) {
  auto renewed = Run<bool>("renew", [&](pqxx::connection& c) {
    pqxx::work w(c);
    // A writers' lock held by a paused leader's commit fails this try instead of blocking it.
    w.exec(absl::StrCat("SET LOCAL lock_timeout = ", std::max<int64_t>(100, lease_ms_ / 6)));
    w.exec_params("SELECT pg_advisory_xact_lock($1)", kPostgresWriterLock);
    pqxx::result r = w.exec_params(
        "UPDATE carve_leader SET expires = clock_timestamp() + $3 * interval '1 millisecond' "
        "WHERE id = 1 AND holder = $1 AND term = $2 AND expires > clock_timestamp() RETURNING 1",
        holder_, term, lease_ms_);
    w.commit();
    return !r.empty();
  });
  if (!renewed.ok()) return renewed.status();
  if (*renewed) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the leader's lease of term ", term, " is no longer ", holder_,
                   "'s: another server took it over, or it ran out before it was renewed"));
}

absl::Status PostgresLease::Release(int64_t term) {
  return Run<bool>("release",
                   [&](pqxx::connection& c) {
                     pqxx::work w(c);
                     // A writers' lock held by a paused leader's commit fails this try instead of
                     // blocking it.
                     w.exec(absl::StrCat("SET LOCAL lock_timeout = ",
                                         std::max<int64_t>(100, lease_ms_ / 6)));
                     w.exec_params("SELECT pg_advisory_xact_lock($1)", kPostgresWriterLock);
                     w.exec_params(
                         "UPDATE carve_leader SET expires = clock_timestamp() - interval '1 "
                         "millisecond' WHERE id = 1 AND holder = $1 AND term = $2",
                         holder_, term);
                     w.commit();
                     return true;
                   })
      .status();
}

absl::StatusOr<std::optional<LeaseRow>> PostgresLease::Current() {
  return Run<std::optional<LeaseRow>>("read", [&](pqxx::connection& c) {
    pqxx::read_transaction t(c);
    pqxx::result r = t.exec(
        "SELECT holder, address, term, "
        "(EXTRACT(EPOCH FROM (expires - clock_timestamp())) * 1000)::BIGINT FROM carve_leader "
        "WHERE id = 1");
    if (r.empty()) return std::optional<LeaseRow>();
    return std::optional<LeaseRow>(LeaseRow{r[0][0].as<std::string>(), r[0][1].as<std::string>(),
                                            r[0][2].as<int64_t>(), r[0][3].as<int64_t>()});
  });
}

}  // namespace carve
