// The hardware-partition (MIG) suite: the unit lifecycle on a GPU whose instances are made on
// demand, and partitions governed across pools. The fault and upgrade tests, which need the
// operator's --fault-command, are in poc_partition_faults.cc and poc_partition_upgrade.cc.
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/model/gpu_catalog.h"
#include "runtime/poc/poc_partition.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

json MigProbeSpec(const Options& options, const std::string& name, const MigProfileOf& profile,
                  const std::vector<std::string>& args) {
  json spec = {{"name", name},
               {"command", ProbeCommand(options, args)},
               {"resources",
                {{"mode", "partition"},
                 {"profile", profile.profile},
                 {"cpu", "100m"},
                 {"memory", absl::StrCat(options.job_memory_mib, "Mi")}}}};
  if (!profile.model.empty()) spec["resources"]["gpu_model"] = profile.model;
  return spec;
}

namespace {

// A ready, healthy, available GPU that makes MIG instances on demand and has none now.
std::optional<MigGpu> IdleDynamicGpu(const json& nodes, const std::set<std::string>& busy) {
  for (const json& n : nodes) {
    if (n.value("state", "") != "ready" || !n.value("cordoned_by", "").empty()) continue;
    for (const json& g : n.value("gpus", json::array())) {
      const std::string name = n.value("name", "");
      const int index = g.value("index", -1);
      if (g.value("mode", "") == "partition" && g.value("dynamic_layout", false) &&
          g.value("health", "") == "healthy" && g.value("state", "") == "available" &&
          g.value("mig_live", json::array()).empty() &&
          !busy.count(absl::StrCat(name, "/gpu ", index))) {
        return MigGpu{name, index, g.value("model", "")};
      }
    }
  }
  return std::nullopt;
}

// The catalog's 3-compute-slice profile of `model` (else its first), "" when it has no MIG.
std::string MiddleProfile(const std::string& model) {
  const GpuCatalog catalog = GpuCatalog::BuiltIn();
  auto id = catalog.Find(model);
  if (!id.ok()) return "";
  const auto& profiles = catalog.model(*id).mig_profiles;
  for (const MigProfile& p : profiles) {
    if (p.compute_slices == 3 && !p.media_extensions) return p.name;
  }
  return profiles.empty() ? "" : profiles.front().name;
}

// The instance the agent lists on `gpu` at `start` ("" when none), as `carve nodes` shows it.
absl::StatusOr<std::string> LiveUuid(Cluster& c, const MigGpu& gpu, int start) {
  auto nodes = c.Nodes();
  if (!nodes.ok()) return nodes.status();
  for (const json& n : *nodes) {
    if (n.value("name", "") != gpu.node) continue;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("index", -1) != gpu.index) continue;
      for (const json& m : g.value("mig_live", json::array())) {
        if (m.value("start", -1) == start) return m.value("uuid", "");
      }
    }
  }
  return std::string();
}

