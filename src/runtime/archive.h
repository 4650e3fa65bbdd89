#ifndef CARVE_RUNTIME_ARCHIVE_H_
#define CARVE_RUNTIME_ARCHIVE_H_

// Leaving, or moving in: `carve export all --out DIR` writes a server's configuration and
// history to DIR; `carve import DIR --data NEW` writes it into an empty store, which a server
// then starts on (docs/operations.md "Export and import").
//
// DIR holds:
//   manifest.json         format, the source server, when, and per file: kind, records, bytes,
//                         SHA-256; the event chain's length and head hash; what was left out
//   config.yaml           every configuration document, re-applyable with `carve apply -f`
//   records/KIND.jsonl    one stored record per line, {"id", "doc"}, raw as the server stored it
//   events.jsonl          the event log, one event per line with its hash
//
// What an import does not bring: tokens (secrets; people make new ones), live jobs (they run on
// the old cluster; the manifest counts them), node records (nodes register with the new server).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "ports/store.h"

namespace carve {

class ApiClient;
class GpuCatalog;

inline constexpr char kArchiveFormat[] = "carve-export/1";
// The stored kinds an export reads raw (records/KIND.jsonl), besides configuration: in the
// order an import writes them. "job" (live jobs) is read only to be counted.
inline constexpr const char* kArchiveKinds[] = {"user",        "node-modes", "counter",
                                                "job.done",    "usage",      "utilization",
                                                "queue_usage", "poc_report", "job"};
// Where the imported event log lives in the new store: one record per event, id its seq as 12
// digits, doc the event with its hash and prev_hash. The new store's own chain starts afresh
// and its event store.imported names the imported chain's head.
inline constexpr char kImportedEventKind[] = "audit.imported";

bool IsArchiveKind(const std::string& kind);

// An archived event (an events.jsonl line) as stored, checked: DataLoss when its hash does not
// follow from its fields and `prev_hash`.
absl::StatusOr<StoredEvent> ArchivedEvent(const nlohmann::json& e, const std::string& prev_hash);

// Writes DIR (created; refused when it holds anything) from the server `client` talks to, with
// an admin's token. Returns the manifest.
absl::StatusOr<nlohmann::json> ExportArchive(ApiClient& client, const std::string& dir);

// Checks DIR against its manifest (every file's SHA-256 and count, the event chain), then, into
// `store` only when it holds no record and no event: the configuration through the same checks
// as `carve apply`, the records, the imported event log, and one event store.imported. Returns
// what was imported. On a failure after the first write the store is partial: the message
// says so (import into a fresh directory again).
absl::StatusOr<nlohmann::json> ImportArchive(const std::string& dir, Store& store,
                                             const GpuCatalog& catalog, const std::string& log_dir);

// One imported event as its record of kImportedEventKind holds it: every hashed field, its link
// and hash (events.jsonl's lines have the same shape).
nlohmann::json ImportedEventDoc(const StoredEvent& e);

// Recomputes an imported event log's chain (records of kImportedEventKind in `store`):
// {events, head, verified: true} or DataLoss naming the first event that does not match.
absl::StatusOr<nlohmann::json> VerifyImportedEvents(Store& store);

}  // namespace carve

#endif  // CARVE_RUNTIME_ARCHIVE_H_
