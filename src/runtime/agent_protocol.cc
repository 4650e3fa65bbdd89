#include "runtime/agent_protocol.h"

#include <functional>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/input_limits.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

std::string ItemPath(const std::string& list, size_t i) { return absl::StrCat(list, "[", i, "]"); }

// Reads the fields of one object of the protocol into typed places. A missing field leaves its
// place as it is (its default); the first field that cannot be read becomes status() and the
// reads after it do nothing. `at` is the object's path in the message ("" for the message).
class Reader {
 public:
  Reader(const json& j, std::string at) : j_(j), at_(std::move(at)) {
    if (!j.is_object()) status_ = Bad(at_.empty() ? "body" : at_, "must be an object");
  }
  const absl::Status& status() const { return status_; }
  std::string Path(const char* key) const {
    return at_.empty() ? key : absl::StrCat(at_, ".", key);
  }
  // The field's value, or nullptr when it is missing (or reading has already failed).
  const json* Find(const char* key) const {
    if (!status_.ok()) return nullptr;
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  void Fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  Reader& Require(const char* key) {
    if (status_.ok() && !j_.contains(key)) Fail(Bad(Path(key), "missing"));
    return *this;
  }

  Reader& Read(const char* key, std::string& out) {
    if (const json* v = Find(key)) {
      if (!v->is_string()) return Failed(key, "must be a string");
      out = v->get<std::string>();
    }
    return *this;
  }
  Reader& Read(const char* key, bool& out) {
    if (const json* v = Find(key)) {
      if (!v->is_boolean()) return Failed(key, "must be true or false");
      out = v->get<bool>();
    }
    return *this;
  }
  Reader& Read(const char* key, int64_t& out) { return Whole(key, out); }
  Reader& Read(const char* key, int& out) { return Whole(key, out); }
  template <typename T>
  Reader& Read(const char* key, std::optional<T>& out) {
    if (Find(key) != nullptr) {
      T value{};
      if (Read(key, value).status_.ok()) out = std::move(value);
    }
    return *this;
  }
  // A whole number or null (null: none).
  Reader& Nullable(const char* key, std::optional<int>& out) {
    const json* v = Find(key);
    if (v == nullptr || v->is_null()) return *this;
    if (!v->is_number_integer()) return Failed(key, "must be a whole number or null");
    return Read(key, out);
  }
  // A name out of a fixed set, read by `parse` (which returns an optional).
  template <typename E, typename Parse>
  Reader& Named(const char* key, std::optional<E>& out, Parse parse, absl::string_view what) {
    std::optional<std::string> name;
    if (!Read(key, name).status_.ok() || !name) return *this;
    out = parse(*name);
    if (!out) {
      return Failed(key, absl::StrCat("unknown ", what, " \"", absl::CEscape(*name), "\""));
    }
    return *this;
  }
  // A list whose items `decode(item, path)` reads (returning a StatusOr).
  template <typename T, typename Decode>
  Reader& List(const char* key, std::vector<T>& out, Decode decode) {
    const json* list = Find(key);
    if (list == nullptr) return *this;
    if (!list->is_array()) return Failed(key, "must be a list");
    for (size_t i = 0; i < list->size() && status_.ok(); ++i) {
      absl::StatusOr<T> item = decode((*list)[i], ItemPath(Path(key), i));
      if (!item.ok()) return Failed(item.status());
      out.push_back(*std::move(item));
    }
    return *this;
  }
  template <typename T, typename Decode>
  Reader& List(const char* key, std::optional<std::vector<T>>& out, Decode decode) {
    if (Find(key) == nullptr) return *this;
    std::vector<T> items;
    if (List(key, items, decode).status_.ok()) out = std::move(items);
    return *this;
  }
  Reader& Read(const char* key, std::vector<std::string>& out);
  Reader& Read(const char* key, std::map<std::string, std::string>& out);

 private:
  Reader& Failed(const char* key, absl::string_view what) { return Failed(Bad(Path(key), what)); }
  Reader& Failed(absl::Status s) {
    Fail(std::move(s));
    return *this;
  }
  // Every number of the protocol is a whole one, in the range of its place.
  template <typename Int>
  Reader& Whole(const char* key, Int& out) {
    const json* v = Find(key);
    if (v == nullptr) return *this;
    bool fits = v->is_number_integer();
    if (fits && v->is_number_unsigned()) {
      fits = v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
    } else if (fits) {
      const int64_t n = v->get<int64_t>();
      fits = n >= std::numeric_limits<Int>::min() && n <= std::numeric_limits<Int>::max();
    }
    if (!fits) return Failed(key, "must be a whole number");
    out = v->get<Int>();
    return *this;
  }

  const json& j_;
  std::string at_;
  absl::Status status_;
};

// A T read from object `j` at `at` by `fields(reader, value)`.
template <typename T, typename Fields>
absl::StatusOr<T> ReadObject(const json& j, const std::string& at, Fields fields) {
  T value;
  Reader in(j, at);
  fields(in, value);
  if (!in.status().ok()) return in.status();
  return value;
}

absl::StatusOr<std::string> StringAt(const json& v, const std::string& at) {
  if (!v.is_string()) return Bad(at, "must be a string");
  return v.get<std::string>();
}

Reader& Reader::Read(const char* key, std::vector<std::string>& out) {
  return List(key, out, StringAt);
}

Reader& Reader::Read(const char* key, std::map<std::string, std::string>& out) {
  const json* map = Find(key);
  if (map == nullptr) return *this;
  if (!map->is_object()) return Failed(key, "must be an object");
  for (const auto& [name, value] : map->items()) {
    absl::StatusOr<std::string> text = StringAt(value, absl::StrCat(Path(key), ".", name));
    if (!text.ok()) return Failed(text.status());
    out[name] = *std::move(text);
  }
  return *this;
}

// The reclaim record is kept as the agent made it; the fields the server reads must have their
// types: {status, checks: [{ok, device, name, observed}]}.
// What a replica used, as its agent measured it (agent.cc UsedJson): figures are non-negative
// numbers where present (readers add and compare them), `source` text. The node's word: the
// server cannot check the figures, only their shape.
absl::Status CheckUsed(const json& used, const std::string& at) {
  if (used.is_null()) return absl::OkStatus();
  if (!used.is_object()) return Bad(at, "must be an object");
  for (const auto& [key, value] : used.items()) {
    if (key == "source") {
      if (!value.is_string()) return Bad(at + ".source", "must be a string");
    } else if (key == "device") {
      if (absl::Status s = CheckUsed(value, at + ".device"); !s.ok()) return s;
    } else if (key == "peak_memory_mib") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return Bad(at + "." + key, "must be a non-negative integer");
      }
    } else if (key == "cpu_seconds" || key == "busy_seconds") {
      if (!value.is_number() || value.get<double>() < 0) {
        return Bad(at + "." + key, "must be a non-negative number");
      }
    } else {
      return Bad(at + "." + key,
                 "is not a field (cpu_seconds, peak_memory_mib, busy_seconds, "
                 "device, source)");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReclaim(const json& reclaim, const std::string& at) {
  if (reclaim.is_null()) return absl::OkStatus();
  if (!reclaim.is_object()) return Bad(at, "must be an object or null");
  // Kept whole in the job's record: an agent's record of megabytes bloated every read of the job.
  if (size_t bytes = reclaim.dump().size(); bytes > kMaxReclaimBytes) {
    return Bad(at, absl::StrCat("is ", bytes, " bytes; at most ", kMaxReclaimBytes));
  }
  if (absl::Status s = CheckUsed(reclaim.value("used", json()), at + ".used"); !s.ok()) return s;
  Reader in(reclaim, at);
  std::string status;
  std::vector<bool> checks;
  in.Read("status", status)
      .List("checks", checks, [](const json& c, const std::string& path) -> absl::StatusOr<bool> {
        Reader check(c, path);
        bool ok = false;
        int device = -1;
        std::string name, observed;
        check.Read("ok", ok).Read("device", device).Read("name", name).Read("observed", observed);
        if (!check.status().ok()) return check.status();
        return ok;
      });
  return in.status();
}

// The residue is kept with the node record's codec, which read a field of the wrong type with
// nlohmann's own exception text (red team, 2026-12-02): the fields it reads are checked here
// first, so the error names the field. {processes: [{pid, uid, command, memory_mib, state}],
// unexplained_mib, used_mib, baseline_mib}.
absl::Status CheckResidue(const json& residue, const std::string& at) {
  Reader in(residue, at);
  int64_t unexplained = 0, used = 0, baseline = 0;
  std::vector<bool> processes;
  in.Read("unexplained_mib", unexplained)
      .Read("used_mib", used)
      .Read("baseline_mib", baseline)
      .List("processes", processes,
            [](const json& p, const std::string& path) -> absl::StatusOr<bool> {
              Reader process(p, path);
              int64_t pid = 0, uid = 0, memory = 0;
              std::string command, state;
              process.Read("pid", pid)
                  .Read("uid", uid)
                  .Read("command", command)
                  .Read("memory_mib", memory)
                  .Read("state", state);
              if (process.status().ok() && command.size() > kMaxReasonBytes) {
                return Bad(
                    process.Path("command"),
                    absl::StrCat("is ", command.size(), " bytes; at most ", kMaxReasonBytes));
              }
              if (!process.status().ok()) return process.status();
              return true;
            });
  return in.status();
}

absl::StatusOr<GrantRecord> GrantAt(const json& j, const std::string& at) {
  return ReadObject<GrantRecord>(j, at, [](Reader& in, GrantRecord& g) {
    in.Read("device", g.device)
        .Read("compute_milli", g.compute_milli)
        .Read("memory_mib", g.memory_mib)
        .Read("profile", g.profile)
        .Read("start", g.start)
        .Read("created", g.created);
  });
}

absl::StatusOr<MigInstanceReport> InstanceAt(const json& j, const std::string& at) {
  return ReadObject<MigInstanceReport>(j, at, [](Reader& in, MigInstanceReport& m) {
    in.Read("uuid", m.instance.uuid)
        .Read("profile", m.instance.profile)
        .Require("start")
        .Read("start", m.instance.start)
        .Named("health", m.health, ParseHealth, "health")
        .Read("health_reason", m.health_reason);
  });
}

json InstanceToJson(const MigInstanceReport& m) {
  json j = {
      {"uuid", m.instance.uuid}, {"profile", m.instance.profile}, {"start", m.instance.start}};
  if (m.health) {
    j["health"] = std::string(HealthName(*m.health));
    j["health_reason"] = m.health_reason;
  }
  return j;
}

template <typename T>
json ListToJson(const std::vector<T>& items) {
  json out = json::array();
  for (const T& item : items) out.push_back(item.ToJson());
  return out;
}

}  // namespace

int64_t WaitBackoffMs(const absl::Status& answer, absl::string_view node, int64_t heartbeat_ms) {
  if (!absl::IsResourceExhausted(answer)) return heartbeat_ms;
  return kWaitRefusedRetryMs +
         static_cast<int64_t>(
             std::hash<std::string_view>{}(std::string_view(node.data(), node.size())) % 1000);
}

absl::string_view HealthName(DeviceHealth health) {
  switch (health) {
    case DeviceHealth::kHealthy:
      return "healthy";
    case DeviceHealth::kSuspect:
      return "suspect";
    case DeviceHealth::kUnhealthy:
      return "unhealthy";
  }
  return "unhealthy";
}

std::optional<DeviceHealth> ParseHealth(absl::string_view name) {
  for (DeviceHealth h :
       {DeviceHealth::kHealthy, DeviceHealth::kSuspect, DeviceHealth::kUnhealthy}) {
    if (HealthName(h) == name) return h;
  }
  return std::nullopt;
}

json ReplicaReport::ToJson() const {
  json j = {{"job", job}, {"replica", replica}, {"pid", pid}, {"enforcement", enforcement}};
  if (state) j["state"] = std::string(Name(*state));
  if (attempt) j["attempt"] = *attempt;
  if (started_us) j["started_us"] = *started_us;
  if (!gpu_isolation.is_null()) j["gpu_isolation"] = gpu_isolation;
  if (log_truncated_at > 0) j["log_truncated_at"] = log_truncated_at;
  if (!log_disk.empty()) j["log_disk"] = log_disk;
  if (fenced_us) j["fenced_us"] = *fenced_us;
  if (reclaim) {
    j["reclaim"] = *reclaim;
    j["oom_killed"] = oom_killed;
  }
  if (end) {
    if (end->ended_us) j["ended_us"] = *end->ended_us;
    j["timed_out"] = end->timed_out;
    j["exit_code"] = end->exit_code ? json(*end->exit_code) : json(nullptr);
    j["signal"] = end->signal ? json(*end->signal) : json(nullptr);
  }
  return j;
}

absl::StatusOr<ReplicaReport> ReplicaReport::FromJson(const json& j, const std::string& at) {
  return ReadObject<ReplicaReport>(j, at, [](Reader& in, ReplicaReport& r) {
    in.Read("job", r.job)
        .Read("replica", r.replica)
        .Read("attempt", r.attempt)
        .Named("state", r.state, ParseReplicaState, "state")
        .Read("pid", r.pid)
        .Read("started_us", r.started_us)
        .Read("enforcement", r.enforcement)
        .Read("log_truncated_at", r.log_truncated_at)
        .Read("log_disk", r.log_disk)
        .Read("fenced_us", r.fenced_us)
        .Read("oom_killed", r.oom_killed);
    if (const json* isolation = in.Find("gpu_isolation")) r.gpu_isolation = *isolation;
    ReplicaEnd end;
    in.Read("ended_us", end.ended_us)
        .Read("timed_out", end.timed_out)
        .Nullable("exit_code", end.exit_code)
        .Nullable("signal", end.signal);
    for (const char* key : {"ended_us", "timed_out", "exit_code", "signal"}) {
      if (in.Find(key) != nullptr) r.end = end;
    }
    if (const json* reclaim = in.Find("reclaim")) {
      in.Fail(CheckReclaim(*reclaim, in.Path("reclaim")));
      r.reclaim = *reclaim;
    }
  });
}

json GpuReport::ToJson() const {
  json instances = json::array();
  for (const MigInstanceReport& m : mig_instances) instances.push_back(InstanceToJson(m));
  json j = {{"index", index},
            {"health", std::string(HealthName(health))},
            {"health_reason", health_reason},
            {"utilization_pct", utilization_pct},
            {"mig_instances", instances},
            {"residue", residue ? residue->ToJson() : json(nullptr)}};
  if (share_enforcement) j["share_enforcement"] = *share_enforcement;
  return j;
}

absl::StatusOr<GpuReport> GpuReport::FromJson(const json& j, const std::string& at) {
  return ReadObject<GpuReport>(j, at, [](Reader& in, GpuReport& g) {
    std::optional<DeviceHealth> health;
    in.Read("index", g.index)
        .Named("health", health, ParseHealth, "health")
        .Read("health_reason", g.health_reason)
        .Read("utilization_pct", g.utilization_pct)
        .Read("share_enforcement", g.share_enforcement)
        .List("mig_instances", g.mig_instances, InstanceAt);
    if (health) g.health = *health;
    // The node record keeps the residue as sent, so it is read with the record's codec.
    if (const json* residue = in.Find("residue"); residue != nullptr && !residue->is_null()) {
      absl::StatusOr<GpuResidue> read = absl::InvalidArgumentError("must be an object or null");
      if (residue->is_object()) {
        if (absl::Status s = CheckResidue(*residue, in.Path("residue")); !s.ok()) {
          in.Fail(s);
          return;
        }
        read = GpuResidue::FromJson(*residue);
      }
      if (read.ok()) {
        g.residue = *std::move(read);
      } else {
        in.Fail(Bad(in.Path("residue"), read.status().message()));
      }
    }
  });
}

json LayoutResult::ToJson() const {
  return {{"gpu", gpu}, {"request", request}, {"ok", ok}, {"error", error}, {"time_us", time_us}};
}

absl::StatusOr<LayoutResult> LayoutResult::FromJson(const json& j, const std::string& at) {
  return ReadObject<LayoutResult>(j, at, [](Reader& in, LayoutResult& l) {
    in.Read("gpu", l.gpu)
        .Read("request", l.request)
        .Read("ok", l.ok)
        .Read("error", l.error)
        .Read("time_us", l.time_us);
  });
}

json HeartbeatRequest::ToJson() const {
  json j = {{"node", node}, {"replicas", ListToJson(replicas)}, {"layouts", ListToJson(layouts)}};
  if (gpus) j["gpus"] = ListToJson(*gpus);
  return j;
}

namespace {

// Each GPU once, and each of its MIG instances once: every health change of a GPU is an event and
// a node record in the heartbeat's batch, so a body that reported one GPU 30,000 times stalled
// every writer behind one commit for minutes (red team, 2026-12-02).
absl::Status CheckEachDeviceOnce(const std::vector<GpuReport>& gpus) {
  std::map<int, size_t> seen;
  for (size_t i = 0; i < gpus.size(); ++i) {
    auto [at, fresh] = seen.emplace(gpus[i].index, i);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat("gpus[", i, "].index: GPU ", gpus[i].index,
                                                     " is reported already in gpus[", at->second,
                                                     "]; a heartbeat reports each GPU once"));
    }
    std::map<int, size_t> starts;
    const std::vector<MigInstanceReport>& mig = gpus[i].mig_instances;
    for (size_t m = 0; m < mig.size(); ++m) {
      auto [first, new_start] = starts.emplace(mig[m].instance.start, m);
      if (!new_start) {
        return absl::InvalidArgumentError(absl::StrCat(
            "gpus[", i, "].mig_instances[", m, "].start: the instance at ", mig[m].instance.start,
            " is reported already in mig_instances[", first->second, "]"));
      }
    }
  }
  return absl::OkStatus();
}

