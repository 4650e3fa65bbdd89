#include "adapters/store/postgres_store.h"

#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <regex>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "adapters/store/event_hash.h"

namespace carve {
namespace {

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS carve_records (
  kind TEXT COLLATE "C" NOT NULL,
  id TEXT COLLATE "C" NOT NULL,
  json TEXT NOT NULL,
  PRIMARY KEY (kind, id));
CREATE TABLE IF NOT EXISTS carve_events (
  seq BIGINT PRIMARY KEY,
  time_us BIGINT NOT NULL,
  actor TEXT NOT NULL,
  type TEXT NOT NULL,
  subject TEXT NOT NULL,
  reason TEXT NOT NULL,
  details_json TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS carve_leader (
  id INT PRIMARY KEY CHECK (id = 1),
  term BIGINT NOT NULL,
  holder TEXT NOT NULL,
  address TEXT NOT NULL,
  expires TIMESTAMPTZ NOT NULL))";

// A commit of a server that no longer holds the lease it was opened with.
struct Fenced : std::runtime_error {
  using std::runtime_error::runtime_error;
};

StoredEvent ReadEvent(const pqxx::row& r) {
  StoredEvent e;
  e.seq = r[0].as<int64_t>();
  e.time_us = r[1].as<int64_t>();
  e.actor = r[2].as<std::string>();
  e.type = r[3].as<std::string>();
  e.subject = r[4].as<std::string>();
  e.reason = r[5].as<std::string>();
  e.details_json = r[6].as<std::string>();
  e.prev_hash = r[7].as<std::string>();
  e.hash = r[8].as<std::string>();
  return e;
}

class PostgresStore : public Store {
 public:
  PostgresStore(std::string url, std::unique_ptr<pqxx::connection> conn, std::string holder,
                int64_t term, std::string session)
      : url_(std::move(url)),
        holder_(std::move(holder)),
        term_(term),
        session_(std::move(session)),
        conn_(std::move(conn)) {}

  absl::StatusOr<int64_t> Commit(StoreBatch batch) override {
    return Run<int64_t>("commit", [&](pqxx::connection& c) {
      pqxx::work w(c);
      w.exec_params("SELECT pg_advisory_xact_lock($1)", kPostgresWriterLock);
      if (term_ > 0 && w.exec_params("SELECT 1 FROM carve_leader WHERE id = 1 AND holder = $1 "
                                     "AND term = $2 AND expires > clock_timestamp()",
                                     holder_, term_)
                           .empty()) {
        throw Fenced(absl::StrCat("this server (", holder_,
                                  ") no longer holds the leader's lease of term ", term_,
                                  ": another server leads, or the lease ran out"));
      }
      int64_t seq = 0;
      std::string hash = GenesisHash();
      pqxx::result tail = w.exec("SELECT seq, hash FROM carve_events ORDER BY seq DESC LIMIT 1");
      if (!tail.empty()) {
        seq = tail[0][0].as<int64_t>();
        hash = tail[0][1].as<std::string>();
      }
      // Puts before deletes: a record this batch wrote and deleted is gone.
      for (const StoredRecord& r : batch.puts) {
        w.exec_params(
            "INSERT INTO carve_records (kind, id, json) VALUES ($1, $2, $3) "
            "ON CONFLICT (kind, id) DO UPDATE SET json = EXCLUDED.json",
            r.kind, r.id, r.json);
      }
      for (const auto& [kind, id] : batch.deletes) {
        w.exec_params("DELETE FROM carve_records WHERE kind = $1 AND id = $2", kind, id);
      }
      for (StoredEvent& e : batch.events) {
        e.seq = ++seq;
        e.prev_hash = hash;
        absl::StatusOr<std::string> h = EventHash(e, hash);
        if (!h.ok()) throw std::invalid_argument(std::string(h.status().message()));
        e.hash = hash = *h;
        w.exec_params(
            "INSERT INTO carve_events (seq, time_us, actor, type, subject, reason, details_json, "
            "prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            e.seq, e.time_us, e.actor, e.type, e.subject, e.reason, e.details_json, e.prev_hash,
            e.hash);
      }
      w.commit();
      return seq;
    });
  }

  absl::StatusOr<std::vector<StoredRecord>> Load(const std::string& kind) override {
    return Records("load", "SELECT kind, id, json FROM carve_records WHERE kind = $1 ORDER BY id",
                   kind);
  }

  absl::StatusOr<std::optional<StoredRecord>> Get(const std::string& kind,
                                                  const std::string& id) override {
    auto rows = Records(
        "get", "SELECT kind, id, json FROM carve_records WHERE kind = $1 AND id = $2", kind, id);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return std::optional<StoredRecord>();
    return std::optional<StoredRecord>(std::move(rows->front()));
  }

  absl::StatusOr<std::vector<StoredRecord>> List(const std::string& kind,
                                                 const std::string& after_id,
                                                 int64_t limit) override {
    return Records("list",
                   "SELECT kind, id, json FROM carve_records WHERE kind = $1 AND id > $2 "
                   "ORDER BY id LIMIT $3",
                   kind, after_id, std::max<int64_t>(limit, 0));
  }

  absl::StatusOr<std::optional<std::string>> LastId(const std::string& kind) override {
    return Run<std::optional<std::string>>("last id", [&](pqxx::connection& c) {
      pqxx::read_transaction t(c);
      pqxx::result r = t.exec_params(
          "SELECT id FROM carve_records WHERE kind = $1 ORDER BY id DESC LIMIT 1", kind);
      return r.empty() ? std::optional<std::string>() : r[0][0].as<std::string>();
    });
  }

