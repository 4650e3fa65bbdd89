// software.quota-priority: contention inside one queue, where its quota and the jobs' priorities
// decide. A queue with a quota of half a GPU in shares is applied; two low-priority quarter
// shares fill it, a third low-priority one is held back by the quota, and a later job of the
// default (higher) priority preempts one of the first two and starts before the third.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

constexpr char kQueue[] = "poc-quota";
constexpr int64_t kLow = -100;  // below any standard class; the late job keeps its class's

json QuotaSpec(const Cluster& c, const SharedGpu& g, const std::string& name, int64_t seconds,
               bool low) {
  // Quarter shares: the queue's quota (half a GPU) binds before the device does.
  const Share share{25, GiBOf(g.memory_mib, 8), 100, c.options().job_memory_mib};
  json spec = ProbeSpec(c.options(), g.model, name, share, {"--seconds", std::to_string(seconds)});
  spec["queue"] = kQueue;
  if (low) spec["priority"] = kLow;
  // A preempted job ends: requeued, the victim (older, so aged higher) would take the share the
  // urgent job frees before the held job, and hold it for the day it runs.
  if (seconds > 60) spec["recovery"] = {{"policy", "none"}};
  return spec;
}

// The preemption decisions after `after_seq`.
absl::StatusOr<std::vector<json>> Preemptions(Cluster& c, int64_t after_seq) {
  std::vector<json> out;
  absl::Status st = ForEachEvent(c.api(), after_seq, [&](const json& e) {
    // The scheduler's decision (it names the preemptor), not the victim's end in that state.
    const json details = e.value("details", json::object());
    if (e.value("type", "") == "job.preempted" && details.is_object() &&
        details.contains("preemptor")) {
      out.push_back(e);
    }
    return true;
  });
  if (!st.ok()) return st;
  return out;
}

void CheckPreemption(Record& r, const std::vector<json>& preempted, int64_t a, int64_t b,
                     int64_t late) {
  const std::string victims = absl::StrCat("job/", a, " or job/", b);
  std::string seen = preempted.empty() ? "none" : "";
  bool ok = preempted.size() == 1;
  for (const json& e : preempted) {
    const json details = e.value("details", json::object());
    const std::string subject = e.value("subject", "");
    absl::StrAppend(&seen, seen.empty() ? "" : "; ", subject, " by job ",
                    details.value("preemptor", int64_t{0}), " (", details.value("kind", ""), ")");
    ok = ok && (subject == absl::StrCat("job/", a) || subject == absl::StrCat("job/", b)) &&
         details.value("preemptor", int64_t{0}) == late && details.value("kind", "") == "priority";
  }
  Expect(r, "the higher-priority job preempts one lower-priority job of its queue", ok,
         absl::StrCat("one job.preempted: ", victims, " by job ", late, " (priority)"), seen);
}

absl::Status QuotaPriority(Cluster& c, Record& r) {
  auto gpus = FindSharedGpus(c, r);
  if (!gpus.ok() || gpus->empty()) return gpus.status();
  const SharedGpu& g = gpus->front();
  const json docs = json::array({{{"kind", "queue"},
                                  {"name", kQueue},
                                  {"description", "carve poc: quota and priority"},
                                  {"quota", {{"gpu-share", "0.5"}}}}});
  if (auto applied = c.Post("/api/v1/apply", docs); !applied.ok()) return applied.status();
  r.observed["applied"] = docs;
  // Long enough to outlive the test: the kit cancels what is left at its end.
  std::vector<int64_t> first;
  for (const char* name : {"poc-quota-a", "poc-quota-b"}) {
    auto id = c.Submit(QuotaSpec(c, g, name, 86400, true), r);
    if (!id.ok()) return id.status();
    first.push_back(*id);
  }
  for (int64_t id : first) {
    if (auto st = c.WaitRunning(id); !st.ok()) return st.status();
  }
  auto head = c.Head();
  if (!head.ok()) return head.status();
  auto held = c.Submit(QuotaSpec(c, g, "poc-quota-held", 2, true), r);
  if (!held.ok()) return held.status();
  auto waiting = c.AwaitEvent(head->seq, "job.waiting", absl::StrCat("job/", *held));
  if (!waiting.ok()) return waiting.status();
  const std::string why = waiting->value("reason", "");
  r.observed["wait_reason"] = why;
  Expect(r, "the queue's quota holds the third job back",
         why.find(kQueue) != std::string::npos && why.find("gpu-share") != std::string::npos,
         absl::StrCat("a job.waiting reason naming queue ", kQueue, " and gpu-share"), why);
  auto late = c.Submit(QuotaSpec(c, g, "poc-quota-urgent", 2, false), r);
  if (!late.ok()) return late.status();
  auto urgent = c.WaitFinal(*late);
  if (!urgent.ok()) return urgent.status();
  auto third = c.WaitFinal(*held);
  if (!third.ok()) return third.status();
  Cluster::NoteNodes(*urgent, r);
  for (const json* j : {&*urgent, &*third}) {
    Expect(r, j->value("name", "") + ": ended", j->value("state", "") == "succeeded", "succeeded",
           j->value("state", ""));
  }
  const int64_t urgent_at = urgent->value("scheduled_us", int64_t{0});
  const int64_t third_at = third->value("scheduled_us", int64_t{0});
  Expect(r, "the later, higher-priority job starts before the held one", urgent_at < third_at,
         "poc-quota-urgent scheduled first, though submitted after poc-quota-held",
         absl::StrCat("urgent at ", urgent_at, ", held at ", third_at));
  auto preempted = Preemptions(c, head->seq);
  if (!preempted.ok()) return preempted.status();
  CheckPreemption(r, *preempted, first[0], first[1], *late);
  r.observed["jobs"] = {{"low", {first[0], first[1], *held}}, {"urgent", *late}};
  return absl::OkStatus();
}

}  // namespace

TestCase QuotaPriorityTest() {
  return {"quota-priority",
          "Contention in a queue: quota and priority",
          "a queue with a quota of half a GPU in shares (applied as poc-quota): two low-priority "
          "quarter shares fill it and run; a third low-priority one waits with a job.waiting "
          "reason naming the queue and gpu-share; a later job of the default priority preempts "
          "exactly one of the first two (job.preempted, kind priority, naming it) and starts "
          "before the held one; both short jobs succeed",
          "a job past the quota that ran, or priority not followed: read `carve queues` (use "
          "against quota), the held job's explanation (carve explain JOB) and the preemption "
          "event (carve events --type job.preempted)",
          "proves the queue's quota and priority order on shares of one GPU model; the quota is "
          "counted in the scheduler's ledger, not measured on the device; leaves the queue "
          "poc-quota behind (configuration is never deleted)",
          QuotaPriority};
}

}  // namespace carve::poc
