#include "runtime/records.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

namespace {

// Why a stored record is refused: a state name this server does not know (never read as another,
// nor as a default).
std::string UnknownState(absl::string_view field, absl::string_view name) {
  return absl::StrCat(field, ": unknown state \"", absl::CEscape(name), "\"");
}

// Reads each entry of the object j[field] (keyed by `Key`, parsed by `parse_key`) with `read`
// into `out`; an absent field leaves `out` empty.
template <typename Key, typename Value, typename ParseKey, typename Read>
absl::Status ReadKeyed(const json& j, const char* field, ParseKey parse_key, Read read,
                       std::map<Key, Value>& out) {
  if (!j.contains(field)) return absl::OkStatus();
  const json& entries = j[field];
  if (!entries.is_object())
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be an object"));
  for (const auto& [key, value] : entries.items()) {
    std::optional<Key> parsed = parse_key(key);
    if (!parsed) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": \"", absl::CEscape(key), "\" is not a key it takes"));
    }
    absl::StatusOr<Value> read_value = read(value);
    if (!read_value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".", key, ": ", read_value.status().message()));
    }
    out[*parsed] = *std::move(read_value);
  }
  return absl::OkStatus();
}

std::optional<int> GpuIndex(const std::string& key) {
  int index = 0;
  if (!absl::SimpleAtoi(key, &index) || index < 0 || std::to_string(index) != key) {
    return std::nullopt;
  }
  return index;
}

// The parts of a node record the control plane keeps about its GPUs and software.
absl::Status ReadGpuParts(const json& j, NodeRecord& n) {
  absl::Status s = ReadKeyed(j, "relayouts", GpuIndex, RelayoutRecord::FromJson, n.relayouts);
  if (s.ok()) {
    s = ReadKeyed(j, "layout_mismatch", GpuIndex, MigInstancesFromJson, n.layout_mismatch);
  }
  if (s.ok()) {
    s = ReadKeyed(j, "instance_faults", ParseSlotKey, InstanceFault::FromJson, n.instance_faults);
  }
  if (s.ok()) s = ReadKeyed(j, "residue", GpuIndex, GpuResidue::FromJson, n.residue);
  if (s.ok() && j.contains("versions") && !j["versions"].is_null()) {
    absl::StatusOr<NodeVersionSet> versions = NodeVersionSet::FromJson(j["versions"]);
    if (!versions.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("versions: ", versions.status().message()));
    }
    n.versions = *std::move(versions);
  }
  return s;
}

json AttemptsToJson(const std::vector<AttemptRecord>& attempts) {
  json out = json::array();
  for (const AttemptRecord& a : attempts) out.push_back(a.ToJson());
  return out;
}

}  // namespace

json GrantToJson(const GrantRecord& g) {
  json j = {{"device", g.device}, {"compute_milli", g.compute_milli}, {"memory_mib", g.memory_mib}};
  if (!g.profile.empty()) {
    j["profile"] = g.profile;
    j["start"] = g.start;
    j["created"] = g.created;
  }
  return j;
}

GrantRecord GrantFromJson(const json& j) {
  GrantRecord g;
  g.device = j.value("device", 0);
  g.compute_milli = j.value("compute_milli", int64_t{0});
  g.memory_mib = j.value("memory_mib", int64_t{0});
  g.profile = j.value("profile", "");
  g.start = j.value("start", -1);
  g.created = j.value("created", false);
  return g;
}

json AttemptRecord::ToJson() const {
  json held = json::array();
  for (const AttemptReplica& r : replicas) {
    json grants = json::array();
    for (const GrantRecord& g : r.grants) grants.push_back(GrantToJson(g));
    held.push_back({{"node", r.node}, {"grants", grants}, {"versions", r.versions}});
  }
  return {
      {"attempt", attempt},   {"cause", cause},   {"node", node},   {"scheduled_us", scheduled_us},
      {"ended_us", ended_us}, {"replicas", held}, {"fault", fault}, {"reclaim", reclaim}};
}