  absl::StatusOr<std::vector<std::string>> Kinds() override {
    return Run<std::vector<std::string>>("kinds", [&](pqxx::connection& c) {
      pqxx::read_transaction t(c);
      std::vector<std::string> kinds;
      for (const pqxx::row& r : t.exec("SELECT DISTINCT kind FROM carve_records ORDER BY kind")) {
        kinds.push_back(r[0].as<std::string>());
      }
      return kinds;
    });
  }

  absl::StatusOr<std::vector<StoredEvent>> Events(int64_t after_seq, int64_t limit) override {
    return Run<std::vector<StoredEvent>>("events", [&](pqxx::connection& c) {
      pqxx::read_transaction t(c);
      std::vector<StoredEvent> out;
      for (const pqxx::row& r : t.exec_params(
               "SELECT seq, time_us, actor, type, subject, reason, details_json, prev_hash, hash "
               "FROM carve_events WHERE seq > $1 ORDER BY seq LIMIT $2",
               after_seq, std::max<int64_t>(limit, 0))) {
        out.push_back(ReadEvent(r));
      }
      return out;
    });
  }

  absl::Status VerifyEventChain() override {
    std::string prev = GenesisHash();
    for (int64_t expected = 1;;) {
      absl::StatusOr<std::vector<StoredEvent>> page = Events(expected - 1, 10000);
      if (!page.ok()) return page.status();
      if (page->empty()) return absl::OkStatus();
      for (const StoredEvent& e : *page) {
        if (absl::Status s = CheckChainLink(e, expected, prev, RedactedPostgresUrl(url_)); !s.ok())
          return s;
        prev = e.hash;
        ++expected;
      }
    }
  }

 private:
  template <typename T, typename F>
  absl::StatusOr<T> Run(const char* what, F f) {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      if (conn_ == nullptr || !conn_->is_open()) {
        conn_ = std::make_unique<pqxx::connection>(url_);  // the last one broke: once more
        if (!session_.empty()) pqxx::nontransaction(*conn_).exec(session_);
      }
      return f(*conn_);
    } catch (const pqxx::broken_connection& e) {
      conn_.reset();
      return absl::UnavailableError(absl::StrCat("postgres ", RedactedPostgresUrl(url_), ": ", what,
                                                 ": the connection broke: ", e.what()));
    } catch (const Fenced& e) {
      return absl::FailedPreconditionError(absl::StrCat(
          "postgres ", RedactedPostgresUrl(url_), ": ", what, " refused (fenced): ", e.what()));
    } catch (const pqxx::in_doubt_error& e) {
      conn_.reset();
      return absl::UnavailableError(absl::StrCat("postgres ", RedactedPostgresUrl(url_), ": ", what,
                                                 ": the commit's outcome is unknown: ", e.what()));
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat("postgres ", RedactedPostgresUrl(url_), ": ", what, ": ", e.what()));
    }
  }

  // The records a query with `params` selects as (kind, id, json).
  template <typename... Params>
  absl::StatusOr<std::vector<StoredRecord>> Records(const char* what, const char* sql,
                                                    const Params&... params) {
    return Run<std::vector<StoredRecord>>(what, [&](pqxx::connection& c) {
      pqxx::read_transaction t(c);
      pqxx::result r = t.exec_params(sql, params...);
      std::vector<StoredRecord> out;
      out.reserve(r.size());
      for (const pqxx::row& row : r) {
        out.push_back(
            {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>()});
      }
      return out;
    });
  }

  const std::string url_;
  const std::string holder_;  // with term_ > 0: the lease every commit must still hold
  const int64_t term_;
  const std::string session_;  // run on each new connection (the fenced store's timeout)
  std::mutex mu_;
  std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace

std::string RedactedPostgresUrl(const std::string& url) {
  static const std::regex kPassword(R"(://([^:/@]*):[^@/]*@)");
  std::string out = std::regex_replace(url, kPassword, "://$1:***@");
  static const std::regex kKeyword(R"(password\s*=\s*\S+)");
  return std::regex_replace(out, kKeyword, "password=***");
}

bool IsPostgresUrl(const std::string& url) {
  return absl::StartsWith(url, "postgres://") || absl::StartsWith(url, "postgresql://");
}

absl::StatusOr<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url) {
  return OpenFencedPostgresStore(url, "", 0, 0);
}

absl::StatusOr<std::unique_ptr<Store>> OpenFencedPostgresStore(const std::string& url,
                                                               const std::string& holder,
                                                               int64_t term, int64_t idle_ms) {
  const std::string session =
      idle_ms > 0 ? absl::StrCat("SET idle_in_transaction_session_timeout = ", idle_ms) : "";
  try {
    auto conn = std::make_unique<pqxx::connection>(url);
    {
      pqxx::work w(*conn);
      w.exec_params("SELECT pg_advisory_xact_lock($1)",
                    kPostgresWriterLock);  // one creator at a time
      w.exec(kSchema);
      w.commit();
    }
    if (!session.empty()) pqxx::nontransaction(*conn).exec(session);
    return std::unique_ptr<Store>(new PostgresStore(url, std::move(conn), holder, term, session));
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(
        absl::StrCat("postgres ", RedactedPostgresUrl(url), ": cannot connect: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("postgres ", RedactedPostgresUrl(url),
                                            ": cannot set up its tables: ", e.what()));
  }
}

}  // namespace carve
