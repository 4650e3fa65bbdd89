// partition.upgrade: a node's driver changes inside a maintenance window (the operator's
// --fault-command `upgrade NODE`); a MIG job before and one after keep their own versions, their
// partition ids name the same node and scheme, and the event chain verifies across the window.
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/poc/poc_partition.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

// A MIG probe job run to its end: the job as it ended.
absl::StatusOr<json> RunToEnd(Cluster& c, Record& r, const MigProfileOf& profile,
                              const std::string& name) {
  auto id = c.Submit(MigProbeSpec(c.options(), name, profile, {"--seconds", "1"}), r);
  if (!id.ok()) return id.status();
  auto done = c.WaitFinal(*id);
  if (done.ok()) Cluster::NoteNodes(*done, r);
  return done;
}

json FirstReplica(const json& job) {
  const json reps = job.value("replicas", json::array());
  return reps.empty() ? json::object() : reps[0];
}

std::string VersionsId(const json& job) {
  return FirstReplica(job).value("versions", json::object()).value("id", "");
}

std::string PartitionOf(const json& job) {
  const json grants = FirstReplica(job).value("grants", json::array());
  return grants.empty() ? "" : grants[0].value("partition", "");
}

// The node's version set id and whether a maintenance window is on it, as `carve nodes` shows.
absl::StatusOr<std::pair<std::string, bool>> NodeNow(Cluster& c, const std::string& node) {
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  for (const json& n : *nodes) {
    if (n.value("name", "") != node) continue;
    return std::make_pair(n.value("versions", json::object()).value("id", ""),
                          n.value("maintenance", json()).is_object());
  }
  return absl::NotFoundError("no node " + node);
}

absl::Status Window(Cluster& c, const std::string& node, const json& body) {
  c.progress() << "  maintenance " << node << ": " << body.dump() << "\n" << std::flush;
  return c.Post(absl::StrCat("/api/v1/nodes/", node, "/maintenance"), body).status();
}

// The window on `node` with the upgrade inside it; the versions-changed event.
absl::StatusOr<json> UpgradeInWindow(Cluster& c, Record& r, Injector& inject,
                                     const std::string& node) {
  auto head = c.Head();
  if (!head.ok()) return head.status();
  const std::string subject = "node/" + node;
  absl::Status st =
      Window(c, node, {{"starts_in", "0s"}, {"lasts", "30m"}, {"reason", "carve poc: upgrade"}});
  if (!st.ok()) return st;
  auto started = c.AwaitEvent(head->seq, "node.maintenance-started", subject);
  if (!started.ok()) return started.status();
  if (st = inject.Inject("upgrade", "upgrade-undo", {node}); !st.ok()) return st;
  auto changed = c.AwaitEvent(started->value("seq", int64_t{0}), "node.versions-changed", subject);
  if (!changed.ok()) return changed.status();
  Expect(r, "the upgrade is inside the window", true, "node.versions-changed after the start",
         absl::StrCat("event ", changed->value("seq", int64_t{0}), " after event ",
                      started->value("seq", int64_t{0})));
  if (st = Window(c, node, {{"cancel", true}}); !st.ok()) return st;
  return changed;
}

absl::Status Upgrade(Cluster& c, Record& r) {
  if (!HasFaultCommand(c, r, "change a node's versions")) return absl::OkStatus();
  auto target = FindMigTarget(c, r);
  if (!target.ok() || !*target) return target.status();
  const MigProfileOf profile{(*target)->gpu.model, (*target)->profile};
  auto before = RunToEnd(c, r, profile, "poc-upgrade-before");
  if (!before.ok()) return before.status();
  const std::string node = FirstReplica(*before).value("node", "");
  auto was = NodeNow(c, node);
  if (!was.ok()) return was.status();
  Injector inject(c, r);  // the upgrade is undone at the end: the node is left as found
  auto changed = UpgradeInWindow(c, r, inject, node);
  if (!changed.ok()) return changed.status();
  const json details = changed->value("details", json::object());
  const std::string old_id = details.value("old", json::object()).value("id", "");
  const std::string new_id = details.value("new", json::object()).value("id", "");
  Expect(r, "the event names the versions before and after",
         old_id == was->first && !new_id.empty() && new_id != old_id,
         absl::StrCat("from ", was->first, " to another set"),
         absl::StrCat(old_id, " -> ", new_id, ": ", changed->value("reason", "")));
  auto after = RunToEnd(c, r, profile, "poc-upgrade-after");
  if (!after.ok()) return after.status();
  if (FirstReplica(*after).value("node", "") != node) {
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = "the job after the upgrade ran on another node than the upgraded one";
    return absl::OkStatus();
  }
  auto kept = c.Job(before->value("id", int64_t{0}));
  if (!kept.ok()) return kept.status();
  Expect(r, "the job before keeps the versions it ran under", VersionsId(*kept) == old_id, old_id,
         VersionsId(*kept));
  Expect(r, "the job after runs under the new versions", VersionsId(*after) == new_id, new_id,
         VersionsId(*after));
  const std::string p0 = PartitionOf(*kept), p1 = PartitionOf(*after);
  Expect(r, "partition ids name the node, not a version",
         absl::StartsWith(p0, node + "/gpu") && absl::StartsWith(p1, node + "/gpu"),
         absl::StrCat(node, "/gpuN/PROFILE@START before and after"),
         absl::StrCat(p0, " before, ", p1, " after"));
  auto now = NodeNow(c, node);
  Expect(r, "the node is back in service", now.ok() && !now->second, "no maintenance window",
         now.ok() ? (now->second ? "a window" : "none") : std::string(now.status().message()));
  r.observed["versions"] = {{"before", old_id}, {"after", new_id}};
  r.observed["partitions"] = {{"before", p0}, {"after", p1}};
  return absl::OkStatus();  // the chain is verified at the end of every test (Cluster::Head)
}

}  // namespace

TestCase UpgradeTest() {
  return {"upgrade",
          "Upgrade and maintenance",
          "a MIG job runs to its end; a maintenance window starts on its node and the node's "
          "driver is upgraded inside it (--fault-command upgrade NODE: node.versions-changed "
          "after node.maintenance-started, naming the old set and a new one); the window is "
          "cancelled; a MIG job after it on the same node runs under the new set while the job "
          "before still shows the old one; both partition ids name the node "
          "(NODE/gpuN/PROFILE@START); the node is back in service; the event chain verifies",
          "versions or ids that do not match: read node.versions-changed (carve events --type "
          "node.) and each job's replica versions (carve show JOB -o json)",
          "proves records stay traceable across a version change; on simulated GPUs the "
          "upgrade is a driver version the simulated agent registers again with, not a real "
          "driver install (and the agent's own version does not change)",
          Upgrade};
}

}  // namespace carve::poc
