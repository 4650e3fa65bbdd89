// partition.device-faults: a fault inside one MIG instance, a device restart and a node failure,
// each injected by the operator's --fault-command (the kit cannot inject faults through the
// API), and each one's recorded blast radius (the event's details.jobs) compared with the jobs
// that were there just before. Every fault injected is undone, whatever the test's outcome.
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/poc/poc_partition.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

// Ids of the jobs with a pending or running replica on `node` (on GPU `gpu`, on the instance at
// `start`; -1: any).
absl::StatusOr<std::set<int64_t>> JobsOn(Cluster& c, const std::string& node, int gpu, int start) {
  auto jobs = c.Get("/api/v1/jobs");
  if (!jobs.ok()) return jobs.status();
  std::set<int64_t> out;
  for (const json& job : *jobs) {
    for (const json& rep : job.value("replicas", json::array())) {
      const std::string state = rep.value("state", "");
      if (rep.value("node", "") != node || (state != "pending" && state != "running")) continue;
      for (const json& g : rep.value("grants", json::array())) {
        if ((gpu < 0 || g.value("device", -1) == gpu) &&
            (start < 0 || g.value("start", -1) == start)) {
          out.insert(job.value("id", int64_t{0}));
        }
      }
    }
  }
  return out;
}

std::string Ids(const std::set<int64_t>& ids) {
  return ids.empty() ? "none" : absl::StrCat("jobs ", absl::StrJoin(ids, ", "));
}

// What a fault's event says it touched.
std::set<int64_t> Radius(const json& event) {
  std::set<int64_t> out;
  const json details = event.value("details", json::object());
  for (const json& id : details.value("jobs", json::array())) {
    if (id.is_number_integer()) out.insert(id.get<int64_t>());
  }
  return out;
}

// One fault: the jobs on the place before, the fault, the event that names its blast radius.
struct Fault {
  std::string name;    // "instance fault"
  std::string action;  // the fault command's action, and the one that undoes it
  std::string undo;
  std::vector<std::string> args;
  std::string node;
  int gpu = -1;
  int start = -1;
  std::string event;  // the event that records it, about `subject`
  std::string subject;
};

// Injects `f` and checks its recorded blast radius; the event, or an error.
absl::StatusOr<json> Blast(Cluster& c, Record& r, Injector& inject, const Fault& f) {
  auto head = c.Head();
  if (!head.ok()) return head.status();
  auto before = JobsOn(c, f.node, f.gpu, f.start);
  if (!before.ok()) return before.status();
  if (absl::Status st = inject.Inject(f.action, f.undo, f.args); !st.ok()) return st;
  auto event = c.AwaitEvent(head->seq, f.event, f.subject);
  if (!event.ok()) return event.status();
  const std::set<int64_t> radius = Radius(*event);
  Expect(
      r, f.name + ": blast radius", radius == *before,
      absl::StrCat(Ids(*before), " (on ", f.subject, " when it was injected)"),
      absl::StrCat(Ids(radius), " (event ", event->value("seq", int64_t{0}), ", ", f.event, ")"));
  r.observed["faults"].push_back({{"fault", f.name},
                                  {"subject", f.subject},
                                  {"event", event->value("seq", int64_t{0})},
                                  {"on_it", *before},
                                  {"radius", radius}});
  return event;
}

// Job id -> attempt.
using Attempts = std::map<int64_t, int>;

// Waits until every job in `ids` runs, each on attempt `at_least[id]` or later (0 when not
// given): how they run. A job a fault moved is judged only on its next attempt: until the agent
// reports the old one's end it still reads running, and the next may land on the same device.
absl::StatusOr<Attempts> AllRunning(Cluster& c, const std::vector<int64_t>& ids,
                                    const Attempts& at_least = {}) {
  Attempts out;
  for (int64_t id : ids) {
    const int attempt = at_least.count(id) ? at_least.at(id) : 0;
    auto job = c.WaitUntil(
        id,
        [&](const json& j) {
          // "stopping: ...": displaced, its attempt ends with the agent's report.
          return IsFinal(j) ||
                 (j.value("state", "") == "running" && j.value("attempt", 0) >= attempt &&
                  !absl::StartsWith(j.value("reason", ""), "stopping"));
        },
        "running");
    if (!job.ok()) return job.status();
    if (IsFinal(*job)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", id, " ended: ", job->value("state", ""), ": ", job->value("reason", "")));
    }
    out[id] = job->value("attempt", 0);
  }
  return out;
}

