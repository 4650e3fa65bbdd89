// `carve import` (archive.h): an archive checked against its manifest, then written into an
// empty store.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "adapters/store/event_hash.h"
#include "runtime/archive.h"
#include "runtime/configuration.h"
#include "runtime/control_plane.h"
#include "runtime/job_spec.h"
#include "runtime/store_migrate.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr size_t kBatch = 500;

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Non-empty lines of a JSONL file, each parsed.
absl::StatusOr<std::vector<json>> JsonLines(const std::string& path, const std::string& text) {
  std::vector<json> out;
  int line = 0;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line;
    json j = json::parse(l, nullptr, false);
    if (j.is_discarded()) return absl::DataLossError(absl::StrCat(path, ":", line, ": not JSON"));
    out.push_back(std::move(j));
  }
  return out;
}

// What the archive holds, every file checked against the manifest.
struct Archive {
  json manifest;
  json config = json::array();
  std::vector<std::pair<std::string, std::vector<json>>> records;  // kind, {id, doc}
  std::vector<StoredEvent> events;
};

absl::Status CheckFile(const std::string& dir, const json& entry, std::string& text) {
  const std::string path = dir + "/" + entry.value("path", "");
  auto read = ReadWhole(path);
  if (!read.ok()) return read.status();
  if (Sha256Hex(*read) != entry.value("sha256", "")) {
    return absl::DataLossError(absl::StrCat(
        path, ": its SHA-256 is not the manifest's; the file changed after the export"));
  }
  text = *std::move(read);
  return absl::OkStatus();
}

absl::Status ReadEvents(const std::string& path, const std::string& text, Archive& a) {
  auto lines = JsonLines(path, text);
  if (!lines.ok()) return lines.status();
  std::string prev = GenesisHash();
  for (const json& e : *lines) {
    auto event = ArchivedEvent(e, prev);
    if (!event.ok()) return absl::DataLossError(absl::StrCat(path, ": ", event.status().message()));
    if (event->seq != static_cast<int64_t>(a.events.size()) + 1) {
      return absl::DataLossError(
          absl::StrCat(path, ": event ", event->seq, " where ", a.events.size() + 1, " belongs"));
    }
    prev = event->hash;
    a.events.push_back(*std::move(event));
  }
  if (prev != a.manifest["events"].value("head_hash", "") ||
      static_cast<int64_t>(a.events.size()) != a.manifest["events"].value("events", int64_t{0})) {
    return absl::DataLossError(
        absl::StrCat(path, ": the chain's head or length is not the manifest's"));
  }
  return absl::OkStatus();
}

// The manifest's shape: every file a plain name in the directory with its kind and SHA-256, the
// chain's head and length, and exactly one event log.
absl::Status CheckManifest(const std::string& dir, const json& m) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/manifest.json: ", why));
  };
  if (!m.is_object() || m.value("format", json()) != kArchiveFormat) {
    return bad(absl::StrCat("not a ", kArchiveFormat, " manifest"));
  }
  const json files = m.value("files", json());
  const json events = m.value("events", json());
  if (!files.is_array()) return bad("files: must be a list");
  if (!events.is_object() || !events.value("head_hash", json()).is_string() ||
      !events.value("events", json()).is_number_integer()) {
    return bad("events: must give the chain's head_hash and its number of events");
  }
  int logs = 0;
  for (const json& f : files) {
    if (!f.is_object() || !f.value("kind", json()).is_string() ||
        !f.value("path", json()).is_string() || !f.value("sha256", json()).is_string()) {
      return bad("files: each is {kind, path, sha256}");
    }
    // A file of the directory, or of its records/ (what ExportArchive writes), by a plain name.
    const std::string path = f["path"];
    const std::string name = absl::StartsWith(path, "records/") ? path.substr(8) : path;
    if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) {
      return bad(absl::StrCat("files: \"", path.substr(0, 60), "\" is not a file of the archive"));
    }
    logs += f["kind"] == "event";
  }
  if (logs != 1) return bad("files: the archive has one event log (events.jsonl)");
  return absl::OkStatus();
}