absl::StatusOr<AttemptRecord> AttemptRecord::FromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("an attempt must be an object");
  try {
    AttemptRecord a;
    a.attempt = j.value("attempt", 0);
    a.cause = j.value("cause", "");
    a.node = j.value("node", "");
    a.scheduled_us = j.value("scheduled_us", int64_t{0});
    a.ended_us = j.value("ended_us", int64_t{0});
    a.fault = j.value("fault", "");
    a.reclaim = j.value("reclaim", json::array());
    for (const json& r : j.value("replicas", json::array())) {
      AttemptReplica held;
      held.node = r.value("node", "");
      for (const json& g : r.value("grants", json::array()))
        held.grants.push_back(GrantFromJson(g));
      held.versions = r.value("versions", json());
      a.replicas.push_back(std::move(held));
    }
    return a;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("attempt: ", e.what()));
  }
}

bool JobRecord::Uses(const std::string& node, int gpu) const {
  for (const ReplicaRecord& r : replicas) {
    if (r.node != node || r.state == ReplicaState::kRetired) continue;
    if (gpu < 0) return true;
    for (const GrantRecord& g : r.grants) {
      if (g.device == gpu) return true;
    }
  }
  return false;
}

json JobRecord::ToJson() const {
  json reps = json::array();
  for (const ReplicaRecord& r : replicas) {
    json g = json::array();
    for (const GrantRecord& gr : r.grants) {
      g.push_back(GrantToJson(gr));
      if (!gr.profile.empty())
        g.back()["partition"] = PartitionId(r.node, gr.device, gr.profile, gr.start);
    }
    json rj = {{"node", r.node},
               {"grants", g},
               {"state", Name(r.state)},
               {"pid", r.pid},
               {"started_us", r.started_us},
               {"ended_us", r.ended_us},
               {"enforcement", r.enforcement},
               {"timed_out", r.timed_out},
               {"slot", r.slot},
               {"idle_since_us", r.idle_since_us},
               {"reclaim", r.reclaim},
               {"versions", r.versions}};
    if (!r.gpu_isolation.is_null()) rj["gpu_isolation"] = r.gpu_isolation;
    if (r.assigned_us > 0) rj["assigned_us"] = r.assigned_us;
    if (r.log_truncated_at > 0) {
      rj["log_truncated_at"] = r.log_truncated_at;
      rj["log_truncated_by"] = r.log_truncated_by;
    }
    if (!r.log_disk.empty()) rj["log_disk"] = r.log_disk;
    if (r.log_base > 0) rj["log_base"] = r.log_base;
    if (r.replacement) rj["replacement"] = true;
    if (!r.retire.empty()) {
      rj["retire"] = r.retire;
      rj["planned"] = r.planned;
    }
    rj["exit_code"] = r.exit_code ? json(*r.exit_code) : json(nullptr);
    rj["signal"] = r.signal ? json(*r.signal) : json(nullptr);
    reps.push_back(rj);
  }
  json j = {{"id", id},
            {"state", Name(state)},
            {"reason", reason},
            {"name", spec.name},
            {"spec", spec.ToJson()},
            {"submitted_by", submitted_by},
            {"created_us", created_us},
            {"scheduled_us", scheduled_us},
            {"started_us", started_us},
            {"ended_us", ended_us},
            {"cancel_requested", cancel_requested},
            {"cancelled_by", cancelled_by},
            {"displaced", displaced},
            {"outcome", outcome ? Name(*outcome) : ""},
            {"attempt", attempt},
            {"lease_expires_us", lease_expires_us},
            {"idle_flagged_us", idle_flagged_us},
            {"not_before_us", not_before_us},
            {"attempts", AttemptsToJson(attempts)},
            {"replicas", reps},
            {"explanation", explanation},
            {"explanation_reasons", explanation_reasons},
            {"preempted_by", preempted_by},
            {"preemption", preemption},
            {"victims", victims}};
  if (preempted_by_other_tenant) j["preempted_by_other_tenant"] = true;
  if (!waited_for.empty()) j["waited_for"] = waited_for;
  if (wait_alert_us > 0) j["wait_alert"] = {{"us", wait_alert_us}, {"attempt", wait_alert_attempt}};
  if (!idempotency_key.empty()) j["idempotency_key"] = idempotency_key;
  if (!idempotency_scope.empty()) j["idempotency_scope"] = idempotency_scope;
  return j;
}

