// `carve poc verify DIR`: a report's claims re-checked against the server that made them.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/poc/poc.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

absl::StatusOr<std::vector<Record>> ReadRecords(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "records.jsonl").string();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Record> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    auto r = RecordFromJson(j);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", n, ": ",
                       j.is_discarded() ? "not JSON" : std::string(r.status().message())));
    }
    out.push_back(*std::move(r));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no record"));
  return out;
}

// The event at `head` still carries the recorded hash (an empty chain: seq 0, no hash).
Check HeadCheck(ApiClient& api, const std::string& name, const ChainHead& head) {
  const std::string expected = absl::StrCat("event ", head.seq, " with hash ", head.hash);
  if (head.seq == 0) return {name, head.hash.empty(), "an empty chain", expected};
  auto event = api.Get(absl::StrCat("/api/v1/events/", head.seq));
  if (!event.ok()) return {name, false, expected, std::string(event.status().message())};
  const std::string hash = event->value("hash", "");
  return {name, hash == head.hash, expected, absl::StrCat("event ", head.seq, " with hash ", hash)};
}

}  // namespace

absl::StatusOr<std::vector<Check>> Verify(ApiClient& api, const std::string& dir) {
  auto records = ReadRecords(dir);
  if (!records.ok()) return records.status();
  std::vector<Check> out;
  auto chain = api.Get("/api/v1/audit/verify");
  if (!chain.ok()) return chain.status();
  out.push_back({"the event chain verifies", chain->value("ok", false), "ok",
                 absl::StrCat(chain->value("ok", false) ? "ok" : "broken: ", chain->dump())});
  for (const Record& r : *records) {
    out.push_back(HeadCheck(api, r.id + ": chain at start", r.chain_start));
    out.push_back(HeadCheck(api, r.id + ": chain at end", r.chain_end));
    out.push_back({r.id + ": chain in order", r.chain_start.seq <= r.chain_end.seq, "start <= end",
                   absl::StrCat(r.chain_start.seq, " .. ", r.chain_end.seq)});
    for (int64_t id : r.jobs) {
      auto job = api.Get(absl::StrCat("/api/v1/jobs/", id));
      out.push_back({absl::StrCat(r.id, ": job ", id), job.ok(), "exists",
                     job.ok() ? job->value("state", "") : std::string(job.status().message())});
    }
  }
  return out;
}

}  // namespace carve::poc