// Each record line is {id, doc}: a non-empty string id and the stored document; as many as the
// manifest counted.
absl::Status CheckRecords(const std::string& path, const json& entry,
                          const std::vector<json>& lines) {
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& r = lines[i];
    if (!r.is_object() || !r.value("id", json()).is_string() ||
        r["id"].get<std::string>().empty() || r["id"].get<std::string>().size() > 256 ||
        !r.value("doc", json()).is_object()) {
      return absl::DataLossError(absl::StrCat(path, ":", i + 1, ": not a record {id, doc}"));
    }
  }
  const json count = entry.value("records", json());
  if (count.is_number_integer() && count.get<int64_t>() != static_cast<int64_t>(lines.size())) {
    return absl::DataLossError(absl::StrCat(path, ": ", lines.size(),
                                            " records where the manifest "
                                            "counted ",
                                            count.get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::StatusOr<Archive> ReadArchive(const std::string& dir) {
  Archive a;
  auto manifest = ReadWhole(dir + "/manifest.json");
  if (!manifest.ok()) return manifest.status();
  a.manifest = json::parse(*manifest, nullptr, false);
  if (absl::Status s = CheckManifest(dir, a.manifest); !s.ok()) return s;
  for (const json& entry : a.manifest["files"]) {
    const std::string kind = entry.value("kind", ""), path = dir + "/" + entry.value("path", "");
    std::string text;
    if (absl::Status s = CheckFile(dir, entry, text); !s.ok()) return s;
    if (kind == "configuration") {
      auto docs = YamlDocumentsToJson(text);
      if (!docs.ok()) return absl::DataLossError(absl::StrCat(path, ": ", docs.status().message()));
      a.config = *docs;
    } else if (kind == "event") {
      if (absl::Status s = ReadEvents(path, text, a); !s.ok()) return s;
    } else if (IsArchiveKind(kind) && kind != "job") {
      auto lines = JsonLines(path, text);
      if (!lines.ok()) return lines.status();
      if (absl::Status s = CheckRecords(path, entry, *lines); !s.ok()) return s;
      a.records.emplace_back(kind, *std::move(lines));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": kind \"", kind, "\" is not imported"));
    }
  }
  return a;
}

absl::Status Commit(Store& store, StoreBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  auto s = store.Commit(std::move(batch));
  batch = StoreBatch();
  return s.ok() ? absl::OkStatus() : s.status();
}

absl::Status ApplyConfiguration(const Archive& a, Store& store, const GpuCatalog& catalog,
                                const std::string& log_dir) {
  if (a.config.empty()) return absl::OkStatus();
  ControlPlane::Options options;
  options.log_dir = log_dir;
  auto cp =
      ControlPlane::Open(&store, &catalog, options, [] { return absl::ToUnixMicros(absl::Now()); });
  if (!cp.ok()) return cp.status();
  auto applied = (*cp)->Apply(a.config, Principal{"import", Role::kAdmin});
  if (!applied.ok()) {
    return absl::Status(applied.status().code(),
                        absl::StrCat("config.yaml: ", applied.status().message()));
  }
  return absl::OkStatus();
}

absl::Status WriteRecords(const Archive& a, Store& store, json& counts) {
  StoreBatch batch;
  for (const auto& [kind, lines] : a.records) {
    for (const json& r : lines) {
      batch.puts.push_back({kind, r.value("id", ""), r.value("doc", json()).dump()});
      if (batch.puts.size() >= kBatch) {
        if (absl::Status s = Commit(store, batch); !s.ok()) return s;
      }
    }
    counts[kind] = lines.size();
  }
  for (const StoredEvent& e : a.events) {
    batch.puts.push_back(
        {kImportedEventKind, absl::StrFormat("%012d", e.seq), ImportedEventDoc(e).dump()});
    if (batch.puts.size() >= kBatch) {
      if (absl::Status s = Commit(store, batch); !s.ok()) return s;
    }
  }
  return Commit(store, batch);
}

// A server can start on the store: every record the import wrote decodes as a server reads it.
absl::Status CheckLoads(Store& store, const GpuCatalog& catalog, const std::string& log_dir) {
  ControlPlane::Options options;
  options.log_dir = log_dir;
  auto cp =
      ControlPlane::Open(&store, &catalog, options, [] { return absl::ToUnixMicros(absl::Now()); });
  if (cp.ok()) return absl::OkStatus();
  return absl::Status(
      cp.status().code(),
      absl::StrCat("a server could not start on the imported records: ", cp.status().message()));
}

}  // namespace

absl::StatusOr<json> ImportArchive(const std::string& dir, Store& store, const GpuCatalog& catalog,
                                   const std::string& log_dir) {
  auto archive = ReadArchive(dir);
  if (!archive.ok()) return archive.status();
  if (absl::Status s = CheckStoreEmpty(store); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(),
                                               ": an import goes into a new, empty --data "
                                               "directory, before any server starts on it"));
  }
  json counts = json::object();
  absl::Status s = ApplyConfiguration(*archive, store, catalog, log_dir);
  if (s.ok()) s = WriteRecords(*archive, store, counts);
  if (s.ok()) s = CheckLoads(store, catalog, log_dir);
  const json& chain = archive->manifest["events"];
  json report = {{"source", archive->manifest.value("server", json::object())},
                 {"configuration_documents", archive->config.size()},
                 {"records", counts},
                 {"imported_events", chain},
                 {"live_jobs_not_imported", archive->manifest.value("live_jobs", 0)}};
  if (s.ok()) {
    StoreBatch batch;
    StoredEvent event;
    event.time_us = absl::ToUnixMicros(absl::Now());
    event.actor = "user:import";
    event.type = "store.imported";
    event.subject = "store";
    event.reason = absl::StrCat("imported from ", dir);
    event.details_json = report.dump();
    batch.events.push_back(std::move(event));
    s = Commit(store, batch);
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(),
                                               " (the store is now partly imported: "
                                               "import into a new directory again)"));
  }
  return report;
}

json ImportedEventDoc(const StoredEvent& e) {
  return {{"seq", e.seq},
          {"time_us", e.time_us},
          {"actor", e.actor},
          {"type", e.type},
          {"subject", e.subject},
          {"reason", e.reason},
          {"details_json", e.details_json},
          {"prev_hash", e.prev_hash},
          {"hash", e.hash}};
}

absl::StatusOr<json> VerifyImportedEvents(Store& store) {
  std::string prev = GenesisHash();
  int64_t count = 0;
  for (std::string after;;) {
    auto page = store.List(kImportedEventKind, after, 1000);
    if (!page.ok()) return page.status();
    for (const StoredRecord& r : *page) {
      const json e = json::parse(r.json, nullptr, false);
      auto event = ArchivedEvent(e, prev);
      if (!event.ok() || event->seq != count + 1 || e.value("prev_hash", "") != prev) {
        return absl::DataLossError(
            absl::StrCat("the imported event log is broken at seq ", count + 1,
                         event.ok() ? "" : absl::StrCat(": ", event.status().message())));
      }
      prev = event->hash;
      ++count;
    }
    if (page->empty()) break;
    after = page->back().id;
  }
  return json{{"events", count}, {"head_hash", prev}, {"ok", true}};
}

}  // namespace carve