absl::StatusOr<JobRecord> JobRecord::FromJson(const json& j) {
  try {
    JobRecord r;
    r.id = j.at("id").get<int64_t>();
    auto spec = JobSpecFromJson(j.at("spec"));
    if (!spec.ok()) return spec.status();
    r.spec = *spec;
    const std::string state = j.at("state").get<std::string>();
    if (std::optional<JobState> parsed = ParseJobState(state)) {
      r.state = *parsed;
    } else {
      return absl::DataLossError(
          absl::StrCat("stored job ", r.id, " is unreadable: ", UnknownState("state", state)));
    }
    r.reason = j.value("reason", "");
    r.submitted_by = j.value("submitted_by", "");
    r.idempotency_key = j.value("idempotency_key", "");
    r.idempotency_scope = j.value("idempotency_scope", "");
    r.created_us = j.value("created_us", int64_t{0});
    r.scheduled_us = j.value("scheduled_us", int64_t{0});
    r.started_us = j.value("started_us", int64_t{0});
    r.ended_us = j.value("ended_us", int64_t{0});
    r.cancel_requested = j.value("cancel_requested", false);
    r.cancelled_by = j.value("cancelled_by", "");
    r.displaced = j.value("displaced", "");
    if (const std::string outcome = j.value("outcome", ""); !outcome.empty()) {
      r.outcome = ParseJobState(outcome);
      if (!r.outcome) {
        return absl::DataLossError(absl::StrCat(
            "stored job ", r.id, " is unreadable: ", UnknownState("outcome", outcome)));
      }
    }
    r.attempt = j.value("attempt", 0);
    r.lease_expires_us = j.value("lease_expires_us", int64_t{0});
    r.idle_flagged_us = j.value("idle_flagged_us", int64_t{0});
    r.not_before_us = j.value("not_before_us", int64_t{0});
    for (const json& aj : j.value("attempts", json::array())) {
      auto attempt = AttemptRecord::FromJson(aj);
      if (!attempt.ok()) {
        return absl::DataLossError(absl::StrCat("stored job ", r.id, " is unreadable: attempts[",
                                                r.attempts.size(),
                                                "]: ", attempt.status().message()));
      }
      r.attempts.push_back(*std::move(attempt));
    }
    r.explanation = j.value("explanation", "");
    r.explanation_reasons = j.value("explanation_reasons", std::map<std::string, int>{});
    r.waited_for = j.value("waited_for", "");
    if (const json alert = j.value("wait_alert", json::object()); alert.is_object()) {
      r.wait_alert_us = alert.value("us", int64_t{0});
      r.wait_alert_attempt = alert.value("attempt", -1);
    }
    r.preempted_by = j.value("preempted_by", int64_t{0});
    r.preempted_by_other_tenant = j.value("preempted_by_other_tenant", false);
    r.preemption = j.value("preemption", "");
    r.victims = j.value("victims", json::array());
    for (const json& rj : j.value("replicas", json::array())) {
      ReplicaRecord rep;
      rep.node = rj.value("node", "");
      for (const json& g : rj.value("grants", json::array()))
        rep.grants.push_back(GrantFromJson(g));
      const std::string state = rj.value("state", "pending");
      if (std::optional<ReplicaState> parsed = ParseReplicaState(state)) {
        rep.state = *parsed;
      } else {
        return absl::DataLossError(absl::StrCat(
            "stored job ", r.id, " is unreadable: ",
            UnknownState(absl::StrCat("replicas[", r.replicas.size(), "].state"), state)));
      }
      rep.pid = rj.value("pid", int64_t{0});
      if (rj.contains("exit_code") && !rj["exit_code"].is_null()) rep.exit_code = rj["exit_code"];
      if (rj.contains("signal") && !rj["signal"].is_null()) rep.signal = rj["signal"];
      rep.started_us = rj.value("started_us", int64_t{0});
      rep.ended_us = rj.value("ended_us", int64_t{0});
      rep.assigned_us = rj.value("assigned_us", int64_t{0});
      rep.enforcement = rj.value("enforcement", "");
      rep.timed_out = rj.value("timed_out", false);
      rep.slot = rj.value("slot", static_cast<int>(r.replicas.size()));
      rep.idle_since_us = rj.value("idle_since_us", int64_t{0});
      rep.retire = rj.value("retire", "");
      rep.planned = rj.value("planned", false);
      rep.replacement = rj.value("replacement", false);
      rep.oom_killed = rj.value("oom_killed", false);
      if (rj.contains("reclaim")) rep.reclaim = rj["reclaim"];
      if (rj.contains("versions")) rep.versions = rj["versions"];
      if (rj.contains("gpu_isolation")) rep.gpu_isolation = rj["gpu_isolation"];
      rep.log_truncated_at = rj.value("log_truncated_at", int64_t{0});
      rep.log_truncated_by = rj.value("log_truncated_by", "");
      rep.log_disk = rj.value("log_disk", "");
      rep.log_base = rj.value("log_base", int64_t{0});
      r.replicas.push_back(rep);
    }
    return r;
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat("stored job is unreadable: ", e.what()));
  }
}