// The attempts each job must reach after a fault whose blast radius is `moved`.
Attempts After(Attempts seen, const std::set<int64_t>& moved) {
  for (auto& [id, attempt] : seen) attempt += moved.count(id) ? 1 : 0;
  return seen;
}

struct Placed {
  std::string node;
  int gpu = -1;
  int start = -1;
  std::string gpu_uuid;
};

// Where job `id`'s first replica runs, with its GPU's UUID as `carve nodes` shows it.
absl::StatusOr<Placed> Where(Cluster& c, Record& r, int64_t id) {
  auto job = c.Job(id);
  if (!job.ok()) return job.status();
  Cluster::NoteNodes(*job, r);
  const json reps = job->value("replicas", json::array());
  const json rep = reps.empty() ? json::object() : reps[0];
  const json grants = rep.value("grants", json::array());
  const json grant = grants.empty() ? json::object() : grants[0];
  Placed p{rep.value("node", ""), grant.value("device", -1), grant.value("start", -1), ""};
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  for (const json& n : *nodes) {
    if (n.value("name", "") != p.node) continue;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("index", -1) == p.gpu) p.gpu_uuid = g.value("uuid", "");
    }
  }
  if (p.gpu_uuid.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", id, " runs on no GPU that carve nodes lists"));
  }
  return p;
}