// Polls until the agent lists an instance at `start` (want true) or none (want false).
absl::StatusOr<std::string> AwaitLive(Cluster& c, const MigGpu& gpu, int start, bool want) {
  const int64_t deadline = NowUs() + c.options().timeout_s * 1'000'000;
  while (true) {
    auto uuid = LiveUuid(c, gpu, start);
    if (!uuid.ok() || uuid->empty() != want) return uuid;
    if (NowUs() > deadline || c.Interrupted()) {
      return absl::DeadlineExceededError(
          absl::StrCat("the agent of ", gpu.node, " still ", want ? "lists no" : "lists an",
                       " instance at slice ", start, " of GPU ", gpu.index));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// One round: a job on a new instance; the record, the agent and the job agree on it, and it is
// gone once the job ended.
absl::Status Round(Cluster& c, Record& r, const MigGpu& gpu, const std::string& profile, int n) {
  json spec = MigProbeSpec(c.options(), absl::StrCat("poc-mig-", n), {gpu.model, profile},
                           {"--seconds", "2"});
  auto id = c.Submit(spec, r);
  if (!id.ok()) return id.status();
  auto running = c.WaitRunning(*id);
  if (!running.ok()) return running.status();
  const std::string p = absl::StrCat("round ", n, ": ");
  const json replica = (*running)["replicas"][0];
  const json grant =
      replica.value("grants", json::array()).empty() ? json::object() : replica["grants"][0];
  const int start = grant.value("start", -1);
  const std::string partition = grant.value("partition", "");
  // Where the scheduler put it (not necessarily the idle GPU the kit saw): follow the grant.
  const MigGpu on{replica.value("node", ""), grant.value("device", -1), gpu.model};
  Expect(r, p + "the record names a new instance",
         grant.value("profile", "") == profile && grant.value("created", false),
         absl::StrCat("a ", profile, " instance created for the job"),
         absl::StrCat(partition, grant.value("created", false) ? " (created)" : " (not created)"));
  auto listed = AwaitLive(c, on, start, true);
  Expect(r, p + "the agent lists it", listed.ok() && !listed->empty(),
         absl::StrCat("an instance at slice ", start),
         listed.ok() ? *listed : std::string(listed.status().message()));
  auto done = c.WaitFinal(*id);
  if (!done.ok()) return done.status();
  Cluster::NoteNodes(*done, r);
  auto log = c.Probe(*id);
  if (!log.ok()) return log.status();
  const json seen = log->sees.is_object() ? log->sees.value("visible_devices", json()) : json();
  Expect(r, p + "the job sees that instance", listed.ok() && seen == *listed,
         listed.ok() ? *listed : "the listed instance", Text(seen));
  Expect(r, p + "the job succeeds", done->value("state", "") == "succeeded", "succeeded",
         done->value("state", ""));
  auto gone = AwaitLive(c, on, start, false);
  Expect(r, p + "deleted after the job", listed.ok() && !listed->empty() && gone.ok(),
         "the instance listed while it ran, none at that slice after",
         !listed.ok() || listed->empty() ? "it was never listed"
         : gone.ok()                     ? "none"
                                         : std::string(gone.status().message()));
  r.observed["rounds"].push_back({{"job", *id},
                                  {"partition", partition},
                                  {"uuid", listed.ok() ? *listed : ""},
                                  {"seen", seen}});
  return absl::OkStatus();
}

}  // namespace

namespace {

// Whether the cluster has a GPU that makes MIG instances on demand at all, idle or not.
bool AnyDynamicGpu(const json& nodes) {
  for (const json& n : nodes) {
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("mode", "") == "partition" && g.value("dynamic_layout", false)) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::optional<MigTarget>> FindMigTarget(Cluster& c, Record& r) {
  // A GPU the test before used may still be settling (its instances being deleted, a restart,
  // its node registering again): wait for one, up to the kit's timeout, while there is any.
  const int64_t deadline = NowUs() + c.options().timeout_s * 1'000'000;
  while (!c.Interrupted()) {
    auto nodes = c.Nodes();
    if (!nodes.ok()) return nodes.status();
    auto busy = c.BusyGpus();
    if (!busy.ok()) return busy.status();
    std::optional<MigGpu> gpu = IdleDynamicGpu(*nodes, *busy);
    const std::string profile = gpu ? MiddleProfile(gpu->model) : "";
    if (gpu && !profile.empty()) return MigTarget{*gpu, profile};
    if (!AnyDynamicGpu(*nodes) || NowUs() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  r.verdict = Verdict::kInconclusive;
  r.verdict_reason =
      absl::StrCat("no idle GPU that makes MIG instances on demand (layout: dynamic), within ",
                   c.options().timeout_s, " s");
  return std::nullopt;
}

namespace {

absl::Status UnitLifecycle(Cluster& c, Record& r) {
  auto target = FindMigTarget(c, r);
  if (!target.ok() || !*target) return target.status();
  const MigGpu* gpu = &(*target)->gpu;
  const std::string& profile = (*target)->profile;
  r.observed["gpu"] = absl::StrCat(gpu->node, "/gpu ", gpu->index, " (", gpu->model, ")");
  r.observed["profile"] = profile;
  r.observed["rounds"] = json::array();
  for (int n = 1; n <= 2; ++n) {
    if (absl::Status st = Round(c, r, *gpu, profile, n); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// A member of `tenant` (project of the same name) with a one-hour token: its client and token id.
struct Member {
  std::string name;
  std::string token_id;
  std::unique_ptr<ApiClient> api;
};

absl::StatusOr<Member> MakeMember(Cluster& c, Record& r, const std::string& tenant) {
  Member m{absl::StrCat(tenant, "-", NowUs() % 1000000000), "", nullptr};
  auto user =
      c.Post("/api/v1/users",
             {{"name", m.name}, {"role", "member"}, {"tenant", tenant}, {"project", tenant}});
  if (!user.ok()) return user.status();
  auto token = c.Post("/api/v1/tokens",
                      {{"user", m.name}, {"expires_in", "1h"}, {"description", "carve poc"}});
  if (!token.ok()) return token.status();
  m.token_id = token->value("id", "");
  m.api =
      std::make_unique<ApiClient>(c.options().server, token->value("token", ""), c.options().ca);
  r.observed["users"].push_back(m.name);
  return m;
}

json MigSpec(const Options& o, const std::string& name, const std::string& profile,
             int64_t seconds) {
  json spec = MigProbeSpec(o, name, {"", profile}, {"--seconds", std::to_string(seconds)});
  spec["queue"] = "poc-mig";
  return spec;
}

// What tenant b sees and may do with tenant a's work.
void Across(Cluster& c, Record& r, ApiClient& b, int64_t a_job, const std::string& profile) {
  auto seen = b.Get(absl::StrCat("/api/v1/jobs/", a_job));
  Expect(r, "b cannot see a's job", !seen.ok() && absl::IsNotFound(seen.status()),
         "no such job (404)", seen.ok() ? "it is shown" : std::string(seen.status().message()));
  const json spec = MigSpec(c.options(), "poc-b-mig", profile, 1);
  auto submitted = b.Post("/api/v1/jobs", spec);
  Expect(r, "b cannot submit to a's queue", !submitted.ok(), "refused",
         submitted.ok() ? absl::StrCat("accepted as job ", submitted->value("id", int64_t{0}))
                        : std::string(submitted.status().message()));
  if (submitted.ok()) {  // cleaned up with the test's other jobs
    r.input.push_back(spec);
    r.jobs.push_back(submitted->value("id", int64_t{0}));
  }
  auto nodes = b.Get("/api/v1/nodes");
  bool live = false;
  for (const json& n : nodes.ok() ? *nodes : json::array()) {
    for (const json& g : n.value("gpus", json::array())) live = live || g.contains("mig_live");
  }
  Expect(r, "b sees no live MIG instances", nodes.ok() && !live, "no mig_live on any GPU",
         nodes.ok() ? (live ? "mig_live shown" : "none") : std::string(nodes.status().message()));
}

absl::Status AcrossPools(Cluster& c, Record& r) {
  if (c.options().server.empty()) {
    return absl::FailedPreconditionError("the kit was not told the server's address");
  }
  auto target = FindMigTarget(c, r);
  if (!target.ok() || !*target) return target.status();
  const std::string& profile = (*target)->profile;
  const json docs = json::array(
      {{{"kind", "tenant"}, {"name", "poc-a"}, {"description", "carve poc: across pools"}},
       {{"kind", "tenant"}, {"name", "poc-b"}, {"description", "carve poc: across pools"}},
       {{"kind", "queue"},
        {"name", "poc-mig"},
        {"tenants", {"poc-a"}},
        {"quota", {{absl::StrCat("mig/", profile), 1}}}},
       {{"kind", "project"}, {"name", "poc-a"}, {"tenant", "poc-a"}, {"queues", {"poc-mig"}}},
       {{"kind", "project"}, {"name", "poc-b"}, {"tenant", "poc-b"}}});
  if (auto applied = c.Post("/api/v1/apply", docs); !applied.ok()) return applied.status();
  r.observed["applied"] = docs;
  r.observed["users"] = json::array();
  auto a = MakeMember(c, r, "poc-a");
  if (!a.ok()) return a.status();
  auto b = MakeMember(c, r, "poc-b");
  if (!b.ok()) return b.status();
  Cluster as_a(*a->api, c.options(), c.progress());
  auto first = as_a.Submit(MigSpec(c.options(), "poc-a-first", profile, 5), r);
  if (!first.ok()) return first.status();
  if (auto st = c.WaitRunning(*first); !st.ok()) return st.status();
  auto second = as_a.Submit(MigSpec(c.options(), "poc-a-second", profile, 1), r);
  if (!second.ok()) return second.status();
  Across(c, r, *b->api, *first, profile);
  auto one = c.WaitFinal(*first);
  if (!one.ok()) return one.status();
  auto two = c.WaitFinal(*second);
  if (!two.ok()) return two.status();
  Cluster::NoteNodes(*one, r);
  auto reason = c.WaitReason(*second, r.chain_start.seq);
  if (!reason.ok()) return reason.status();
  const std::string why = *reason;
  const std::string resource = absl::StrCat("mig/", profile);
  Expect(r, "a's second job waits on the queue's MIG quota",
         why.find("poc-mig") != std::string::npos && why.find(resource) != std::string::npos,
         absl::StrCat("a job.waiting reason naming queue poc-mig and ", resource),
         why.empty() ? "it never waited" : why);
  Expect(r, "it runs once the first ended",
         two->value("state", "") == "succeeded" &&
             two->value("scheduled_us", int64_t{0}) >= one->value("ended_us", int64_t{0}),
         "succeeded, scheduled after the first ended",
         absl::StrCat(two->value("state", ""), ", scheduled ", two->value("scheduled_us", 0),
                      ", first ended ", one->value("ended_us", 0)));
  for (const Member* m : {&*a, &*b}) {
    if (auto st = c.Post(absl::StrCat("/api/v1/tokens/", m->token_id, "/revoke"), json::object());
        !st.ok()) {
      return st.status();
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<TestCase> PartitionTests() {
  return {
      {"unit-lifecycle", "MIG unit lifecycle",
       "on a GPU that makes instances on demand, twice: a job for the catalog's 3g profile runs "
       "on an instance its record says was created; the agent lists an instance at that slice "
       "(carve nodes: mig_live); the job sees exactly that instance's UUID; once the job ended "
       "the agent no longer lists it",
       "an instance left behind or never made: compare `carve nodes -o json` (mig_live, "
       "mig_instances, layout_mismatch) with the job's grant; a leftover instance blocks the "
       "slices it holds",
       "proves create, allocate, delete and re-create as the agent reports them; on simulated "
       "GPUs the instances are the backend's, not NVIDIA's",
       UnitLifecycle},
      DeviceFaultsTest(),
      UpgradeTest(),
      {"across-pools", "Partitions across pools",
       "MIG instances are governed like whole GPUs: two tenants and a queue (tenant a only, a "
       "quota of one instance of the profile) are applied, with a member and token each; a's "
       "second job waits on the queue's quota until the first ends, then runs; b cannot see a's "
       "jobs, cannot submit to a's queue, and sees no live MIG instances on the nodes",
       "a quota not enforced or a job seen across tenants: read `carve queues` and the job's "
       "explanation; check the queue's tenants and the roles of the users",
       "leaves behind what it applied (tenants poc-a and poc-b, their projects, queue poc-mig) "
       "and its two users, whose tokens it revokes",
       AcrossPools},
  };
}

}  // namespace carve::poc
