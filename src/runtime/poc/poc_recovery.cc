// The recovery suite: how each kind of work comes back when it is moved. The kit acts only
// through the API, so a node is drained (an operator's action), not killed; it drains only a
// node that runs nothing but the kit's own replicas, and uncordons it afterwards.
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

absl::Status AwaitCheckpointed(Cluster& c, int64_t id, size_t seconds) {
  for (int i = 0;; ++i) {
    auto log = c.Probe(id);
    if (!log.ok()) return log.status();
    if (log->seconds.size() >= seconds) return absl::OkStatus();
    if (c.Interrupted()) return absl::CancelledError("interrupted");
    if (i >= 10 * c.options().timeout_s) {
      return absl::DeadlineExceededError(absl::StrCat("job ", id, " did not checkpoint ", seconds,
                                                      " seconds within ", c.options().timeout_s,
                                                      " s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

namespace {

void ExpectResumed(Record& r, const ProbeLog& log, int total, bool late_output_dropped) {
  const int64_t from =
      log.resumed.size() == 2 ? log.resumed[1].value("from_second", int64_t{0}) : 0;
  Expect(r, "it resumes from its checkpoint", log.resumed.size() == 2 && from >= 2,
         "the second attempt resumes at second 2 or later",
         absl::StrCat(log.resumed.size(), " start(s), the last from second ", from));
  std::set<int64_t> seconds(log.seconds.begin(), log.seconds.end());
  const size_t logged = seconds.size();
  // The checkpoint holds what the old attempt did after its output stopped reaching the server.
  if (late_output_dropped) {
    for (int64_t s = 1; s <= from; ++s) seconds.insert(s);
  }
  Expect(
      r, "no second is lost",
      static_cast<int>(seconds.size()) == total && *seconds.rbegin() == total,
      absl::StrCat("seconds 1..", total, " computed",
                   late_output_dropped ? " (logged, or in the checkpoint resumed from)" : ""),
      absl::StrCat(logged, " distinct seconds logged (", log.seconds.size(), " lines)",
                   late_output_dropped ? absl::StrCat(", 1..", from, " in the checkpoint") : ""));
  r.observed["resumed_from"] = from;
  r.observed["seconds_computed"] = log.seconds;
}

}  // namespace

absl::Status ExpectResumedAfterMove(Cluster& c, Record& r, int64_t id, int total,
                                    const MoveCause& by, bool late_output_dropped) {
  auto done = c.WaitFinal(id);
  if (!done.ok()) return done.status();
  Cluster::NoteNodes(*done, r);
  auto log = c.Probe(id);
  if (!log.ok()) return log.status();
  const json attempts = done->value("attempts", json::array());
  const std::string cause = attempts.empty() ? "" : attempts[0].value("cause", "");
  Expect(r, "it succeeds", done->value("state", "") == "succeeded", "succeeded",
         done->value("state", ""));
  Expect(r, absl::StrCat("moved once, by ", by.what),
         attempts.size() == 1 && cause.find(by.cause_has) != std::string::npos,
         absl::StrCat("one earlier attempt, ended by ", by.what),
         absl::StrCat(attempts.size(), " earlier attempt(s): ", cause));
  ExpectResumed(r, *log, total, late_output_dropped);
  return absl::OkStatus();
}

namespace {

// Drains a node for the length of a scope, then gives it back.
class Drain {
 public:
  Drain(Cluster& c, std::string node) : c_(c), node_(std::move(node)) {}
  ~Drain() {
    if (!drained_) return;
    if (absl::Status st = c_.NodeAction(node_, "uncordon"); !st.ok()) {
      c_.progress() << "  could not uncordon " << node_ << ": " << st.message() << "\n";
    }
  }
  absl::Status Start() {
    absl::Status st = c_.NodeAction(node_, "drain");
    drained_ = st.ok();
    return st;
  }

 private:
  Cluster& c_;
  std::string node_;
  bool drained_ = false;
};

// Why draining `node` would touch more than `job` ("" when it would not): other work on it, or
// an operator's cordon (the kit's uncordon afterwards would lift it).
absl::StatusOr<std::string> WhyNotDrain(Cluster& c, const std::string& node, const json& job) {
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  int ours = 0;
  for (const json& r : job.value("replicas", json::array())) {
    const std::string state = r.value("state", "");
    ours += r.value("node", "") == node && (state == "running" || state == "pending");
  }
  for (const json& n : *nodes) {
    if (n.value("name", "") != node) continue;
    if (!n.value("cordoned_by", "").empty() || !n.value("cordoned_gpus", json::object()).empty()) {
      return absl::StrCat("node ", node,
                          " has an operator's cordon, which the kit's uncordon "
                          "would lift");
    }
    if (n.value("replicas", 0) != ours) {
      return absl::StrCat("node ", node,
                          " runs other work; the kit drains only nodes it alone uses");
    }
    return std::string();
  }
  return absl::StrCat("node ", node, " is not listed");
}

// The node of `job`'s first replica, when draining it moves only the kit's own work; else ""
// and the record is inconclusive.
absl::StatusOr<std::string> NodeToDrain(Cluster& c, Record& r, const json& job) {
  const std::string node = job["replicas"][0].value("node", "");
  auto why = WhyNotDrain(c, node, job);
  if (!why.ok()) return why.status();
  if (why->empty()) return node;
  r.verdict = Verdict::kInconclusive;
  r.verdict_reason = *why;
  return std::string();
}

// Slots with a running replica (a slot whose old and new replica both run counts once).
int Serving(const json& job) {
  std::set<int> slots;
  for (const json& x : job.value("replicas", json::array())) {
    if (x.value("state", "") == "running") slots.insert(x.value("slot", -1));
  }
  return static_cast<int>(slots.size());
}

absl::Status ServiceDrain(Cluster& c, Record& r) {
  const Options& o = c.options();
  json spec = WholeGpuSpec(o, "poc-service", "", 1, {"--seconds", "600"});
  spec["kind"] = "inference";
  spec["replicas"] = 2;
  auto id = c.Submit(spec, r);
  if (!id.ok()) return id.status();
  auto running = c.WaitUntil(
      *id, [](const json& j) { return Serving(j) == 2 || IsFinal(j); }, "serving on 2 replicas");
  if (!running.ok()) return running.status();
  auto drained = NodeToDrain(c, r, *running);
  if (!drained.ok() || drained->empty()) return drained.status();
  const std::string node = *drained;
  Drain drain(c, node);
  if (absl::Status st = drain.Start(); !st.ok()) return st;
  int fewest = 2;
  int samples = 0;
  auto moved = c.WaitUntil(
      *id,
      [&](const json& j) {
        fewest = std::min(fewest, Serving(j));
        ++samples;
        // Done when nothing runs on the drained node any more, every replica that ran there is
        // retired with its reclaim, and both slots serve elsewhere.
        bool left = false;
        for (const json& x : j.value("replicas", json::array())) {
          if (x.value("node", "") != node) continue;
          left =
              left || x.value("state", "") != "retired" || !x.value("reclaim", json()).is_object();
        }
        return (!left && Serving(j) == 2) || IsFinal(j);
      },
      "moved off the drained node");
  if (!moved.ok()) return moved.status();
  Cluster::NoteNodes(*moved, r);
  Expect(r, "never below its replica count", fewest >= 2, "2 slots serving in every sample",
         absl::StrCat("at least ", fewest, " in ", samples, " samples (100 ms apart)"));
  Expect(r, "the job stays on its first attempt", moved->value("attempt", -1) == 0, "attempt 0",
         absl::StrCat("attempt ", moved->value("attempt", -1)));
  for (const json& x : moved->value("replicas", json::array())) {
    if (x.value("state", "") != "retired") continue;
    const json reclaim = x.value("reclaim", json::object());
    Expect(r, absl::StrCat("the retired replica's reclaim (slot ", x.value("slot", 0), ")"),
           reclaim.value("status", "") == "verified", "verified", reclaim.value("status", "none"));
  }
  r.observed["drained"] = node;
  r.observed["fewest_serving"] = fewest;
  r.observed["samples"] = samples;
  r.observed["replicas"] = json::array();
  for (const json& x : moved->value("replicas", json::array())) {
    r.observed["replicas"].push_back({{"slot", x.value("slot", 0)},
                                      {"node", x.value("node", "")},
                                      {"state", x.value("state", "")}});
  }
  if (absl::Status st = ExpectNotified(c, r, *id); !st.ok()) return st;
  if (absl::Status st = c.Cancel(*id); !st.ok()) return st;
  return c.WaitFinal(*id).status();
}

absl::Status TrainingCheckpoint(Cluster& c, Record& r) {
  const Options& o = c.options();
  constexpr int kSeconds = 8;
  json spec = WholeGpuSpec(o, "poc-training", "", 1,
                           {"--seconds", std::to_string(kSeconds), "--checkpoint"});
  spec["kind"] = "training";
  auto id = c.Submit(spec, r);
  if (!id.ok()) return id.status();
  if (absl::Status st = AwaitCheckpointed(c, *id, 2); !st.ok()) return st;
  auto job = c.Job(*id);
  if (!job.ok()) return job.status();
  auto drained = NodeToDrain(c, r, *job);
  if (!drained.ok() || drained->empty()) return drained.status();
  const std::string node = *drained;
  {
    Drain drain(c, node);
    if (absl::Status st = drain.Start(); !st.ok()) return st;
    auto moved = c.WaitUntil(
        *id, [](const json& j) { return j.value("attempt", 0) >= 1 || IsFinal(j); },
        "on its next attempt");
    if (!moved.ok()) return moved.status();
  }  // uncordoned: with no other node for it, it runs there again
  r.observed["drained"] = node;
  if (absl::Status st = ExpectResumedAfterMove(c, r, *id, kSeconds, {"the drain", "drain"}, false);
      !st.ok()) {
    return st;
  }
  return ExpectNotified(c, r, *id);
}

absl::Status ExperimentRequeue(Cluster& c, Record& r) {
  const Options& o = c.options();
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  // A model only one node has, so that the urgent job cannot find room elsewhere.
  std::vector<WholeGpuNode> whole = WholeGpuNodes(*nodes);
  std::map<std::string, int> nodes_with;  // whole-GPU jobs also land on shared-mode GPUs
  for (const json& n : *nodes) {
    std::set<std::string> models;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("mode", "") != "partition") models.insert(g.value("model", ""));
    }
    for (const std::string& m : models) ++nodes_with[m];
  }
  const WholeGpuNode* pick = nullptr;
  for (const WholeGpuNode& n : whole) {
    if (n.idle && nodes_with[n.model] == 1 && (pick == nullptr || n.count < pick->count)) {
      pick = &n;
    }
  }
  if (pick == nullptr) {
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = "no idle node whose whole-GPU model no other node has";
    return absl::OkStatus();
  }
  json experiment = WholeGpuSpec(o, "poc-experiment", pick->model, pick->count, {"--seconds", "4"});
  experiment["kind"] = "evaluation";
  experiment["priority"] = 10;
  experiment["preemptible"] = true;
  auto low = c.Submit(experiment, r);
  if (!low.ok()) return low.status();
  if (auto st = c.WaitRunning(*low); !st.ok()) return st.status();
  json urgent = WholeGpuSpec(o, "poc-urgent", pick->model, pick->count, {"--seconds", "1"});
  urgent["priority"] = 1000;
  auto high = c.Submit(urgent, r);
  if (!high.ok()) return high.status();
  auto first = c.WaitFinal(*high);
  if (!first.ok()) return first.status();
  auto done = c.WaitFinal(*low);
  if (!done.ok()) return done.status();
  Cluster::NoteNodes(*done, r);
  Cluster::NoteNodes(*first, r);
  const json attempts = done->value("attempts", json::array());
  if (attempts.empty() && first->value("victims", json::array()).empty()) {
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = "the urgent job found room without preempting (more GPUs of the model)";
    return absl::OkStatus();
  }
  const std::string cause = attempts.empty() ? "" : attempts[0].value("cause", "");
  Expect(r, "preempted by the urgent job",
         cause.find(absl::StrCat("preempted by job ", *high)) != std::string::npos,
         absl::StrCat("attempt 0 ended: preempted by job ", *high), cause);
  const json reclaim =
      attempts.empty() ? json::array() : attempts[0].value("reclaim", json::array());
  bool verified = !reclaim.empty();
  std::vector<std::string> statuses;
  for (const json& x : reclaim) {
    verified = verified && x.value("status", "") == "verified";
    statuses.push_back(x.value("status", "none"));
  }
  Expect(r, "the preempted attempt's reclaim", verified, "verified for every replica",
         statuses.empty() ? "none" : absl::StrJoin(statuses, ", "));
  Expect(r, "the urgent job ran", first->value("state", "") == "succeeded", "succeeded",
         first->value("state", ""));
  Expect(r, "re-queued and run again to the end",
         done->value("state", "") == "succeeded" && done->value("attempt", 0) == 1,
         "succeeded on attempt 1",
         absl::StrCat(done->value("state", ""), " on attempt ", done->value("attempt", 0)));
  r.observed["node"] = pick->node;
  r.observed["gpus"] = absl::StrCat(pick->count, "x ", pick->model);
  return ExpectNotified(c, r, *low);
}

}  // namespace

std::vector<TestCase> RecoveryTests() {
  std::vector<TestCase> tests = {
      {"training-checkpoint", "Training resumes from its checkpoint",
       "a training job (one whole GPU) that checkpoints each second is moved by a drain of its "
       "node after two seconds: it is run again as attempt 1 with the drain as the cause, resumes "
       "from its checkpoint (second 2 or later), loses no second and succeeds",
       "a job that started over: check that CARVE_CHECKPOINT_DIR is the same directory on every "
       "node (shared storage) and the job's attempts in `carve show`",
       "a drain, not a node loss: the kit acts only through the API. With no other node for it, "
       "the job runs again on the same node once the kit uncordons it",
       TrainingCheckpoint},
      {"service-drain", "A service keeps its replicas through a drain",
       "a two-replica service (one whole GPU each): draining the node of replica 0 places its "
       "replacement on another node before the old one is retired (make-before-break); at no "
       "sample (every 100 ms) fewer than two serve; the job stays on attempt 0; the retired "
       "replica's reclaim is verified",
       "a service that dropped below its count: read `job.replica-waiting` (no room for the "
       "replacement) and the drain's events (carve events)",
       "needs room for a replacement on another node; sampled, so a dip shorter than 100 ms "
       "would be missed",
       ServiceDrain},
      {"experiment-requeue", "An experiment is re-queued",
       "a preemptible low-priority evaluation holding every whole GPU of a model only one idle "
       "node has is preempted by an urgent job for the same GPUs: its attempt 0 ends naming the "
       "urgent job, "
       "its reclaim is verified, the urgent job runs, and the evaluation runs again to success "
       "as attempt 1",
       "an experiment lost instead of re-queued: check its recovery policy (requeue is the "
       "default for evaluation) and max_retries",
       "inconclusive when every whole-GPU model is on several nodes or on busy ones (the urgent "
       "job would need no preemption)",
       ExperimentRequeue},
      NodeLossTest(),
  };
  for (TestCase& t : tests) t.pass_condition += kNotifiedClause;
  return tests;
}

}  // namespace carve::poc
