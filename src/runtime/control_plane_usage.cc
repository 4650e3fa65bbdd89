// Usage records per job and the utilization matrix (docs/utilization.md defines every figure).
#include <algorithm>
#include <array>
#include <future>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

constexpr double kUsPerHour = 3'600'000'000.0;

// One replica's hold on one device during one attempt.
struct Held {
  const JobRecord* job = nullptr;
  int attempt = 0;
  std::string node;
  GrantRecord grant;
  int64_t from = 0;
  int64_t to = 0;
  bool current = false;  // the job's latest attempt
  std::string versions;  // the version set id of the node it ran on
  std::string cause;     // an earlier attempt's: why it ended
};

std::string VersionsId(const json& versions) {
  return versions.is_object() ? versions.value("id", "") : "";
}

// Every device hold of a job (only attempt `attempt`'s, if given): earlier attempts (kept in
// `attempts`) and the current one.
std::vector<Held> Holds(const JobRecord& job, int64_t now,
                        std::optional<int> attempt = std::nullopt) {
  std::vector<Held> out;
  for (const AttemptRecord& a : job.attempts) {
    if (attempt && a.attempt != *attempt) continue;
    for (const AttemptReplica& r : a.replicas) {
      for (const GrantRecord& g : r.grants) {
        out.push_back({&job, a.attempt, r.node, g, a.scheduled_us, a.ended_us, false,
                       VersionsId(r.versions), a.cause});
      }
    }
  }
  if (job.scheduled_us == 0 || job.replicas.empty() || (attempt && *attempt != job.attempt)) {
    return out;
  }
  int64_t end = job.ended_us > 0 ? job.ended_us : (IsFinal(job.state) ? job.scheduled_us : now);
  for (const ReplicaRecord& r : job.replicas) {
    for (const GrantRecord& g : r.grants) {
      out.push_back(
          {&job, job.attempt, r.node, g, job.scheduled_us, end, true, VersionsId(r.versions), ""});
    }
  }
  return out;
}

// What the attempt's replicas used as their agents measured it when each ended (reclaim record
// `used`): CPU seconds and device busy seconds summed, peak memory and peak device memory the
// largest replica's; null when none was measured.
void AddMeasuredUse(const json& reclaims, json& row) {
  double cpu = -1, busy = -1;
  int64_t peak = -1, device_peak = -1;
  auto sum = [](double& into, const json& obj, const char* key) {
    if (auto v = obj.find(key); v != obj.end() && v->is_number()) {
      into = std::max(into, 0.0) + v->get<double>();
    }
  };
  auto max = [](int64_t& into, const json& obj, const char* key) {
    if (auto v = obj.find(key); v != obj.end() && v->is_number_integer()) {
      into = std::max(into, v->get<int64_t>());
    }
  };
  for (const json& rec : reclaims) {
    const json used = rec.is_object() ? rec.value("used", json()) : json();
    if (!used.is_object()) continue;
    sum(cpu, used, "cpu_seconds");
    max(peak, used, "peak_memory_mib");
    const json device = used.value("device", json());
    if (!device.is_object()) continue;
    sum(busy, device, "busy_seconds");
    max(device_peak, device, "peak_memory_mib");
  }
  auto or_null = [](auto v) { return v >= 0 ? json(v) : json(nullptr); };
  row["cpu_seconds_used"] = or_null(cpu);
  row["peak_memory_mib"] = or_null(peak);
  row["device_busy_seconds"] = or_null(busy);
  row["peak_device_memory_mib"] = or_null(device_peak);
}

double Overlap(int64_t from, int64_t to, int64_t since, int64_t until) {
  return static_cast<double>(std::max<int64_t>(0, std::min(to, until) - std::max(from, since)));
}

}  // namespace

