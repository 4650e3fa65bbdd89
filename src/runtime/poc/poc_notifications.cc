// Notifications on recovery (the recovery suite): where the moved job's tenant has webhooks
// (`kind: notification`) that want its recovery events, every such event of the test must reach
// each of them, as the server's delivery records say; where none is configured, or none wants
// those events, the record says that nothing was checked and why.
#include <chrono>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

// The events that say a job was moved or stopped for recovery.
const std::set<std::string>& RecoveryTypes() {
  static const std::set<std::string> kTypes = {"job.retrying",  "job.failover",
                                               "job.preempted", "job.lost",
                                               "job.displaced", "job.replica-retired"};
  return kTypes;
}

// Whether a notification document's `events` prefixes take `type` (default: job events).
bool Wants(const json& doc, const std::string& type) {
  const json events = doc.value("events", json::array({"job."}));
  for (const json& prefix : events) {
    if (prefix.is_string() && absl::StartsWith(type, prefix.get<std::string>())) return true;
  }
  return false;
}

// The notifications that take events of jobs of `tenant`'s `project`.
std::vector<json> NotificationsOf(const json& docs, const std::string& tenant,
                                  const std::string& project) {
  std::vector<json> out;
  for (const json& n : docs.is_array() ? docs : json::array()) {
    const std::string p = n.value("project", "");
    if (n.value("tenant", "") == tenant && (p.empty() || p == project)) out.push_back(n);
  }
  return out;
}

// The recovery events about job `id` after event `after_seq`.
absl::StatusOr<std::vector<json>> RecoveryEvents(Cluster& c, int64_t id, int64_t after_seq) {
  const std::string subject = absl::StrCat("job/", id);
  std::vector<json> out;
  absl::Status st = ForEachEvent(c.api(), after_seq, [&](const json& e) {
    if (e.value("subject", "") == subject && RecoveryTypes().count(e.value("type", ""))) {
      out.push_back(e);
    }
    return true;
  });
  if (!st.ok()) return st;
  return out;
}

// Polls notification `name`'s delivery record of event `seq` until it is delivered or failed
// (or the kit's timeout; `wait` false: reads it once): the record as last read (null when none
// was written).
absl::StatusOr<json> AwaitDelivery(Cluster& c, const std::string& name, int64_t seq, bool wait) {
  const int64_t deadline = wait ? NowUs() + c.options().timeout_s * 1'000'000 : 0;
  while (true) {
    auto page = c.Get(absl::StrCat("/api/v1/notifications/deliveries?name=", name,
                                   "&after=", seq - 1, "&limit=1"));
    if (!page.ok()) return page.status();
    json record;
    if (page->is_array() && !page->empty() && (*page)[0].value("event", int64_t{0}) == seq) {
      record = (*page)[0];
    }
    const std::string state = record.is_object() ? record.value("state", "") : "";
    if (state == "delivered" || state == "failed") return record;
    if (c.Interrupted() || NowUs() > deadline) return record;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// "delivered after 4 attempts (HTTP 500, 500, 500, 200)", or what stands instead.
std::string Described(const json& record) {
  if (!record.is_object()) return "no delivery record";
  std::vector<std::string> answers;
  const json attempts = record.value("attempts", json::array());
  for (const json& a : attempts) {
    answers.push_back(a.contains("error") ? a.value("error", "")
                                          : absl::StrCat("HTTP ", a.value("status", 0)));
  }
  return absl::StrCat(record.value("state", "pending"), " after ", attempts.size(), " attempt(s)",
                      answers.empty() ? "" : " (", absl::StrJoin(answers, ", "),
                      answers.empty() ? "" : ")");
}

// Where notification `name` stands, for a delivery with no record yet: "; it delivered up to
// event C and is trying event E (3 attempts, the last HTTP 500)".
std::string Standing(Cluster& c, const std::string& name) {
  auto status = c.Get("/api/v1/notifications/status");
  if (!status.ok() || !status->is_array()) return "";
  for (const json& n : *status) {
    if (n.value("name", "") != name) continue;
    std::string out =
        absl::StrCat("; it has passed event ", n.value("cursor", int64_t{0}), " (",
                     n.value("delivered", 0), " delivered, ", n.value("failed", 0), " failed)");
    if (const json p = n.value("pending", json()); p.is_object()) {
      const json attempts = p.value("attempts", json::array());
      absl::StrAppend(&out, " and is trying event ", p.value("event", int64_t{0}), " (",
                      attempts.size(), " attempt(s)");
      if (!attempts.empty()) {
        const json& last = attempts.back();
        absl::StrAppend(&out, ", the last ",
                        last.contains("error") ? last.value("error", "")
                                               : absl::StrCat("HTTP ", last.value("status", 0)));
      }
      absl::StrAppend(&out, ")");
    }
    return out;
  }
  return "";
}

}  // namespace

absl::Status ExpectNotified(Cluster& c, Record& r, int64_t id) {
  auto job = c.Job(id);
  if (!job.ok()) return job.status();
  const json spec = job->value("spec", json::object());
  const std::string tenant = spec.value("tenant", "default");
  auto docs = c.Get("/api/v1/notifications");
  if (!docs.ok() && absl::IsPermissionDenied(docs.status())) {
    r.observed["notifications"] = "not checked: only admins and tenant-admins can list them";
    return absl::OkStatus();
  }
  if (!docs.ok()) return docs.status();
  const std::vector<json> notifications =
      NotificationsOf(*docs, tenant, spec.value("project", "default"));
  if (notifications.empty()) {
    r.observed["notifications"] =
        absl::StrCat("not checked: tenant ", tenant, " has no notification configured");
    return absl::OkStatus();
  }
  auto events = RecoveryEvents(c, id, r.chain_start.seq);
  if (!events.ok()) return events.status();
  json seen = json::array();
  for (const json& n : notifications) {
    const std::string name = n.value("name", "");
    // A notification delivers its events in order: after one that did not arrive in time, the
    // later ones are read once, not waited for again.
    int64_t stuck = 0;
    for (const json& e : *events) {
      const std::string type = e.value("type", "");
      if (!Wants(n, type)) continue;
      const int64_t seq = e.value("seq", int64_t{0});
      auto record = AwaitDelivery(c, name, seq, stuck == 0);
      if (!record.ok()) return record.status();
      const std::string state = record->is_object() ? record->value("state", "") : "";
      std::string observed = Described(*record);
      if (!record->is_object()) observed += Standing(c, name);
      if (stuck != 0) absl::StrAppend(&observed, "; not waited for: event ", stuck, " was not");
      if (state != "delivered" && stuck == 0) stuck = seq;
      Expect(r, absl::StrCat("notification ", name, " got ", type, " (event ", seq, ")"),
             state == "delivered", "delivered (the receiver answered 2xx)", observed);
      seen.push_back({{"notification", name},
                      {"event", seq},
                      {"type", type},
                      {"state", state.empty() ? "none" : state}});
    }
  }
  if (seen.empty()) {
    std::vector<std::string> names;
    for (const json& n : notifications) names.push_back(n.value("name", ""));
    r.observed["notifications"] = absl::StrCat(
        "not checked: ", absl::StrJoin(names, ", "), " of tenant ", tenant,
        " want none of the job's recovery events (",
        events->empty() ? "none was written" : absl::StrCat(events->size(), " written"), ")");
    return absl::OkStatus();
  }
  r.observed["notifications"] = seen;
  return absl::OkStatus();
}

}  // namespace carve::poc
