// Acceptance reports kept by the server (poc_reports.h): kept, listed newest first, read whole.
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/control_plane.h"
#include "runtime/poc_reports.h"
#include "runtime/tenancy.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr char kPocKind[] = "poc_report";
std::string PocKey(int64_t id) { return absl::StrFormat("%020d", id); }

std::string CountsLine(const json& counts) {
  std::string out;
  for (const char* verdict : {"pass", "fail", "inconclusive", "not-run"}) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", counts.value(verdict, 0), " ", verdict);
  }
  return out;
}

}  // namespace

absl::StatusOr<json> ControlPlane::KeepPocReport(const json& body, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kInspect); !s.ok()) return s;
  PocLookups look;
  look.event_hash = [this](int64_t seq) -> absl::StatusOr<std::string> {
    auto event = audit_.Event(seq);
    if (!event.ok()) return event.status();
    return event->value("hash", "");
  };
  look.job_exists = [this](int64_t id) { return GetJob(id).ok(); };
  auto kept = CheckPocReport(body, look);  // reads the store and the jobs: before the lock
  if (!kept.ok()) return kept.status();
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  if (poc_reports_last_ < 0) {  // first use: the stored ids go on
    auto last = store_->LastId(kPocKind);
    if (!last.ok()) return last.status();
    int64_t n = 0;
    poc_reports_last_ = *last && absl::SimpleAtoi(**last, &n) ? n : 0;
  }
  const int64_t id = poc_reports_last_ + 1;
  (*kept)["id"] = id;
  (*kept)["kept_us"] = now_();
  (*kept)["kept_by"] = who.name;
  json summary = PocReportSummary(*kept);
  poc_reports_last_ = id;
  StoreBatch batch;
  batch.puts.push_back({kPocKind, PocKey(id), kept->dump()});
  const json& checks = summary["server_checks"];
  Event(batch, "user:" + who.name, "poc.report-kept", absl::StrCat("poc/", id),
        absl::StrCat(CountsLine(summary["counts"]), "; ", checks["held"].get<int>(), " of ",
                     checks["of"].get<int>(), " server checks hold"),
        {{"sha256", summary["sha256"]},
         {"suite", summary["suite"]},
         {"counts", summary["counts"]},
         {"server_checks", checks}});
  if (absl::Status st = Durable(lock, std::move(batch)); !st.ok()) return st;
  return summary;
}

absl::StatusOr<json> ControlPlane::PocReports(int64_t limit, const Principal& who) const {
  if (absl::Status s = Authorize(who, Verb::kInspect); !s.ok()) return s;
  AwaitCommitted();
  auto last = store_->LastId(kPocKind);
  if (!last.ok()) return last.status();
  json out = json::array();
  int64_t id = 0;
  if (!*last || !absl::SimpleAtoi(**last, &id)) return out;
  for (; id > 0 && static_cast<int64_t>(out.size()) < limit; --id) {  // newest first
    auto kept = store_->Get(kPocKind, PocKey(id));
    if (!kept.ok()) return kept.status();
    if (!*kept) continue;
    json doc = json::parse((*kept)->json, nullptr, false);
    if (doc.is_discarded()) {
      return absl::DataLossError(absl::StrCat("stored acceptance report ", id, " is not JSON"));
    }
    out.push_back(PocReportSummary(doc));
  }
  return out;
}

absl::StatusOr<json> ControlPlane::PocReport(int64_t id, const Principal& who) const {
  if (absl::Status s = Authorize(who, Verb::kInspect); !s.ok()) return s;
  AwaitCommitted();
  auto kept = store_->Get(kPocKind, PocKey(id));
  if (!kept.ok()) return kept.status();
  if (!*kept) {
    return absl::NotFoundError(
        absl::StrCat("no acceptance report ", id, "; GET /api/v1/poc/reports lists them"));
  }
  json doc = json::parse((*kept)->json, nullptr, false);
  if (doc.is_discarded()) {
    return absl::DataLossError(absl::StrCat("stored acceptance report ", id, " is not JSON"));
  }
  return doc;
}

}  // namespace carve