double GrantGpus(const GpuCatalog& catalog, const std::map<std::string, NodeRecord>& nodes,
                 const std::string& node, const GrantRecord& g, std::string* model) {
  *model = "unknown";
  auto n = nodes.find(node);
  if (n == nodes.end() || g.device < 0 || g.device >= static_cast<int>(n->second.gpus.size())) {
    return static_cast<double>(g.compute_milli) / 1000.0;
  }
  auto id = catalog.Find(n->second.gpus[g.device].model);
  if (!id.ok()) return static_cast<double>(g.compute_milli) / 1000.0;
  const GpuModel& m = catalog.model(*id);
  *model = m.name;
  if (!g.profile.empty() && m.mig_compute_slices > 0) {
    for (const MigProfile& p : m.mig_profiles) {
      if (p.name == g.profile) {
        return static_cast<double>(p.compute_slices) / m.mig_compute_slices;
      }
    }
  }
  return static_cast<double>(g.compute_milli) / 1000.0;
}

std::vector<json> ControlPlane::UsageRows(const JobRecord& job, int64_t now,
                                          std::optional<int> attempt) const {
  std::map<int, json> rows;  // by attempt
  for (const Held& h : Holds(job, now, attempt)) {
    std::string model;
    double gpus = GrantGpus(*catalog_, nodes_, h.node, h.grant, &model);
    json& r = rows[h.attempt];
    if (r.is_null()) {
      auto cpu = ParseCpuMilli(job.spec.cpu);
      auto mem = ParseMemMib(job.spec.memory);
      r = {{"job", job.id},
           {"attempt", h.attempt},
           {"name", job.spec.name},
           {"user", job.submitted_by},
           {"tenant", job.spec.tenant},
           {"project", job.spec.project},
           {"queue", job.spec.queue},
           {"kind", job.spec.kind},
           {"mode", job.spec.mode},
           {"replicas", job.spec.replicas},
           {"cpu_milli_per_replica", cpu.ok() ? cpu->units() : 0},
           {"memory_mib_per_replica", mem.ok() ? mem->units() : 0},
           {"queued_us", job.created_us},
           {"started_us", h.current ? job.started_us : h.from},
           {"held_from_us", h.from},
           {"held_to_us", h.to},
           {"ended_us", h.current ? job.ended_us : h.to},
           {"end", h.current ? Name(job.state) : "retried"},
           {"end_reason", h.current ? job.reason : "the platform ran it again: " + h.cause},
           {"devices", json::array()}};
    }
    json dev = {{"node", h.node},
                {"device", h.grant.device},
                {"model", model},
                {"gpus", gpus},
                {"compute_milli", h.grant.compute_milli},
                {"memory_mib", h.grant.memory_mib}};
    if (!h.grant.profile.empty()) dev["mig_profile"] = h.grant.profile;
    if (!h.versions.empty()) dev["versions"] = h.versions;
    r["devices"].push_back(dev);
  }
  std::vector<json> out;
  for (auto& [attempt, r] : rows) {
    json reclaims = json::array();  // the attempt's replicas' reclaim records
    if (attempt == job.attempt) {
      for (const ReplicaRecord& rep : job.replicas) reclaims.push_back(rep.reclaim);
    } else {
      for (const AttemptRecord& a : job.attempts) {
        if (a.attempt == attempt) reclaims = a.reclaim;
      }
    }
    AddMeasuredUse(reclaims, r);
    out.push_back(std::move(r));
  }
  return out;
}

std::string UsageRowId(const json& row) {
  return absl::StrFormat("%020d/%012d/%06d", row.value("held_to_us", int64_t{0}),
                         row.value("job", int64_t{0}), row.value("attempt", 0));
}

std::string UsageRowsFrom(int64_t since_us) {
  // Ids order by held_to_us: the page starts after every row that ended before `since_us`.
  return since_us <= 0 ? "" : absl::StrFormat("%020d/~", since_us - 1);
}

