// Configuration objects: tenants, projects, queues and node device modes (`carve apply`).
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/control_plane.h"
#include "runtime/queue_config.h"
#include "runtime/scheduling_grants.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Invalid(size_t doc, const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("document ", doc, ": ", field, ": ", why));
}

absl::Status CheckFields(size_t doc, const json& j, const std::set<std::string>& known) {
  for (const auto& [k, v] : j.items()) {
    if (!known.count(k)) {
      std::vector<std::string> names(known.begin(), known.end());
      return Invalid(doc, k, absl::StrCat("unknown field; known: ", absl::StrJoin(names, ", ")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ControlPlane::ObjectExists(const std::string& kind, const std::string& name) const {
  return name == "default" || objects_.count({kind, name}) > 0;
}

absl::StatusOr<json> ControlPlane::Apply(const json& docs, const Principal& who) {
  if (absl::Status s = Authorize(who, Verb::kConfigure); !s.ok()) return s;
  if (!docs.is_array() || docs.empty()) {
    return absl::InvalidArgumentError("expected a non-empty list of documents");
  }
  static const std::regex kName("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
  std::unique_lock<std::mutex> lock(mu_);
  // Validate everything first: a bad document changes nothing.
  std::set<std::pair<std::string, std::string>> declared;
  // Documents may name what is applied alongside, in any order.
  std::set<std::pair<std::string, std::string>> alongside;
  for (const json& d : docs) {
    if (d.is_object() && d.value("kind", json()).is_string() && d.value("name", json()).is_string())
      alongside.insert({d["kind"].get<std::string>(), d["name"].get<std::string>()});
  }
  // Tenants and priority classes a grant may name: applied, built in, or declared alongside.
  auto exists = [&](const std::string& kind, const std::string& name) {
    if (alongside.count({kind, name})) return true;
    if (kind != "priority-class") return ObjectExists(kind, name);
    for (const PriorityClass& c : PriorityClasses(objects_)) {
      if (c.name == name) return true;
    }
    return false;
  };
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    if (!d.is_object()) return Invalid(i, "document", "must be a map");
    // Types first (fuzz/api_fuzz.cc found a kind that was a map throwing out of here).
    for (const char* key : {"kind", "name", "tenant", "description"}) {
      if (d.contains(key) && !d[key].is_string()) return Invalid(i, key, "must be a string");
    }
    if (d.contains("gpus")) {
      const json& gpus = d["gpus"];
      bool ok = gpus.is_array();
      for (size_t k = 0; ok && k < gpus.size(); ++k) {
        const json& g = gpus[k];
        ok = g.is_object() && g.value("index", json(0)).is_number_integer() &&
             g.value("mode", json("")).is_string();
      }
      if (!ok) return Invalid(i, "gpus", "must be a list of {index: N, mode: M, state: S}");
    }
    std::string kind = d.value("kind", "");
    std::string name = d.value("name", "");
    if (kind == "node") {
      if (absl::Status s = CheckFields(i, d, {"kind", "name", "gpus"}); !s.ok()) return s;
      auto node = nodes_.find(name);
      if (node == nodes_.end()) return Invalid(i, "name", "no registered node \"" + name + "\"");
      for (const json& g : d.value("gpus", json::array())) {
        int index = g.value("index", -1);
        if (index < 0 || index >= static_cast<int>(node->second.gpus.size())) {
          return Invalid(i, "gpus.index", absl::StrCat(index, " is not a GPU of ", name));
        }
        if (g.contains("state") && g["state"] != "available") {
          return Invalid(i, "gpus.state", "only \"available\" (clears a quarantine) can be set");
        }
        if (g.contains("state")) {
          if (absl::Status s = CheckNoResidue(i, node->second, index); !s.ok()) return s;
        }
        if (!g.contains("mode")) continue;
        std::string mode = g.value("mode", "");
        auto m = ParseDeliveryMode(mode);
        if (!m.ok()) return Invalid(i, "gpus.mode", m.status().message());
        const DiscoveredGpu& gpu = node->second.gpus[index];
        if (*m == DeliveryMode::kPartition &&
            !catalog_->model(*catalog_->Find(gpu.model)).mig_capable()) {
          return Invalid(i, "gpus.mode", gpu.model + " does not support MIG");
        }
        for (const JobRecord* job : jobs_.PlacedOn(name)) {
          if (job->Uses(name, index)) {
            return absl::FailedPreconditionError(
                absl::StrCat("document ", i, ": GPU ", index, " of ", name, " runs job ", job->id,
                             "; change its mode once the job has ended"));
          }
        }
      }
      continue;
    }
    if (kind != "tenant" && kind != "project" && kind != "queue" && kind != "priority-class") {
      return Invalid(i, "kind",
                     "\"" + kind + "\" is not tenant, project, queue, priority-class or node");
    }
    if (!std::regex_match(name, kName)) {
      return Invalid(i, "name", "\"" + name + "\" must be lowercase letters, digits and dashes");
    }
    std::set<std::string> fields = {"kind", "name", "description"};
    if (kind == "project") {
      fields.insert(
          {"tenant", "queues", "priority_classes", "max_priority", "allow_non_preemptible"});
    }
    if (kind == "queue") {
      fields.insert({"pool", "quota", "weight", "cohort", "borrowing_limit", "lending_limit",
                     "idle_after", "idle_action", "tenants"});
    }
    if (kind == "priority-class") fields.insert({"priority", "preemptible", "tenants"});
    if (kind == "tenant") fields.insert({"uid", "gid"});
    if (absl::Status s = CheckFields(i, d, fields); !s.ok()) return s;
    // The Unix user and group the tenant's jobs run as on every node; never root.
    for (const char* key : {"uid", "gid"}) {
      if (kind != "tenant" || !d.contains(key)) continue;
      const json& v = d[key];
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 4294967294) {
        return Invalid(i, key, "must be an integer from 1 to 4294967294 (jobs never run as root)");
      }
    }
    if (kind == "project") {
      std::string tenant = d.value("tenant", "");
      if (!ObjectExists("tenant", tenant) && !declared.count({"tenant", tenant})) {
        return Invalid(i, "tenant", "no tenant \"" + tenant + "\" (apply it first or alongside)");
      }
    }
    absl::Status sched = kind == "queue"            ? CheckQueueDoc(d, *catalog_)
                         : kind == "priority-class" ? CheckPriorityClassDoc(d)
                         : kind == "project"        ? CheckProjectQueues(d, declared)
                                                    : absl::OkStatus();
    if (sched.ok()) sched = CheckGrantFields(d, kind, exists);
    if (!sched.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("document ", i, ": ", sched.message()));
    }
    if (kind == "queue" && d.contains("idle_after")) {
      auto after = d["idle_after"].is_string() ? ParseDurationUs(d["idle_after"])
                                               : absl::InvalidArgumentError("must be a duration");
      if (!after.ok()) return Invalid(i, "idle_after", after.status().message());
    }
    if (kind == "queue" && d.contains("idle_action") && d["idle_action"] != "flag" &&
        d["idle_action"] != "stop") {
      return Invalid(i, "idle_action", "must be flag or stop");
    }
    declared.insert({kind, name});
  }
  StoreBatch batch;
  json applied = json::array();
  for (const json& d : docs) {
    std::string kind = d["kind"], name = d["name"];
    if (kind == "node") {
      NodeRecord& node = nodes_[name];
      for (const json& g : d.value("gpus", json::array())) {
        DiscoveredGpu& gpu = node.gpus[g["index"].get<int>()];
        if (g.contains("state") && node.quarantined.erase(gpu.index) > 0) {
          Event(batch, "user:" + who.name, "device.cleared",
                absl::StrCat("node/", name, "/gpu/", gpu.index), "quarantine cleared by an admin");
        }
        if (g.contains("state") && node.layout_mismatch.count(gpu.index)) {
          // Clearing a layout mismatch adopts what the agent discovered.
          gpu.mig_instances = std::move(node.layout_mismatch[gpu.index]);
          node.layout_mismatch.erase(gpu.index);
          Event(batch, "user:" + who.name, "device.layout-adopted",
                absl::StrCat("node/", name, "/gpu/", gpu.index),
                "the discovered MIG layout was adopted by an admin",
                {{"instances", MigInstancesToJson(gpu.mig_instances)}});
        }
        if (!g.contains("mode")) continue;
        gpu.mode = g["mode"];
        gpu.dynamic_layout = gpu.mode == "partition" && gpu.mig_instances.empty();
        mode_overrides_[name][gpu.index] = gpu.mode;
      }
      batch.puts.push_back({"node", name, node.ToJson().dump()});
      batch.puts.push_back({"node-modes", name, ModesToJson(mode_overrides_[name]).dump()});
    } else {
      objects_[{kind, name}] = d;
      ++config_revision_;
      batch.puts.push_back({kind, name, d.dump()});
    }
    Event(batch, "user:" + who.name, kind + ".applied", kind + "/" + name, "applied", d);
    applied.push_back(kind + "/" + name);
  }
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return json{{"applied", applied}};
}

json ControlPlane::ListObjects(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  json out = json::array();
  out.push_back({{"kind", kind}, {"name", "default"}});
  for (const auto& [key, doc] : objects_) {
    if (key.first == kind) out.push_back(doc);
  }
  return out;
}

}  // namespace carve