json GpuToJson(const DiscoveredGpu& g) {
  json mig = json::array();
  for (const DiscoveredMigInstance& m : g.mig_instances) {
    mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start}});
  }
  json out = {{"index", g.index},
              {"uuid", g.uuid},
              {"model", g.model},
              {"memory_mib", g.memory_mib},
              {"mode", g.mode},
              {"mig_enabled", g.mig_enabled},
              {"dynamic_layout", g.dynamic_layout},
              {"mig_instances", mig},
              {"health", g.health},
              {"health_reason", g.health_reason},
              {"utilization_pct", g.utilization_pct},
              {"vbios", g.vbios}};
  if (!g.share_enforcement.empty()) out["share_enforcement"] = g.share_enforcement;
  return out;
}

absl::StatusOr<DiscoveredGpu> GpuFromJson(const json& j) {
  try {
    DiscoveredGpu g;
    g.index = j.at("index").get<int>();
    g.uuid = j.at("uuid").get<std::string>();
    g.model = j.at("model").get<std::string>();
    g.memory_mib = j.value("memory_mib", int64_t{0});
    g.mode = j.value("mode", "exclusive");
    g.mig_enabled = j.value("mig_enabled", false);
    g.dynamic_layout = j.value("dynamic_layout", false);
    for (const json& m : j.value("mig_instances", json::array())) {
      g.mig_instances.push_back({m.at("uuid").get<std::string>(),
                                 m.at("profile").get<std::string>(), m.at("start").get<int>()});
    }
    g.health = j.value("health", "healthy");
    g.health_reason = j.value("health_reason", "");
    g.utilization_pct = j.value("utilization_pct", -1);
    g.vbios = j.value("vbios", "");
    g.share_enforcement = j.value("share_enforcement", "");
    return g;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("gpus: ", e.what()));
  }
}

std::string PartitionId(const std::string& node, int gpu, const std::string& profile, int start) {
  return absl::StrCat(node, "/gpu", gpu, "/", profile, "@", start);
}

std::string NodeRecord::GpuState(int index) const {
  if (quarantined.count(index)) return "quarantined";
  if (auto r = relayouts.find(index); r != relayouts.end()) {
    return r->second.phase == RelayoutPhase::kReconfiguring ? "reconfiguring" : "draining";
  }
  if (fenced.count(index)) return "fenced";
  if (cordoned_gpus.count(index)) {
    return absl::StrContains(cordoned_gpus.at(index), "(drain)") ? "draining" : "cordoned";
  }
  return "available";
}