namespace {

// The row's figures over [since, until): false when its hold lies outside the range.
bool Figures(json& r, int64_t since_us, int64_t until_us) {
  int64_t from = r["held_from_us"], to = r["held_to_us"];
  double seconds = Overlap(from, to, since_us, until_us) / 1e6;
  if (seconds <= 0 && !(from < until_us && to >= since_us)) return false;
  double gpu_seconds = 0.0;
  std::set<std::string> nodes;
  for (const json& d : r["devices"]) {
    gpu_seconds += d["gpus"].get<double>() * seconds;
    nodes.insert(d["node"].get<std::string>());
  }
  double replicas = r["replicas"].get<double>();
  r["gpu_seconds"] = gpu_seconds;
  r["cpu_core_seconds"] = r["cpu_milli_per_replica"].get<double>() / 1000 * replicas * seconds;
  r["memory_gib_seconds"] = r["memory_mib_per_replica"].get<double>() / 1024 * replicas * seconds;
  r["nodes"] = nodes;
  return true;
}

}  // namespace

json ControlPlane::UsageRecords(int64_t since_us, int64_t until_us, const Principal& who) const {
  std::map<std::pair<int64_t, int>, json> records;  // (job, attempt)
  int64_t now = 0;
  std::future<absl::Status> committed;
  {
    // The attempts that hold devices now, from memory first: one that ends meanwhile has its row
    // in the store by the time it leaves memory.
    std::lock_guard<std::mutex> lock(mu_);
    now = now_();
    for (const auto& [id, job] : jobs_.all()) {
      if (job.replicas.empty()) continue;  // holds nothing now (most of a long queue)
      if (!Allowed(who, Access::kRead, job.spec.tenant, job.spec.project)) continue;
      for (json& r : UsageRows(job, now, job.attempt)) records[{id, job.attempt}] = std::move(r);
    }
    // An attempt that ended before this left memory's view with its row still being committed.
    committed = journal_.Append(StoreBatch{});
  }
  committed.wait();
  if (until_us <= 0) until_us = now;
  // Every ended attempt's row, written when it ended (ids order them by the end of their hold);
  // memory's row of an attempt wins.
  ForEachStored("usage", UsageRowsFrom(since_us), [&](const StoredRecord& s) {
    json r = json::parse(s.json, nullptr, false);
    if (!r.is_object()) return;
    if (!Allowed(who, Access::kRead, r.value("tenant", ""), r.value("project", ""))) return;
    records.try_emplace({r.value("job", int64_t{0}), r.value("attempt", 0)}, std::move(r));
  });
  json out = json::array();
  for (auto& [key, r] : records) {
    if (Figures(r, since_us, until_us)) out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<json> ControlPlane::Usage(const std::string& by, int64_t since_us, int64_t until_us,
                                         const Principal& who) const {
  static const std::set<std::string> kBy = {"tenant", "project", "queue", "kind", "model", "user"};
  if (!kBy.count(by)) {
    return absl::InvalidArgumentError(
        absl::StrCat("by: \"", by, "\" is not tenant, project, queue, kind, model or user"));
  }
  json records = UsageRecords(since_us, until_us, who);
  std::map<std::string, json> rows;
  auto row = [&](const std::string& key) -> json& {
    json& r = rows[key];
    if (r.is_null()) {
      r = {{by, key},
           {"jobs", std::set<int64_t>()},
           {"gpu_hours", 0.0},
           {"productive_gpu_hours", 0.0},
           {"cpu_core_hours", 0.0},
           {"memory_gib_hours", 0.0}};
    }
    return r;
  };
  for (const json& rec : records) {
    bool productive = rec["end"].is_string() &&
                      ParseJobState(rec["end"].get<std::string>()) == JobState::kSucceeded;
    if (by == "model") {
      double held = static_cast<double>(rec["held_to_us"].get<int64_t>() -
                                        rec["held_from_us"].get<int64_t>());
      double share = held > 0 ? Overlap(rec["held_from_us"], rec["held_to_us"], since_us,
                                        until_us > 0 ? until_us : INT64_MAX) /
                                    kUsPerHour
                              : 0;
      for (const json& d : rec["devices"]) {
        json& r = row(d["model"]);
        r["jobs"].push_back(rec["job"]);
        double h = d["gpus"].get<double>() * share;
        r["gpu_hours"] = r["gpu_hours"].get<double>() + h;
        if (productive) r["productive_gpu_hours"] = r["productive_gpu_hours"].get<double>() + h;
      }
      continue;
    }
    std::string key = by == "project" ? absl::StrCat(rec["tenant"].get<std::string>(), "/",
                                                     rec["project"].get<std::string>())
                                      : rec[by].get<std::string>();
    json& r = row(key);
    r["jobs"].push_back(rec["job"]);
    double h = rec["gpu_seconds"].get<double>() / 3600;
    r["gpu_hours"] = r["gpu_hours"].get<double>() + h;
    if (productive) r["productive_gpu_hours"] = r["productive_gpu_hours"].get<double>() + h;
    r["cpu_core_hours"] =
        r["cpu_core_hours"].get<double>() + rec["cpu_core_seconds"].get<double>() / 3600;
    r["memory_gib_hours"] =
        r["memory_gib_hours"].get<double>() + rec["memory_gib_seconds"].get<double>() / 3600;
  }
  json out = json::array();
  for (auto& [key, r] : rows) {
    std::set<int64_t> jobs = r["jobs"].get<std::set<int64_t>>();
    r["jobs"] = jobs.size();
    out.push_back(std::move(r));
  }
  return json{{"by", by}, {"since_us", since_us}, {"until_us", until_us}, {"rows", out}};
}

absl::Status ControlPlane::LoadUtilization() {
  auto records = store_->Load("utilization");
  if (!records.ok()) return records.status();
  for (const StoredRecord& r : *records) {
    json j = json::parse(r.json, nullptr, false);
    int64_t bucket = j.value("bucket_us", int64_t{0});
    const json cells = j.value("cells", json::array());
    for (const json& c : cells) {
      utilization_.buckets[bucket][{c.value("pool", ""), c.value("model", "")}] =
          UtilizationCell::FromJson(c);
    }
  }
  return absl::OkStatus();
}

absl::Status ControlPlane::AccrueUtilization() {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Broken();
  const int64_t now = now_();
  StoreBatch batch;
  AccrueGpus(now, batch);
  AccrueQueues(now, batch);
  if (batch.puts.empty()) return absl::OkStatus();
  return Durable(lock, std::move(batch));
}

void ControlPlane::AccrueGpus(int64_t now, StoreBatch& batch) {
  UtilizationLedger& u = utilization_;
  if (u.last_us == 0 || now <= u.last_us) {
    if (u.last_us == 0) u.last_us = u.persisted_us = now;
    return;
  }
  const std::vector<PoolSelector> pools = config_.Pools();
  for (const auto& [name, node] : nodes_) {
    const bool online = node.Online();
    for (const DiscoveredGpu& g : node.gpus) {
      auto id = catalog_->Find(g.model);
      UtilizationCell per_us;
      per_us.installed = 1;
      per_us.online = online ? 1 : 0;
      per_us.schedulable = node.Schedulable(g) ? 1 : 0;
      if (online && g.utilization_pct >= 0) {  // the agent's latest activity sample
        per_us.busy = std::min(100, g.utilization_pct) / 100.0;
        per_us.busy_reported = 1;
      }
      u.Accrue({PoolOf(node.labels, pools), id.ok() ? catalog_->model(*id).name : g.model},
               u.last_us, now, per_us);
    }
  }
  u.last_us = now;
  // Buckets go to the store every 10 s and whenever one closes.
  bool closed = u.dirty.size() > 1;
  if (!closed && now - u.persisted_us < 10'000'000) return;
  for (int64_t bucket : u.dirty) {
    json cells = json::array();
    for (const auto& [key, cell] : u.buckets[bucket]) {
      json c = cell.ToJson();
      c["pool"] = key.first;
      c["model"] = key.second;
      cells.push_back(c);
    }
    batch.puts.push_back({"utilization", absl::StrFormat("%020d", bucket),
                          json{{"bucket_us", bucket}, {"cells", cells}}.dump()});
  }
  u.dirty.clear();
  u.persisted_us = now;
}

namespace {

// The quantities of one time range per (pool, model): the ledger's cells, and the GPU-time jobs
// held (allocated, and of it productive).
struct Tally {
  std::map<UtilizationLedger::Key, UtilizationCell> cells;
  std::map<UtilizationLedger::Key, std::pair<double, double>> held;
};

// The whole range, and with a step each `step`-long piece of it (the last may be shorter).
struct Ranges {
  int64_t from = 0, to = 0, step = 0;
  Tally whole;
  std::vector<Tally> pieces;

  size_t Piece(int64_t t) const { return static_cast<size_t>((t - from) / step); }
  int64_t PieceFrom(size_t i) const { return from + static_cast<int64_t>(i) * step; }
  int64_t PieceTo(size_t i) const {  // (PieceFrom + step would overflow for a huge step)
    const int64_t start = PieceFrom(i);
    return to - start <= step ? to : start + step;
  }

  void AddCells(int64_t bucket, const UtilizationLedger::Key& key, const UtilizationCell& c) {
    whole.cells[key].Add(c);
    if (step > 0) pieces[Piece(bucket)].cells[key].Add(c);
  }
  // `gpus` GPUs held over [held_from, held_to).
  void AddHeld(const UtilizationLedger::Key& key, double gpus, int64_t held_from, int64_t held_to,
               bool productive) {
    auto add = [&](Tally& t, int64_t since, int64_t until) {
      double v = gpus * Overlap(held_from, held_to, since, until);
      auto& h = t.held[key];
      h.first += v;
      if (productive) h.second += v;
      t.cells[key];  // a row even when the ledger has none
    };
    add(whole, from, to);
    if (step <= 0 || held_to <= from || held_from >= to) return;
    size_t first = Piece(std::max(held_from, from));
    size_t last = Piece(std::min(held_to, to) - 1);
    for (size_t i = first; i <= last && i < pieces.size(); ++i)
      add(pieces[i], PieceFrom(i), PieceTo(i));
  }
};

json UtilizationRows(const Tally& t) {
  std::map<UtilizationLedger::Key, std::array<double, 7>> rows;
  for (const auto& [key, c] : t.cells) {
    auto h = t.held.find(key);
    double allocated = h == t.held.end() ? 0 : h->second.first;
    double productive = h == t.held.end() ? 0 : h->second.second;
    std::array<double, 7> v = {c.installed, c.online,   c.schedulable,  allocated,
                               c.busy,      productive, c.busy_reported};
    for (const auto& k :
         {key, UtilizationLedger::Key{key.first, "*"}, UtilizationLedger::Key{"*", "*"}}) {
      auto& r = rows[k];
      for (size_t i = 0; i < v.size(); ++i) r[i] += v[i];
    }
  }
  static const char* kNames[] = {"installed", "online",     "schedulable",  "allocated",
                                 "busy",      "productive", "busy_reported"};
  json out = json::array();
  for (const auto& [key, v] : rows) {
    json row = {{"pool", key.first}, {"model", key.second}};
    json hours = json::object();
    for (size_t i = 0; i < v.size(); ++i) hours[kNames[i]] = v[i] / kUsPerHour;
    row["gpu_hours"] = hours;
    json figures = json::array();
    // Numerators over denominators, then how busy and how productive the allocated time was.
    static const std::pair<size_t, size_t> kPairs[] = {
        {3, 0}, {3, 1}, {3, 2}, {4, 0}, {4, 1}, {4, 2}, {5, 0}, {5, 1}, {5, 2}, {4, 3}, {5, 3}};
    for (auto [n, d] : kPairs) {
      json f = {{"figure", absl::StrCat(kNames[n], "/", kNames[d])},
                {"numerator", kNames[n]},
                {"denominator", kNames[d]}};
      f["value"] = v[d] > 0 ? json(v[n] / v[d]) : json(nullptr);
      figures.push_back(f);
    }
    row["figures"] = figures;
    out.push_back(row);
  }
  return out;
}

}  // namespace

absl::StatusOr<json> ControlPlane::Utilization(int64_t since_us, int64_t until_us,
                                               int64_t step_us) const {
  constexpr int64_t kB = UtilizationLedger::kBucketUs;
  if (step_us < 0 || (step_us > 0 && step_us % kB != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_us: ", step_us, " is not a whole number of minutes (", kB, " us)"));
  }
  Ranges r;
  std::set<std::pair<int64_t, int>> live;    // (job, attempt) holding devices now
  std::map<std::string, std::string> pools;  // node -> pool
  auto key_of = [&](const std::string& node, const std::string& model) {
    auto pool = pools.find(node);
    return UtilizationLedger::Key{pool == pools.end() ? "default" : pool->second, model};
  };
  std::future<absl::Status> committed;
  {
    // Memory first: a job that ends meanwhile is in the store by the time it leaves memory.
    std::lock_guard<std::mutex> lock(mu_);
    int64_t now = now_();
    if (until_us <= 0 || until_us > now) until_us = now;
    // Whole buckets: the range is widened to minute boundaries, and says so.
    if (since_us <= 0 && !utilization_.buckets.empty())
      since_us = utilization_.buckets.begin()->first;
    r.from = since_us - since_us % kB;
    r.to = until_us % kB == 0 ? until_us : until_us - until_us % kB + kB;
    r.step = step_us;
    if (step_us > 0) {
      const int64_t span = r.to - r.from;  // (span + step - 1 would overflow for a huge step)
      int64_t n = step_us >= span ? (span > 0 ? 1 : 0) : (span + step_us - 1) / step_us;
      if (n > kMaxUtilizationSteps) {
        return absl::InvalidArgumentError(absl::StrCat("step_us: ", step_us,
                                                       " cuts the range into ", n,
                                                       " pieces; at most ", kMaxUtilizationSteps));
      }
      r.pieces.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
    }
    for (auto it = utilization_.buckets.lower_bound(r.from);
         it != utilization_.buckets.end() && it->first < r.to; ++it) {
      for (const auto& [key, cell] : it->second) r.AddCells(it->first, key, cell);
    }
    const std::vector<PoolSelector> selectors = config_.Pools();
    for (const auto& [name, node] : nodes_) pools[name] = PoolOf(node.labels, selectors);
    for (const auto& [id, job] : jobs_.all()) {
      if (job.replicas.empty()) continue;
      live.emplace(id, job.attempt);
      for (const Held& h : Holds(job, now, job.attempt)) {
        std::string model;
        double gpus = GrantGpus(*catalog_, nodes_, h.node, h.grant, &model);
        r.AddHeld(key_of(h.node, model), gpus, h.from, h.to,
                  h.current && job.state == JobState::kSucceeded);
      }
    }
    committed = journal_.Append(StoreBatch{});  // as in UsageRecords
  }
  committed.wait();
  // Ended attempts' holds from their usage rows (those that ended before the range hold nothing
  // in it).
  ForEachStored("usage", UsageRowsFrom(r.from), [&](const StoredRecord& s) {
    json row = json::parse(s.json, nullptr, false);
    if (!row.is_object() || live.count({row.value("job", int64_t{0}), row.value("attempt", 0)})) {
      return;
    }
    const bool succeeded = ParseJobState(row.value("end", "")) == JobState::kSucceeded;
    for (const json& d : row.value("devices", json::array())) {
      r.AddHeld(key_of(d.value("node", ""), d.value("model", "unknown")), d.value("gpus", 0.0),
                row.value("held_from_us", int64_t{0}), row.value("held_to_us", int64_t{0}),
                succeeded);
    }
  });
  json out = {{"from_us", r.from},
              {"to_us", r.to},
              {"requested", {{"since_us", since_us}, {"until_us", until_us}}},
              {"rows", UtilizationRows(r.whole)},
              {"definitions", "docs/utilization.md"}};
  if (step_us > 0) {
    out["step_us"] = step_us;
    json series = json::array();
    for (size_t i = 0; i < r.pieces.size(); ++i) {
      series.push_back({{"from_us", r.PieceFrom(i)},
                        {"to_us", r.PieceTo(i)},
                        {"rows", UtilizationRows(r.pieces[i])}});
    }
    out["series"] = std::move(series);
  }
  return out;
}

}  // namespace carve
