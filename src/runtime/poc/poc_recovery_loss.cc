// recovery.node-loss: a training job's node is cut off from the server (the operator's
// --fault-command node-down NODE); its jobs are declared lost, the job resumes from its checkpoint
// as a new attempt, and the node's agent, fencing itself, had stopped the old attempt before
// that (node.fenced-itself when the node returns), so two attempts never wrote one checkpoint.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/poc/poc_injector.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

// The probe's seconds: it must still run when its agent fences it (two seconds before the cut,
// then the longest self-fence of any node and its grace) and go on after the loss.
absl::StatusOr<int> ProbeSeconds(Cluster& c) {
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  int64_t longest_ms = 0;
  for (const json& n : *nodes) {
    const json fence = n.value("self_fence", json());
    if (!fence.is_object()) continue;
    longest_ms = std::max(
        longest_ms, fence.value("after_ms", int64_t{0}) + fence.value("grace_ms", int64_t{0}));
  }
  return static_cast<int>(2 + (longest_ms + 999) / 1000 + 6);
}

// Why cutting `node` off would not show what the test needs ("" when it would): other work
// on it, or an agent that does not fence itself.
absl::StatusOr<std::string> WhyNotCutOff(Cluster& c, const std::string& node) {
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  for (const json& n : *nodes) {
    if (n.value("name", "") != node) continue;
    if (n.value("replicas", 0) != 1) {
      return absl::StrCat("node ", node,
                          " runs other work; the kit cuts off only nodes it alone uses");
    }
    if (!n.value("self_fence", json()).is_object()) {
      return absl::StrCat("node ", node,
                          "'s agent does not fence itself (carve agent --fence-after-ms): cut "
                          "off, its old attempt would run on beside the new one");
    }
    return std::string();
  }
  return absl::StrCat("node ", node, " is not listed");
}

// Checks the node's word on the replica it stopped, once it is back.
void ExpectFenced(Record& r, const json& event, int64_t id) {
  const json details = event.value("details", json::object());
  bool named = false;
  for (const json& x : details.value("replicas", json::array())) {
    named = named || x.value("job", int64_t{0}) == id;
  }
  Expect(r, "the agent stopped the old attempt itself", named,
         absl::StrCat("node.fenced-itself names job ", id), details.dump());
  Expect(r, "before the server declared it lost", details.value("before_lost", false),
         "fenced_us before lost_us", event.value("reason", ""));
}

absl::Status NodeLoss(Cluster& c, Record& r) {
  if (!HasFaultCommand(c, r, "cut a node off from the server")) return absl::OkStatus();
  auto seconds = ProbeSeconds(c);
  if (!seconds.ok()) return seconds.status();
  json spec = WholeGpuSpec(c.options(), "poc-node-loss", "", 1,
                           {"--seconds", std::to_string(*seconds), "--checkpoint"});
  spec["kind"] = "training";
  auto id = c.Submit(spec, r);
  if (!id.ok()) return id.status();
  if (auto running = c.WaitRunning(*id); !running.ok()) return running.status();
  if (absl::Status st = AwaitCheckpointed(c, *id, 2); !st.ok()) return st;
  auto job = c.Job(*id);
  if (!job.ok()) return job.status();
  const std::string node = (*job)["replicas"][0].value("node", "");
  auto why = WhyNotCutOff(c, node);
  if (!why.ok()) return why.status();
  if (!why->empty()) {
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = *why;
    return absl::OkStatus();
  }
  auto head = c.Head();
  if (!head.ok()) return head.status();
  const std::string subject = "node/" + node;
  Injector inject(c, r);
  if (absl::Status st = inject.Inject("node-down", "node-up", {node}); !st.ok()) return st;
  auto lost = c.AwaitEvent(head->seq, "node.lost", subject);
  if (!lost.ok()) return lost.status();
  auto moved = c.WaitUntil(
      *id, [](const json& j) { return j.value("attempt", 0) >= 1 || IsFinal(j); },
      "on its next attempt");
  if (!moved.ok()) return moved.status();
  if (absl::Status st = inject.Undo("node-up", {node}); !st.ok()) return st;
  auto fenced = c.AwaitEvent(lost->value("seq", int64_t{0}), "node.fenced-itself", subject);
  if (!fenced.ok()) return fenced.status();
  ExpectFenced(r, *fenced, *id);
  r.observed["cut_off"] = node;
  r.observed["lost_event"] = lost->value("seq", int64_t{0});
  r.observed["fenced_event"] = fenced->value("seq", int64_t{0});
  if (absl::Status st = ExpectResumedAfterMove(c, r, *id, *seconds,
                                               {"the node's loss", "stopped heartbeating"}, true);
      !st.ok()) {
    return st;
  }
  return ExpectNotified(c, r, *id);
}

}  // namespace

TestCase NodeLossTest() {
  return {"node-loss",
          "Training comes back after its node is lost",
          "a training job (one whole GPU) that checkpoints each second, long enough to outlive "
          "its node's self-fence, has its node cut off from the server after two seconds "
          "(--fault-command node-down NODE): the server declares it "
          "lost (node.lost), it runs again as attempt 1 with the loss as the cause, resumes from "
          "its checkpoint, loses no second (logged, or in the checkpoint it resumed from) and "
          "succeeds; when the node returns, its agent says it "
          "stopped the old attempt itself before the loss (node.fenced-itself, before_lost), so "
          "the two attempts never ran at once",
          "an old attempt not stopped: start agents with --fence-after-ms (docs/reliability.md); "
          "a job that started over: check that CARVE_CHECKPOINT_DIR is shared by every node",
          "needs the operator's --fault-command to cut a node off and a node the kit alone uses "
          "whose agent fences itself; the agent's word on when it stopped the attempt is its own "
          "clock, compared with the server's",
          NodeLoss};
}

}  // namespace carve::poc