bool NodeRecord::Online() const { return state == NodeRecordState::kReady; }

bool NodeRecord::Schedulable(const DiscoveredGpu& gpu) const {
  const bool window = maintenance && maintenance->phase == WindowPhase::kActive;
  return Online() && cordoned_by.empty() && !window && GpuState(gpu.index) == "available" &&
         gpu.health == "healthy";
}

json NodeRecord::ToJson() const {
  json quarantine = json::object();
  for (const auto& [index, why] : quarantined) quarantine[std::to_string(index)] = why;
  json cordoned = json::object();
  for (const auto& [index, who] : cordoned_gpus) cordoned[std::to_string(index)] = who;
  json fence = json::object();
  for (const auto& [index, job] : fenced) fence[std::to_string(index)] = job;
  json gpu_list = json::array();
  for (const DiscoveredGpu& g : gpus) {
    json gj = GpuToJson(g);
    for (json& m : gj["mig_instances"]) {
      m["id"] = PartitionId(name, g.index, m["profile"], m["start"]);
    }
    gj["state"] = GpuState(g.index);
    gpu_list.push_back(std::move(gj));
  }
  json relayout = json::object();
  for (const auto& [index, r] : relayouts) relayout[std::to_string(index)] = r.ToJson();
  json mismatch = json::object();
  for (const auto& [index, m] : layout_mismatch) {
    mismatch[std::to_string(index)] = MigInstancesToJson(m);
  }
  json faults = json::object();
  for (const auto& [slot, fault] : instance_faults) faults[SlotKey(slot)] = fault.ToJson();
  json residue_json = json::object();
  for (const auto& [index, r] : residue) residue_json[std::to_string(index)] = r.ToJson();
  json admin = json::object();
  for (const auto& [key, value] : admin_labels) admin[key] = value ? json(*value) : json();
  json out = {{"name", name},
              {"instance_faults", faults},
              {"maintenance", maintenance ? maintenance->ToJson() : json()},
              {"relayouts", relayout},
              {"layout_mismatch", mismatch},
              {"cpu_milli", cpu_milli},
              {"memory_mib", memory_mib},
              {"labels", labels},
              {"agent_labels", agent_labels},
              {"admin_labels", admin},
              {"backend", backend},
              {"gpus", gpu_list},
              {"state", Name(state)},
              {"lost_us", lost_us},
              {"registered_us", registered_us},
              {"last_heartbeat_us", last_heartbeat_us},
              {"quarantined", quarantine},
              {"fenced", fence},
              {"cordoned_by", cordoned_by},
              {"cordoned_gpus", cordoned},
              {"versions", versions ? versions->ToJson() : json()},
              {"residue", residue_json}};
  if (!extra.empty()) out["extra"] = extra;
  // Written only when the agent promised it: records from before keep their bytes.
  if (fence_after_ms > 0) {
    out["self_fence"] = {{"after_ms", fence_after_ms}, {"grace_ms", fence_grace_ms}};
  }
  return out;
}

json MaintenanceWindow::ToJson() const {
  return {{"start_us", start_us},
          {"end_us", end_us},
          {"by", by},
          {"reason", reason},
          {"phase", phase == WindowPhase::kActive ? "active" : "scheduled"}};
}