// Polls until `node` is ready again: how it was last seen.
absl::StatusOr<std::string> AwaitReady(Cluster& c, const std::string& node) {
  std::string state;
  const int64_t deadline = NowUs() + c.options().timeout_s * 1'000'000;
  while (state != "ready" && NowUs() < deadline && !c.Interrupted()) {
    auto nodes = c.Nodes();
    if (!nodes.ok()) return nodes.status();
    for (const json& n : *nodes) {
      if (n.value("name", "") == node) state = n.value("state", "");
    }
    if (state != "ready") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return state;
}

std::string Seen(const absl::StatusOr<json>& event) {
  return event.ok() ? absl::StrCat("event ", event->value("seq", int64_t{0}))
                    : std::string(event.status().message());
}

// 1. A fault inside the instance of job `a`: only `a` moves; job `b` keeps its first attempt.
// Each fault answers with its recorded blast radius.
absl::StatusOr<std::set<int64_t>> InstanceFault(Cluster& c, Record& r, Injector& inject, int64_t a,
                                                int64_t b) {
  auto at = Where(c, r, a);
  if (!at.ok()) return at.status();
  const Fault f{"instance fault",
                "instance-fault",
                "instance-clear",
                {at->node, at->gpu_uuid, std::to_string(at->start)},
                at->node,
                at->gpu,
                at->start,
                "device.unhealthy",
                absl::StrCat("node/", at->node, "/gpu/", at->gpu, "/mig/", at->start)};
  auto event = Blast(c, r, inject, f);
  if (!event.ok()) return event.status();
  // Cleared at once: on a fixed layout the job's next instance is the same one.
  if (absl::Status st = inject.Undo(f.undo, f.args); !st.ok()) return st;
  auto neighbour = c.Job(b);
  if (!neighbour.ok()) return neighbour.status();
  Expect(
      r, "instance fault: the neighbour keeps running",
      neighbour->value("state", "") == "running" && neighbour->value("attempt", -1) == 0,
      absl::StrCat("job ", b, " running on attempt 0"),
      absl::StrCat(neighbour->value("state", ""), " on attempt ", neighbour->value("attempt", -1)));
  return Radius(*event);
}

// 2. A device restart under job `b`: every job on that GPU moves, and the GPU comes back.
absl::StatusOr<std::set<int64_t>> DeviceRestart(Cluster& c, Record& r, Injector& inject,
                                                int64_t b) {
  auto at = Where(c, r, b);
  if (!at.ok()) return at.status();
  const std::string subject = absl::StrCat("node/", at->node, "/gpu/", at->gpu);
  const Fault f{"device restart",
                "device-fault",
                "device-clear",
                {at->node, at->gpu_uuid},
                at->node,
                at->gpu,
                -1,
                "device.unhealthy",
                subject};
  auto event = Blast(c, r, inject, f);
  if (!event.ok()) return event.status();
  if (absl::Status st = inject.Undo(f.undo, f.args); !st.ok()) return st;
  auto healthy = c.AwaitEvent(event->value("seq", int64_t{0}), "device.healthy", subject);
  Expect(r, "device restart: healthy again", healthy.ok(), "device.healthy once it restarted",
         Seen(healthy));
  return Radius(*event);
}

// 3. The node of job `a` fails (cut off from the server): every job there is lost, and the
// node is ready again once it is back.
absl::Status NodeFailure(Cluster& c, Record& r, Injector& inject, int64_t a) {
  auto at = Where(c, r, a);
  if (!at.ok()) return at.status();
  const Fault f{"node failure", "node-down",       "node-up", {at->node}, at->node, -1, -1,
                "node.lost",    "node/" + at->node};
  auto event = Blast(c, r, inject, f);
  if (!event.ok()) return event.status();
  if (absl::Status st = inject.Undo(f.undo, f.args); !st.ok()) return st;
  auto state = AwaitReady(c, at->node);
  Expect(r, "node failure: the node returns", state.ok() && *state == "ready", "ready",
         state.ok() ? *state : std::string(state.status().message()));
  return absl::OkStatus();
}

absl::Status DeviceFaults(Cluster& c, Record& r) {
  if (!HasFaultCommand(c, r, "inject device or node faults")) return absl::OkStatus();
  auto target = FindMigTarget(c, r);
  if (!target.ok() || !*target) return target.status();
  const MigProfileOf profile{(*target)->gpu.model, (*target)->profile};
  r.observed["profile"] = profile.profile;
  std::vector<int64_t> ids;
  for (const char* name : {"poc-fault-a", "poc-fault-b"}) {
    // Long enough to outlive the test; the kit cancels them at its end.
    auto id = c.Submit(MigProbeSpec(c.options(), name, profile, {"--seconds", "86400"}), r);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  Injector inject(c, r);  // undoes what is left injected when the test ends
  auto seen = AllRunning(c, ids);
  if (!seen.ok()) return seen.status();
  auto moved = InstanceFault(c, r, inject, ids[0], ids[1]);
  if (!moved.ok()) return moved.status();
  if (seen = AllRunning(c, ids, After(*seen, *moved)); !seen.ok()) return seen.status();
  if (moved = DeviceRestart(c, r, inject, ids[1]); !moved.ok()) return moved.status();
  if (seen = AllRunning(c, ids, After(*seen, *moved)); !seen.ok()) return seen.status();
  return NodeFailure(c, r, inject, ids[0]);
}

}  // namespace

TestCase DeviceFaultsTest() {
  return {"device-faults",
          "MIG device faults",
          "two jobs on MIG instances; each fault injected by --fault-command in turn, once both "
          "run: a fault inside one job's instance (device.unhealthy about that instance) names "
          "exactly the job on it, and the other keeps its first attempt; a device restart "
          "(the GPU unhealthy, then healthy) names exactly the jobs on that GPU and the GPU is "
          "healthy again; a node failure (cut off from the server) is recorded as node.lost "
          "naming exactly the jobs on the node, and the node is ready once it is back",
          "a fault that touched more or fewer jobs than were there: read the fault's event "
          "(carve show event/SEQ -o json: details.jobs) and each job's attempts (carve show "
          "JOB); a device left unhealthy stays out of scheduling until it reports healthy",
          "proves the recorded blast radius of the faults the command injects; on simulated "
          "GPUs the faults are written to the simulated devices' files and the node failure is "
          "an agent cut off from the server, not NVIDIA's XIDs or a machine going down",
          DeviceFaults};
}

}  // namespace carve::poc
