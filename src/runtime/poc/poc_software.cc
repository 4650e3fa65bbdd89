// The software-isolation suite's first two tests: what was asked, granted and seen agree; jobs
// contending for full GPUs queue by the rules and keep their rate. (Abnormal jobs and
// reclamation: poc_software_faults.cc.)
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/poc/poc_probe_jobs.h"
#include "runtime/poc/poc_suites.h"

namespace carve::poc {

using json = nlohmann::json;

namespace {

bool Has(const std::string& text, const char* a, const char* b) {
  return text.find(a) != std::string::npos || text.find(b) != std::string::npos;
}

// The GPU `job`'s first replica was granted, by UUID, from the node listing.
std::string GrantedUuid(const json& nodes, const json& replica) {
  const json grants = replica.value("grants", json::array());
  if (grants.empty()) return "";
  for (const json& n : nodes) {
    if (n.value("name", "") != replica.value("node", "")) continue;
    for (const json& g : n.value("gpus", json::array())) {
      if (g.value("index", -1) == grants[0].value("device", -2)) return g.value("uuid", "");
    }
  }
  return "";
}

// One job of the resource-request test: asked, granted and seen, field by field.
void CompareOne(Record& r, const std::string& name, const Share& asked, const json& job,
                const json& nodes, const ProbeLog& log) {
  const std::string p = name + ": ";
  Expect(r, p + "ended", job.value("state", "") == "succeeded", "succeeded",
         absl::StrCat(job.value("state", ""), " (", job.value("reason", ""), ")"));
  const json replica =
      job.value("replicas", json::array()).empty() ? json::object() : job["replicas"][0];
  const json grant =
      replica.value("grants", json::array()).empty() ? json::object() : replica["grants"][0];
  const json iso = replica.value("gpu_isolation", json::object());
  const json sees = log.sees.is_object() ? log.sees : json::object();
  const json mps = sees.value("mps", json::object());
  const json cgroup = sees.value("cgroup", json::object());
  const std::string enforcement = replica.value("enforcement", "");
  const int64_t memory = asked.gpu_memory_mib;

  Expect(r, p + "granted compute", grant.value("compute_milli", 0) == asked.compute_pct * 10,
         absl::StrCat(asked.compute_pct * 10, " milli-GPU"),
         Text(grant.value("compute_milli", json())));
  Expect(r, p + "granted device memory", grant.value("memory_mib", 0) == memory,
         absl::StrCat(memory, " MiB"), Text(grant.value("memory_mib", json())));
  const std::string enforced = iso.value("enforced", "none");
  Expect(r, p + "share enforced", !enforced.empty() && enforced.rfind("none", 0) != 0,
         "a mechanism that caps the share (MPS)",
         absl::StrCat(enforced, iso.contains("why") ? absl::StrCat(": ", Text(iso["why"])) : ""));
  const std::string uuid = GrantedUuid(nodes, replica);
  Expect(r, p + "device seen",
         sees.value("visible_devices", json()) == uuid &&
             sees.value("devices", json::array()).size() == 1,
         absl::StrCat("only ", uuid),
         absl::StrCat(Text(sees.value("visible_devices", json())), ", ",
                      sees.value("devices", json::array()).size(), " device(s)"));
  Expect(r, p + "memory cap seen",
         mps.value("pinned_device_mem_limit", json()) == absl::StrCat("0=", memory, "M"),
         absl::StrCat("0=", memory, "M"), Text(mps.value("pinned_device_mem_limit", json())));
  Expect(r, p + "compute cap seen",
         mps.value("active_thread_percentage", json()) == std::to_string(asked.compute_pct),
         std::to_string(asked.compute_pct), Text(mps.value("active_thread_percentage", json())));
  // CPU and memory: seen exactly where the record says a cgroup enforced them, and not where it
  // says none did (a record must neither oversell nor undersell).
  const json mem_seen = cgroup.value("memory_max_bytes", json());
  const bool mem_claimed = Has(enforcement, "memory.limit_in_bytes=", "memory.max=");
  Expect(r, p + "memory limit as recorded", mem_claimed == (mem_seen == asked.memory_mib << 20),
         mem_claimed ? absl::StrCat(asked.memory_mib << 20, " bytes (recorded enforced)")
                     : "no such limit (recorded not enforced)",
         Text(mem_seen));
  const json cpu_seen = cgroup.value("cpu_max_milli", json());
  const bool cpu_claimed = Has(enforcement, "cpu.cfs_quota_us=", "cpu.max=");
  Expect(r, p + "CPU limit as recorded", cpu_claimed == (cpu_seen == asked.cpu_milli),
         cpu_claimed ? absl::StrCat(asked.cpu_milli, " milli-CPU (recorded enforced)")
                     : "no such limit (recorded not enforced)",
         Text(cpu_seen));
  Expect(r, p + "memory taken", log.reached_mib == memory / 2, absl::StrCat(memory / 2, " MiB"),
         log.reached_mib ? absl::StrCat(*log.reached_mib, " MiB") : "never reached");
  r.observed["jobs"].push_back({{"name", name},
                                {"asked",
                                 {{"compute_pct", asked.compute_pct},
                                  {"gpu_memory_mib", memory},
                                  {"cpu_milli", asked.cpu_milli},
                                  {"memory_mib", asked.memory_mib}}},
                                {"granted", grant},
                                {"enforcement", enforcement},
                                {"gpu_isolation", iso.value("enforced", "")},
                                {"seen", {{"mps", mps}, {"cgroup", cgroup}}}});
}

absl::Status ResourceRequest(Cluster& c, Record& r) {
  auto gpus = FindSharedGpus(c, r);
  if (!gpus.ok() || gpus->empty()) return gpus.status();
  const SharedGpu& gpu = gpus->front();
  const std::vector<std::pair<std::string, Share>> asks = {
      {"poc-half", {50, GiBOf(gpu.memory_mib, 4), 200, c.options().job_memory_mib}},
      {"poc-quarter", {25, GiBOf(gpu.memory_mib, 8), 100, c.options().job_memory_mib * 3 / 4}},
  };
  std::vector<int64_t> ids;
  for (const auto& [name, share] : asks) {
    auto id = c.Submit(ProbeSpec(c.options(), gpu.model, name, share,
                                 {"--memory-mib", std::to_string(share.gpu_memory_mib / 2),
                                  "--step-mib", std::to_string(share.gpu_memory_mib / 8)}),
                       r);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  r.observed["jobs"] = json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto job = c.WaitFinal(ids[i]);
    if (!job.ok()) return job.status();
    Cluster::NoteNodes(*job, r);
    auto log = c.Probe(ids[i]);
    if (!log.ok()) return log.status();
    auto nodes = c.Nodes();
    if (!nodes.ok()) return nodes.status();
    CompareOne(r, asks[i].first, asks[i].second, *job, *nodes, *log);
  }
  return absl::OkStatus();
}

// Fills every shared GPU of the model with two half shares, submits one more, and checks that it
// waits until a GPU frees, that all succeed, and that each kept its solo rate.
absl::Status Contention(Cluster& c, Record& r) {
  auto gpus = FindSharedGpus(c, r);
  if (!gpus.ok() || gpus->empty()) return gpus.status();
  for (const SharedGpu& g : *gpus) {
    if (g.idle) continue;
    r.verdict = Verdict::kInconclusive;
    r.verdict_reason = absl::StrCat(g.node, "/gpu ", g.device,
                                    " already runs work: the test needs the shared GPUs idle to "
                                    "fill them");
    return absl::OkStatus();
  }
  const int64_t fill = 2 * static_cast<int64_t>(gpus->size());
  // Together the jobs take at most one CPU, so the host's CPUs are not what they contend for.
  const Share share{50, GiBOf(gpus->front().memory_mib, 4),
                    std::max<int64_t>(50, 1000 / fill / 10 * 10), c.options().job_memory_mib};
  auto solo = SoloRate(c, r, gpus->front().model, share);
  if (!solo.ok()) return solo.status();
  std::vector<int64_t> ids;
  for (int64_t i = 0; i <= fill; ++i) {
    auto id = c.Submit(ProbeSpec(c.options(), gpus->front().model, absl::StrCat("poc-contend-", i),
                                 share, {"--seconds", std::to_string(c.options().seconds)}),
                       r);
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  const int64_t extra = ids.back();
  // While the first `fill` run, the last one waits, and says why.
  for (int64_t i = 0; i < fill; ++i) {
    if (auto st = c.WaitRunning(ids[i]); !st.ok()) return st.status();
  }
  // It says why it waits: a job.waiting event, whatever the moment it was read.
  auto reason = c.WaitReason(extra, r.chain_start.seq);
  if (!reason.ok()) return reason.status();
  const std::string why = *reason;
  Expect(r, "the job past capacity says why it waits", !why.empty(),
         "a job.waiting event with its reason", why.empty() ? "none" : why);
  r.observed["wait_reason"] = why;
  int64_t first_end = 0;
  json jobs = json::array();
  for (int64_t id : ids) {
    auto job = c.WaitFinal(id);
    if (!job.ok()) return job.status();
    Cluster::NoteNodes(*job, r);
    auto log = c.Probe(id);
    if (!log.ok()) return log.status();
    const int64_t rate = log->per_second.value_or(0);
    const double ratio = static_cast<double>(rate) / static_cast<double>(*solo);
    const std::string name = job->value("name", "");
    Expect(r, name + ": ended", job->value("state", "") == "succeeded", "succeeded",
           job->value("state", ""));
    Expect(r, name + ": rate", ratio >= c.options().tolerance,
           absl::StrCat(">= ", c.options().tolerance, " of solo (", *solo, "/s)"),
           absl::StrCat(rate, "/s (", ratio, ")"));
    const json& replica =
        job->value("replicas", json::array()).empty() ? json::object() : (*job)["replicas"][0];
    if (id != extra) {
      const int64_t ended = replica.value("ended_us", int64_t{0});
      first_end = first_end == 0 ? ended : std::min(first_end, ended);
    }
    jobs.push_back(
        {{"id", id},
         {"name", name},
         {"on", PlacementOf(*job)},
         {"wait_s",
          (job->value("scheduled_us", int64_t{0}) - job->value("created_us", int64_t{0})) / 1e6},
         {"rate", rate},
         {"ratio", ratio}});
    if (id == extra) {
      const int64_t scheduled = job->value("scheduled_us", int64_t{0});
      Expect(r, "the waiting job starts after a GPU frees", scheduled >= first_end,
             absl::StrCat("scheduled at or after ", first_end, " (first end)"),
             absl::StrCat("scheduled at ", scheduled));
    }
  }
  r.observed["jobs"] = jobs;
  std::vector<std::string> names;
  std::vector<double> ratios, waits;
  for (const json& j : jobs) {
    names.push_back(j["name"]);
    ratios.push_back(j["ratio"]);
    waits.push_back(j["wait_s"]);
  }
  r.observed["charts"] = {Chart("Compute rate against the solo run", names, "rate / solo", ratios),
                          Chart("Wait from submission to start", names, "seconds", waits)};
  return absl::OkStatus();
}

}  // namespace

std::vector<TestCase> SoftwareTests() {
  return {
      {"resource-request", "Resource request: asked, granted and seen agree",
       "for two jobs with different shares (compute, device memory, CPU, memory): the record "
       "grants what was asked; the share is enforced; from inside, the probe sees only the "
       "granted GPU, the MPS caps equal to the ask, and cgroup limits exactly where the record "
       "says a cgroup enforced them; it takes the device memory it asked for",
       "the record and the job disagree, or a cap was not enforced: read the job's "
       "`enforcement` and `gpu_isolation` (carve show JOB -o json) and the agent's log; a GPU "
       "whose share_enforcement is none needs its MPS daemon (carve nodes)",
       "proves what this cluster gave two shares, on the GPUs they landed on, under the "
       "versions recorded; not other shares or GPUs",
       ResourceRequest},
      {"contention", "Contention: jobs at their peak at once",
       "every shared GPU of the model filled with two half shares at once: all run, one more "
       "waits (queued, with its reason) until a GPU frees, every job succeeds and keeps at least "
       "the tolerance of its solo compute rate",
       "a job that did not wait, or lost its rate: read its explanation (carve explain JOB) and "
       "the neighbours on its GPU (carve show)",
       "on a real GPU the probe's rate is its kernel's launches per second (GPU SM contention); "
       "on simulated GPUs it is a CPU loop under the job's CPU limit (queueing and host-side "
       "isolation only): `observed.compute` says which; quota and priority are the next test's",
       Contention},
      QuotaPriorityTest(),
      AbnormalJobTest(),
      ReclamationTest(),
  };
}

}  // namespace carve::poc
