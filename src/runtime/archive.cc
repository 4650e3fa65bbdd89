// `carve export all` (archive.h): a server's configuration and history, read through its API.
#include "runtime/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "adapters/store/event_hash.h"
#include "httplib.h"
#include "runtime/api_client.h"
#include "runtime/configuration.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// Creates `path` afresh, 0600 (the archive holds webhook secrets), never through a link or over a
// file someone else put there, and writes `text`.
absl::Status WriteNew(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// The --out directory: made if missing, then ours alone (0700), a directory and not a link.
absl::Status PrivateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      ::chmod(dir.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out ", dir, ": not a directory of this user's that can be made private"));
  }
  return absl::OkStatus();
}

// One file of the archive, written as it is read.
class ArchiveFile {
 public:
  ArchiveFile(const std::string& /*dir*/, std::string path, std::string kind)
      : path_(std::move(path)), kind_(std::move(kind)) {}
  void Add(const std::string& line) {
    text_ += line;
    text_ += "\n";
    ++records_;
  }
  void Raw(const std::string& text) { text_ += text; }
  int64_t records() const { return records_; }
  absl::StatusOr<json> Close(const std::string& dir) {
    if (absl::Status s = WriteNew(dir + "/" + path_, text_); !s.ok()) return s;
    return json{{"path", path_},
                {"kind", kind_},
                {"records", records_},
                {"bytes", text_.size()},
                {"sha256", Sha256Hex(text_)}};
  }

 private:
  std::string path_, kind_, text_;
  int64_t records_ = 0;
};

// Every stored record of `kind`, a page at a time.
absl::Status EachRecord(ApiClient& client, const std::string& kind,
                        const std::function<void(const json&)>& each) {
  for (std::string after;;) {
    auto page = client.Get(absl::StrCat(
        "/api/v1/export/", kind, "?limit=1000&after=", httplib::detail::encode_query_param(after)));
    if (!page.ok()) return page.status();
    for (const json& r : (*page)["records"]) each(r);
    after = page->value("next", "");
    if (after.empty()) return absl::OkStatus();
  }
}

absl::Status ExportConfiguration(ApiClient& client, const std::string& dir, json& files) {
  ArchiveFile file(dir, "config.yaml", "configuration");
  file.Raw("# carve apply -f config.yaml: every configuration document of the exported server\n");
  for (const char* kind : kConfigKinds) {
    absl::Status s = EachRecord(client, kind, [&](const json& r) {
      file.Raw("---\n");
      file.Add(r["doc"].dump());
    });
    if (!s.ok()) return s;
  }
  auto entry = file.Close(dir);
  if (!entry.ok()) return entry.status();
  files.push_back(*entry);
  return absl::OkStatus();
}

absl::Status ExportRecords(ApiClient& client, const std::string& dir, json& files,
                           int64_t& live_jobs) {
  std::filesystem::create_directory(dir + "/records");
  for (const char* kind : kArchiveKinds) {
    if (std::string(kind) == "job") {
      absl::Status s = EachRecord(client, kind, [&](const json&) { ++live_jobs; });
      if (!s.ok()) return s;
      continue;
    }
    ArchiveFile file(dir, absl::StrCat("records/", kind, ".jsonl"), kind);
    absl::Status s = EachRecord(client, kind, [&](const json& r) { file.Add(r.dump()); });
    if (!s.ok()) return s;
    auto entry = file.Close(dir);
    if (!entry.ok()) return entry.status();
    files.push_back(*entry);
  }
  return absl::OkStatus();
}

// The event log, checked link by link as it is written: what the import will recompute.
absl::Status ExportEvents(ApiClient& client, const std::string& dir, json& files, json& chain) {
  ArchiveFile file(dir, "events.jsonl", "event");
  std::string prev = GenesisHash();
  int64_t seq = 0;
  for (;;) {
    auto page = client.Get(absl::StrCat("/api/v1/events?limit=1000&after=", seq));
    if (!page.ok()) return page.status();
    if (page->empty()) break;
    for (json& e : *page) {
      auto event = ArchivedEvent(e, prev);
      if (!event.ok()) return event.status();
      e["prev_hash"] = prev;
      prev = event->hash;
      seq = event->seq;
      file.Add(e.dump());
    }
  }
  auto entry = file.Close(dir);
  if (!entry.ok()) return entry.status();
  files.push_back(*entry);
  chain = {{"events", file.records()}, {"head_seq", seq}, {"head_hash", prev}};
  return absl::OkStatus();
}

}  // namespace

bool IsArchiveKind(const std::string& kind) {
  return std::find(std::begin(kArchiveKinds), std::end(kArchiveKinds), kind) !=
         std::end(kArchiveKinds);
}

absl::StatusOr<StoredEvent> ArchivedEvent(const json& e, const std::string& prev_hash) {
  if (!e.is_object() || !e.contains("seq") || !e["seq"].is_number_integer()) {
    return absl::DataLossError("an event without a seq");
  }
  StoredEvent event;
  event.seq = e["seq"];
  event.time_us = e.value("time_us", int64_t{0});
  event.actor = e.value("actor", "");
  event.type = e.value("type", "");
  event.subject = e.value("subject", "");
  event.reason = e.value("reason", "");
  // An imported event keeps its details as the text that was hashed; an archived one as JSON.
  event.details_json = e.contains("details_json") && e["details_json"].is_string()
                           ? e["details_json"].get<std::string>()
                           : e.value("details", json::object()).dump();
  event.prev_hash = prev_hash;
  event.hash = e.value("hash", "");
  auto computed = EventHash(event, prev_hash);
  if (!computed.ok()) return computed.status();
  if (*computed != event.hash) {
    return absl::DataLossError(absl::StrCat("event ", event.seq, ": its hash does not match its ",
                                            "fields and its predecessor's hash"));
  }
  return event;
}

absl::StatusOr<json> ExportArchive(ApiClient& client, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("--out ", dir, " holds files already; name a new or empty directory"));
  }
  if (absl::Status s = PrivateDir(dir); !s.ok()) return s;
  auto version = client.Get("/api/v1/version");
  if (!version.ok()) return version.status();
  json manifest = {{"format", kArchiveFormat}, {"server", *version}, {"files", json::array()}};
  manifest["exported_at_us"] = absl::ToUnixMicros(absl::Now());
  int64_t live_jobs = 0;
  json chain;
  json& files = manifest["files"];
  if (absl::Status s = ExportConfiguration(client, dir, files); !s.ok()) return s;
  if (absl::Status s = ExportRecords(client, dir, files, live_jobs); !s.ok()) return s;
  if (absl::Status s = ExportEvents(client, dir, files, chain); !s.ok()) return s;
  manifest["events"] = chain;
  manifest["live_jobs"] = live_jobs;
  manifest["left_out"] = {
      "tokens: secrets, never exported; make new ones on the new server",
      absl::StrCat(live_jobs,
                   " live jobs (queued or running at export): their records stay "
                   "with this server; finished, they are exported by a later export"),
      "node records: nodes register with the new server, which keeps their GPU modes "
      "(records/node-modes.jsonl); labels an admin set on a node are set again with carve label"};
  if (absl::Status s = WriteNew(dir + "/manifest.json", manifest.dump(2) + "\n"); !s.ok()) {
    return s;
  }
  return manifest;
}

}  // namespace carve