absl::StatusOr<MaintenanceWindow> MaintenanceWindow::FromJson(const json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("a window must be an object");
  try {
    MaintenanceWindow w;
    w.start_us = j.at("start_us").get<int64_t>();
    w.end_us = j.at("end_us").get<int64_t>();
    w.by = j.value("by", "");
    w.reason = j.value("reason", "");
    const std::string phase = j.value("phase", "");
    if (phase == "active") {
      w.phase = WindowPhase::kActive;
    } else if (phase != "scheduled") {
      return absl::InvalidArgumentError(UnknownState("phase", phase));
    }
    return w;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

absl::StatusOr<NodeRecord> NodeRecord::FromJson(const json& j) {
  try {
    NodeRecord n;
    n.name = j.at("name").get<std::string>();
    n.cpu_milli = j.at("cpu_milli").get<int64_t>();
    n.memory_mib = j.at("memory_mib").get<int64_t>();
    n.labels = j.value("labels", Labels{});
    n.agent_labels = j.value("agent_labels", n.labels);  // a record from before admins' labels
    const json admin = j.value("admin_labels", json::object());
    for (const auto& [key, value] : admin.items()) {
      n.admin_labels[key] =
          value.is_null() ? std::nullopt : std::optional<std::string>(value.get<std::string>());
    }
    n.backend = j.value("backend", "");
    n.extra = j.value("extra", std::map<std::string, int64_t>{});
    for (const json& g : j.value("gpus", json::array())) {
      auto gpu = GpuFromJson(g);
      if (!gpu.ok()) return gpu.status();
      n.gpus.push_back(*gpu);
    }
    const std::string state = j.value("state", "ready");
    if (std::optional<NodeRecordState> parsed = ParseNodeRecordState(state)) {
      n.state = *parsed;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", n.name, ": ", UnknownState("state", state)));
    }
    n.lost_us = j.value("lost_us", int64_t{0});
    n.registered_us = j.value("registered_us", int64_t{0});
    n.last_heartbeat_us = j.value("last_heartbeat_us", int64_t{0});
    if (const json fence = j.value("self_fence", json()); fence.is_object()) {
      n.fence_after_ms = fence.at("after_ms").get<int64_t>();
      n.fence_grace_ms = fence.value("grace_ms", int64_t{0});
    }
    n.cordoned_by = j.value("cordoned_by", "");
    const json cordoned = j.value("cordoned_gpus", json::object());
    for (const auto& [index, who] : cordoned.items()) {
      n.cordoned_gpus[std::stoi(index)] = who.get<std::string>();
    }
    const json quarantined = j.value("quarantined", json::object());
    for (const auto& [index, why] : quarantined.items()) {
      n.quarantined[std::stoi(index)] = why.get<std::string>();
    }
    if (j.contains("maintenance") && !j["maintenance"].is_null()) {
      auto window = MaintenanceWindow::FromJson(j["maintenance"]);
      if (!window.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", n.name, ": maintenance: ", window.status().message()));
      }
      n.maintenance = *std::move(window);
    }
    if (absl::Status s = ReadGpuParts(j, n); !s.ok()) {
      return absl::DataLossError(
          absl::StrCat("stored node ", n.name, " is unreadable: ", s.message()));
    }
    const json fenced = j.value("fenced", json::object());
    for (const auto& [index, job] : fenced.items()) {
      n.fenced[std::stoi(index)] = job.get<int64_t>();
    }
    return n;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("node: ", e.what()));
  }
}

json ModesToJson(const std::map<int, std::string>& modes) {
  json out = json::object();
  for (const auto& [index, mode] : modes) out[std::to_string(index)] = mode;
  return out;
}

std::map<int, std::string> ModesFromJson(const json& j) {
  std::map<int, std::string> out;
  auto add = [&](const json& index, const json& mode) {
    if (index.is_number_integer() && mode.is_string()) out[index.get<int>()] = mode;
  };
  if (j.is_object()) {
    for (const auto& [key, mode] : j.items()) {
      int index = 0;
      if (absl::SimpleAtoi(key, &index)) add(json(index), mode);
    }
  } else if (j.is_array()) {  // written by servers before the fix: [[index, mode], ...]
    for (const json& pair : j) {
      if (pair.is_array() && pair.size() == 2) add(pair[0], pair[1]);
    }
  }
  return out;
}

void HideOtherTenantsJobs(json& job) {
  if (!job.is_object()) return;
  if (job.value("preempted_by_other_tenant", false)) job.erase("preempted_by");
  auto victims = job.find("victims");
  if (victims == job.end() || !victims->is_array()) return;
  for (json& v : *victims) {
    if (v.is_object() && v.value("other_tenant", false)) v.erase("job");
  }
}

}  // namespace carve