// Each replica once: a replica reported twice made the answer carry its stop order twice
// (red team, 2026-12-02).
absl::Status CheckEachReplicaOnce(const std::vector<ReplicaReport>& replicas) {
  std::map<std::pair<int64_t, int>, size_t> seen;
  for (size_t i = 0; i < replicas.size(); ++i) {
    auto [at, fresh] = seen.emplace(std::make_pair(replicas[i].job, replicas[i].replica), i);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicas[", i, "]: replica ", replicas[i].replica, " of job ",
                       replicas[i].job, " is reported already in replicas[", at->second,
                       "]; a heartbeat reports each replica once"));
    }
  }
  return absl::OkStatus();
}

// The free text of a heartbeat is stored in node and replica records and in events: each field
// is at most kMaxReasonBytes (a 3 MB health_reason was stored and logged whole; red team,
// 2026-12-02).
absl::Status CheckTextBounds(const HeartbeatRequest& h) {
  std::vector<std::pair<std::string, const std::string*>> fields = {{"node", &h.node}};
  for (size_t i = 0; i < h.replicas.size(); ++i) {
    fields.emplace_back(ItemPath("replicas", i) + ".enforcement", &h.replicas[i].enforcement);
    fields.emplace_back(ItemPath("replicas", i) + ".log_disk", &h.replicas[i].log_disk);
  }
  for (size_t i = 0; h.gpus && i < h.gpus->size(); ++i) {
    const GpuReport& g = (*h.gpus)[i];
    const std::string at = ItemPath("gpus", i);
    fields.emplace_back(at + ".health_reason", &g.health_reason);
    for (size_t m = 0; m < g.mig_instances.size(); ++m) {
      const std::string mig = ItemPath(at + ".mig_instances", m);
      fields.emplace_back(mig + ".uuid", &g.mig_instances[m].instance.uuid);
      fields.emplace_back(mig + ".profile", &g.mig_instances[m].instance.profile);
      fields.emplace_back(mig + ".health_reason", &g.mig_instances[m].health_reason);
    }
  }
  for (size_t i = 0; i < h.layouts.size(); ++i) {
    fields.emplace_back(ItemPath("layouts", i) + ".request", &h.layouts[i].request);
    fields.emplace_back(ItemPath("layouts", i) + ".error", &h.layouts[i].error);
  }
  for (const auto& [path, value] : fields) {
    if (value->size() > kMaxReasonBytes) {
      return Bad(path, absl::StrCat("is ", value->size(), " bytes; at most ", kMaxReasonBytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HeartbeatRequest> HeartbeatRequest::FromJson(const json& j) {
  absl::StatusOr<HeartbeatRequest> request =
      ReadObject<HeartbeatRequest>(j, "", [](Reader& in, HeartbeatRequest& h) {
        in.Read("node", h.node)
            .List("replicas", h.replicas, ReplicaReport::FromJson)
            .List("gpus", h.gpus, GpuReport::FromJson)
            .List("layouts", h.layouts, LayoutResult::FromJson);
      });
  if (!request.ok()) return request;
  if (request->gpus) {
    if (absl::Status s = CheckEachDeviceOnce(*request->gpus); !s.ok()) return s;
  }
  if (absl::Status s = CheckEachReplicaOnce(request->replicas); !s.ok()) return s;
  if (absl::Status s = CheckTextBounds(*request); !s.ok()) return s;
  // Without its node a heartbeat was answered 403 (no node is this agent's): a malformed body is
  // a 400 that names the field (red team, 2026-12-02).
  if (request->node.empty()) return Bad("node", "missing: a heartbeat names its node");
  return request;
}

bool HeartbeatRequest::ReportsAnEnd() const {
  for (const ReplicaReport& r : replicas) {
    if (r.state == ReplicaState::kExited) return true;
  }
  return false;
}

std::vector<DiscoveredMigInstance> HeartbeatRequest::InstancesOn(int gpu) const {
  std::vector<DiscoveredMigInstance> out;
  if (!gpus) return out;
  for (const GpuReport& g : *gpus) {
    if (g.index != gpu) continue;
    out.clear();  // the last report of the GPU counts
    for (const MigInstanceReport& m : g.mig_instances) out.push_back(m.instance);
  }
  return out;
}

json AgentAssignment::ToJson() const {
  json grant_list = json::array();
  for (const GrantRecord& g : grants) grant_list.push_back(GrantToJson(g));
  json j = {{"job", job},
            {"replica", replica},
            {"name", name},
            {"kind", kind},
            {"command", command},
            {"env", env},
            {"workdir", workdir},
            {"mode", std::string(ToString(mode))},
            {"isolation", isolation},
            {"cpu_milli", cpu_milli},
            {"memory_mib", memory_mib},
            {"max_runtime_us", max_runtime_us},
            {"tenant", tenant},
            {"project", project},
            {"checkpoint_root", checkpoint_root},
            {"attempt", attempt},
            {"grants", grant_list}};
  if (uid) j["uid"] = *uid;
  if (gid) j["gid"] = *gid;
  if (cpu_request_milli > 0) j["cpu_request_milli"] = cpu_request_milli;
  return j;
}

absl::StatusOr<AgentAssignment> AgentAssignment::FromJson(const json& j, const std::string& at) {
  return ReadObject<AgentAssignment>(j, at, [](Reader& in, AgentAssignment& a) {
    std::optional<DeliveryMode> mode;
    auto parse_mode = [](absl::string_view name) -> std::optional<DeliveryMode> {
      absl::StatusOr<DeliveryMode> m = ParseDeliveryMode(name);
      return m.ok() ? std::optional<DeliveryMode>(*m) : std::nullopt;
    };
    in.Read("job", a.job)
        .Read("replica", a.replica)
        .Read("name", a.name)
        .Read("kind", a.kind)
        .Read("command", a.command)
        .Read("env", a.env)
        .Read("workdir", a.workdir)
        .Named("mode", mode, parse_mode, "mode")
        .Read("isolation", a.isolation)
        .Read("cpu_milli", a.cpu_milli)
        .Read("memory_mib", a.memory_mib)
        .Read("cpu_request_milli", a.cpu_request_milli)
        .Read("max_runtime_us", a.max_runtime_us)
        .Read("tenant", a.tenant)
        .Read("project", a.project)
        .Read("checkpoint_root", a.checkpoint_root)
        .Read("attempt", a.attempt)
        .List("grants", a.grants, GrantAt)
        .Read("uid", a.uid)
        .Read("gid", a.gid);
    if (mode) a.mode = *mode;
  });
}

json StopOrder::ToJson() const {
  json j = {{"job", job}, {"replica", replica}};
  if (grace_ms) j["grace_ms"] = *grace_ms;
  return j;
}

absl::StatusOr<StopOrder> StopOrder::FromJson(const json& j, const std::string& at) {
  return ReadObject<StopOrder>(j, at, [](Reader& in, StopOrder& s) {
    in.Read("job", s.job).Read("replica", s.replica).Read("grace_ms", s.grace_ms);
  });
}

json LayoutOrder::ToJson() const {
  return {{"gpu", gpu}, {"layout", layout}, {"request", request}};
}

absl::StatusOr<LayoutOrder> LayoutOrder::FromJson(const json& j, const std::string& at) {
  return ReadObject<LayoutOrder>(j, at, [](Reader& in, LayoutOrder& l) {
    in.Read("gpu", l.gpu).Read("layout", l.layout).Read("request", l.request);
  });
}

json HeartbeatAnswer::ToJson() const {
  return {{"assignments", ListToJson(assignments)},
          {"stop", ListToJson(stop)},
          {"layouts", ListToJson(layouts)}};
}

absl::StatusOr<HeartbeatAnswer> HeartbeatAnswer::FromJson(const json& j) {
  return ReadObject<HeartbeatAnswer>(j, "", [](Reader& in, HeartbeatAnswer& a) {
    in.List("assignments", a.assignments, AgentAssignment::FromJson)
        .List("stop", a.stop, StopOrder::FromJson)
        .List("layouts", a.layouts, LayoutOrder::FromJson);
  });
}

}  // namespace carve
