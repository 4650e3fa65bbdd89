// Acceptance reports kept by the server (docs/poc.md, "Kept by the server"): `carve poc run`
// sends its records and its own re-check, the server checks the records against what it holds
// (each job exists, each recorded chain head is the event it names) and keeps the report with
// both, and the dashboard lists them. The server does not re-run a test: it says what it
// checked.
#ifndef CARVE_RUNTIME_POC_REPORTS_H_
#define CARVE_RUNTIME_POC_REPORTS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace carve {

inline constexpr int kMaxPocRecords = 200;

// What the server can look up about its own history.
struct PocLookups {
  // The hash of event `seq`, or an error (NotFound when there is no such event).
  std::function<absl::StatusOr<std::string>(int64_t seq)> event_hash;
  // Whether job `id` exists here (live or ended).
  std::function<bool(int64_t id)> job_exists;
};

// The document to keep for an uploaded report {meta, records, verify?}: the body's meta,
// records and verify (the kit's own claims, as `carve poc verify` prints them), the verdict
// counts, the SHA-256 of the records as sent, and `server_checks`. InvalidArgument naming the
// first thing wrong (a record that does not decode: its index and why).
absl::StatusOr<nlohmann::json> CheckPocReport(const nlohmann::json& body, const PocLookups& look);

// A kept report without its records: for the list.
nlohmann::json PocReportSummary(const nlohmann::json& kept);

}  // namespace carve

#endif  // CARVE_RUNTIME_POC_REPORTS_H_
