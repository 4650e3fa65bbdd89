// `carve apply`: configuration documents (configuration.h) and node documents (device modes,
// quarantines cleared, layouts adopted).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "runtime/control_plane.h"
#include "runtime/reservations.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Invalid(size_t doc, const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("document ", doc, ": ", field, ": ", why));
}

// `labels: {KEY: VALUE, KEY: null}`: null removes the label.
absl::Status CheckNodeLabels(size_t doc, const json& labels) {
  if (!labels.is_object()) return Invalid(doc, "labels", "must be a map of KEY: VALUE (or null)");
  for (const auto& [key, value] : labels.items()) {
    if (!value.is_string() && !value.is_null()) {
      return Invalid(doc, "labels." + key, "must be a string, or null to remove the label");
    }
    absl::Status s =
        value.is_string() ? CheckLabel(key, value.get<std::string>()) : CheckLabelKey(key);
    if (!s.ok()) return Invalid(doc, "labels", s.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ControlPlane::CheckNodeDoc(size_t i, const json& d) const {
  for (const auto& [k, v] : d.items()) {
    if (k != "kind" && k != "name" && k != "gpus" && k != "labels") {
      return Invalid(i, k, "unknown field; known: gpus, kind, labels, name");
    }
  }
  if (absl::Status s = CheckNodeLabels(i, d.value("labels", json::object())); !s.ok()) return s;
  if (d.contains("labels")) {  // at most kMaxLabels once applied over what the node has
    auto node = nodes_.find(d.value("name", ""));
    if (node != nodes_.end()) {
      LabelEdits edits = node->second.admin_labels;
      for (const auto& [key, value] : d["labels"].items()) {
        edits[key] =
            value.is_string() ? std::optional<std::string>(value.get<std::string>()) : std::nullopt;
      }
      const size_t n = EffectiveLabels(node->second.agent_labels, edits).size();
      if (n > kMaxLabels) {
        return Invalid(i, "labels",
                       absl::StrCat("the node would carry ", n, " labels; at most ", kMaxLabels));
      }
    }
  }
  const json& gpus = d.value("gpus", json::array());
  bool typed = gpus.is_array();
  for (size_t k = 0; typed && k < gpus.size(); ++k) {
    const json& g = gpus[k];
    typed = g.is_object() && g.value("index", json(0)).is_number_integer() &&
            g.value("mode", json("")).is_string();
  }
  if (!typed) return Invalid(i, "gpus", "must be a list of {index: N, mode: M, state: S}");
  std::string name = d.value("name", "");
  auto node = nodes_.find(name);
  if (node == nodes_.end()) return Invalid(i, "name", "no registered node \"" + name + "\"");
  for (const json& g : gpus) {
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
    auto m = ParseDeliveryMode(g.value("mode", ""));
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
  return absl::OkStatus();
}

void ControlPlane::ApplyNodeDoc(const json& d, const Principal& who, StoreBatch& batch) {
  std::string name = d["name"];
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
  const json labels = d.value("labels", json::object());
  for (const auto& [key, value] : labels.items()) {
    if (value.is_string()) {
      node.admin_labels[key] = value.get<std::string>();
    } else if (node.agent_labels.count(key) > 0) {
      node.admin_labels[key] = std::nullopt;  // hides the agent's label
    } else {
      node.admin_labels.erase(key);
    }
  }
  node.labels = EffectiveLabels(node.agent_labels, node.admin_labels);
  batch.puts.push_back({"node", name, node.ToJson().dump()});
  batch.puts.push_back({"node-modes", name, ModesToJson(mode_overrides_[name]).dump()});
}

namespace {

// A tenant-admin applies its own tenant's notifications and nothing else: not another tenant's,
// and not a name another tenant's notification holds (names are the cluster's).
absl::Status TenantAdminMayApply(const json& docs, const Principal& who,
                                 const Configuration& config) {
  std::map<std::string, std::string> owner;  // notification -> tenant
  for (const NotificationConfig& n : config.Notifications()) owner[n.name] = n.tenant;
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    const bool own = d.is_object() && d.value("kind", json()) == "notification" &&
                     d.value("tenant", json()) == who.tenant;
    if (!own) {
      return absl::PermissionDeniedError(absl::StrCat(
          "document ", i, ": a tenant-admin applies only notifications of its own tenant (",
          who.tenant, "); the rest is for admins"));
    }
    const std::string name =
        d.value("name", json()).is_string() ? d["name"].get<std::string>() : "";
    if (auto o = owner.find(name); o != owner.end() && o->second != who.tenant) {
      return absl::PermissionDeniedError(
          absl::StrCat("document ", i, ": notification \"", name, "\" belongs to another tenant"));
    }
  }
  return absl::OkStatus();
}

// Whether a tenant-admin may send deliveries to `host`: not the server's own machine, a
// link-local address (cloud metadata) or a private network's, written as an address or as
// localhost. (A name that resolves to one is not caught here: docs/operations.md.)
bool PublicHost(const std::string& host) {
  if (host == "localhost" || absl::EndsWith(host, ".localhost")) return false;
  std::vector<int> o;
  for (absl::string_view part : absl::StrSplit(host, '.')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 0 || v > 255) return true;  // a name
    o.push_back(v);
  }
  if (o.size() != 4) return true;
  return !(o[0] == 0 || o[0] == 10 || o[0] == 127 || (o[0] == 169 && o[1] == 254) ||
           (o[0] == 172 && o[1] >= 16 && o[1] <= 31) || (o[0] == 192 && o[1] == 168) ||
           (o[0] == 100 && o[1] >= 64 && o[1] <= 127));
}

// A reservation's nodes as they are now: those named, and those its pool holds.
std::set<std::string> HeldNodes(const ReservationConfig& r,
                                const std::map<std::string, NodeRecord>& nodes,
                                const std::vector<PoolSelector>& pools) {
  std::set<std::string> held(r.nodes.begin(), r.nodes.end());
  if (r.pool.empty()) return held;
  for (const auto& [name, rec] : nodes) {
    if (PoolOf(rec.labels, pools) == r.pool) held.insert(name);
  }
  return held;
}

// Checked at apply, never at load: no two reservations hold one node (named, or in a pool as the
// nodes are labelled now) at one moment; a new window, or a moved start, does not begin in the
// past, where nothing was held back and its holder would be charged for time never reserved
// (`carve import`, which brings history, excepted).
// A reservation of gpus names a model (and profile) the catalog knows, and the registered nodes
// have devices for it: what it picks (reservations.h) covers its count, and what every other
// reservation of gpus picks covers no less of its count than before the apply.
absl::Status CheckGpuReservations(const std::vector<std::pair<size_t, std::string>>& fresh,
                                  const std::map<std::string, ReservationConfig>& all,
                                  const std::vector<ReservationConfig>& before,
                                  const std::vector<PoolSelector>& pools,
                                  const std::map<std::string, NodeRecord>& nodes,
                                  const GpuCatalog& catalog, int64_t now, const Principal& who) {
  std::vector<ReservationConfig> list;
  for (const auto& [name, r] : all) list.push_back(r);
  for (const auto& [i, name] : fresh) {
    const ReservationConfig& r = all.at(name);
    if (!r.gpus) continue;
    auto model = catalog.Find(r.gpus->model);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "document ", i, ": gpus.model: no GPU model \"", r.gpus->model, "\" in the catalog"));
    }
    if (!r.gpus->mig.empty() && !catalog.FindProfile(*model, r.gpus->mig).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("document ", i, ": gpus.mig: ", r.gpus->model,
                                                     " has no MIG profile \"", r.gpus->mig, "\""));
    }
  }
  if (who.name == "import") return absl::OkStatus();  // history, onto a server with no nodes yet
  for (const ReservationConfig& r : list) {
    if (!r.gpus || r.end_us <= now) continue;
    const int64_t at = std::max(r.start_us, now);
    const ReservationView::Cover cover =
        ReservationView(list, nodes, pools, at, catalog).CoverOf(r);
    if (cover.covered >= cover.asked) continue;
    // A document applied again unchanged is not this apply's doing (a GitOps re-apply after a
    // node left): like any other, refused only when the apply takes devices from it.
    auto old = std::find_if(before.begin(), before.end(),
                            [&](const ReservationConfig& b) { return b.name == r.name; });
    const bool same = old != before.end() && old->gpus == r.gpus && old->pool == r.pool &&
                      old->start_us == r.start_us && old->end_us == r.end_us;
    const bool mine = !same && std::any_of(fresh.begin(), fresh.end(),
                                           [&](const auto& f) { return f.second == r.name; });
    // Another, already short (a node left), is refused only when this apply takes from it.
    if (!mine &&
        ReservationView(before, nodes, pools, at, catalog).CoverOf(r).covered <= cover.covered) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        mine ? "" : "this would leave ", "reservation ", r.name, " asking for ", r.GpusText(),
        r.pool.empty() ? "" : absl::StrCat(" in pool ", r.pool), ": the registered nodes have ",
        cover.covered, " of them free of other reservations over its window (", cover.devices,
        " device(s))"));
  }
  return absl::OkStatus();
}

absl::Status CheckReservations(const std::vector<std::optional<ConfigObject>>& decoded,
                               const Configuration& config,
                               const std::map<std::string, NodeRecord>& nodes, int64_t now,
                               const Principal& who, const GpuCatalog& catalog) {
  std::map<std::string, ReservationConfig> all;
  for (const ReservationConfig& r : config.Reservations()) all[r.name] = r;
  std::vector<std::pair<size_t, std::string>> fresh;  // document, name
  for (size_t i = 0; i < decoded.size(); ++i) {
    if (!decoded[i] || !std::holds_alternative<ReservationConfig>(decoded[i]->record)) continue;
    const ReservationConfig& r = std::get<ReservationConfig>(decoded[i]->record);
    auto old = all.find(r.name);
    const bool moved = old == all.end() || old->second.start_us != r.start_us;
    if (moved && r.start_us < now && who.name != "import") {
      return absl::InvalidArgumentError(absl::StrCat(
          "document ", i, ": start: a reservation's start must not be in the past (now is ",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMicros(now), absl::UTCTimeZone()),
          ")"));
    }
    all[r.name] = r;
    fresh.emplace_back(i, r.name);
  }
  const std::vector<PoolSelector> pools = config.Pools();
  for (const auto& [i, name] : fresh) {
    const ReservationConfig& mine = all[name];
    if (mine.gpus) continue;  // picks devices no other holds (CheckGpuReservations)
    const std::set<std::string> held = HeldNodes(mine, nodes, pools);
    for (const auto& [other, r] : all) {
      if (other == name || mine.start_us >= r.end_us || r.start_us >= mine.end_us || r.gpus) {
        continue;
      }
      const std::set<std::string> theirs = HeldNodes(r, nodes, pools);
      const bool shared = Overlap(mine, r) || std::any_of(held.begin(), held.end(), [&](auto& n) {
                            return theirs.count(n) > 0;
                          });
      if (!shared) continue;
      return absl::InvalidArgumentError(absl::StrCat("document ", i, ": reservation ", name,
                                                     " would hold a node that ", "reservation ",
                                                     other, " holds over the same time"));
    }
  }
  return CheckGpuReservations(fresh, all, config.Reservations(), pools, nodes, catalog, now, who);
}

// What only the documents together, with what is applied, can say (checked at apply, never at
// load, so a stored configuration always loads): a notification's project is its tenant's;
// prices share one currency and no two take effect at the same moment; a tenant-admin's
// notifications reach public hosts only, at most kMaxTenantNotifications per tenant.
absl::Status CheckTogether(const std::vector<std::optional<ConfigObject>>& decoded,
                           const Configuration& config, bool by_tenant_admin) {
  constexpr size_t kMaxTenantNotifications = 10;
  std::map<std::string, std::string> project_tenant;
  std::map<std::string, PriceConfig> prices;
  std::map<std::string, std::set<std::string>> notifications;  // tenant -> names
  for (const NotificationConfig& n : config.Notifications()) notifications[n.tenant].insert(n.name);
  for (const PriceConfig& p : config.Prices()) prices[p.name] = p;
  for (const auto& o : decoded) {
    if (o && std::holds_alternative<ProjectConfig>(o->record)) {
      project_tenant[o->name()] = std::get<ProjectConfig>(o->record).tenant;
    }
    if (o && std::holds_alternative<PriceConfig>(o->record)) {
      prices[o->name()] = std::get<PriceConfig>(o->record);
    }
  }
  for (size_t i = 0; i < decoded.size(); ++i) {
    if (!decoded[i] || !std::holds_alternative<NotificationConfig>(decoded[i]->record)) continue;
    const NotificationConfig& n = std::get<NotificationConfig>(decoded[i]->record);
    const ProjectConfig* stored = config.Project(n.project);
    const std::string tenant = project_tenant.count(n.project) ? project_tenant[n.project]
                               : stored != nullptr             ? stored->tenant
                                                               : n.tenant;
    if (!n.project.empty() && tenant != n.tenant) {
      return absl::InvalidArgumentError(absl::StrCat("document ", i, ": project: \"", n.project,
                                                     "\" is not a project of tenant ", n.tenant));
    }
    notifications[n.tenant].insert(n.name);
    if (!by_tenant_admin) continue;
    if (!PublicHost(n.host)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "document ", i, ": url: a tenant-admin's webhook must not reach ", n.host,
          " (this machine, a link-local or a private network's address): an admin applies it"));
    }
    if (notifications[n.tenant].size() > kMaxTenantNotifications) {
      return absl::PermissionDeniedError(
          absl::StrCat("document ", i, ": tenant ", n.tenant, " would have more than ",
                       kMaxTenantNotifications, " notifications; an admin applies more"));
    }
  }
  std::map<int64_t, std::string> effective;
  std::set<std::string> currencies;
  for (const auto& [name, p] : prices) {
    currencies.insert(p.currency);
    if (auto [it, fresh] = effective.emplace(p.effective_us, name); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat("price ", name, ": effective_from: price ",
                                                     it->second, " takes effect at that moment"));
    }
  }
  if (currencies.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("currency: every price shares one, and these would not: ",
                     absl::StrJoin(currencies, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> ControlPlane::Apply(const json& docs, const Principal& who) {
  const absl::Status admin = Authorize(who, Verb::kConfigure);
  if (!admin.ok() && who.role != Role::kTenantAdmin) return admin;
  if (!docs.is_array() || docs.empty()) {
    return absl::InvalidArgumentError("expected a non-empty list of documents");
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!admin.ok()) {
    if (absl::Status s = TenantAdminMayApply(docs, who, config_); !s.ok()) return s;
  }
  // Documents may name what is applied alongside, in any order.
  std::set<std::pair<std::string, std::string>> alongside;
  for (const json& d : docs) {
    if (d.is_object() && d.value("kind", json()).is_string() && d.value("name", json()).is_string())
      alongside.insert({d["kind"].get<std::string>(), d["name"].get<std::string>()});
  }
  auto exists = [&](const std::string& kind, const std::string& name) {
    return alongside.count({kind, name}) > 0 || config_.Exists(kind, name);
  };
  // Decode everything first: a bad document changes nothing.
  std::vector<std::optional<ConfigObject>> decoded(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    if (!d.is_object()) return Invalid(i, "document", "must be a map");
    // Types first (fuzz/api_fuzz.cc found a kind that was a map throwing out of here).
    for (const char* key : {"kind", "name", "tenant", "description"}) {
      if (d.contains(key) && !d[key].is_string()) return Invalid(i, key, "must be a string");
    }
    if (d.value("kind", "") == "node") {
      if (absl::Status s = CheckNodeDoc(i, d); !s.ok()) return s;
      continue;
    }
    auto object = DecodeConfig(d, *catalog_, exists);
    if (!object.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("document ", i, ": ", object.status().message()));
    }
    decoded[i] = *std::move(object);
  }
  if (absl::Status s = CheckTogether(decoded, config_, !admin.ok()); !s.ok()) return s;
  if (absl::Status s = CheckReservations(decoded, config_, nodes_, now_(), who, *catalog_);
      !s.ok()) {
    return s;
  }
  StoreBatch batch;
  json applied = json::array();
  for (size_t i = 0; i < docs.size(); ++i) {
    const json& d = docs[i];
    std::string kind = d["kind"], name = d["name"];
    if (decoded[i]) {
      config_.Put(*std::move(decoded[i]));
      batch.puts.push_back({kind, name, d.dump()});
    } else {
      ApplyNodeDoc(d, who, batch);
    }
    Event(batch, "user:" + who.name, kind + ".applied", kind + "/" + name, "applied",
          kind == "notification" ? RedactNotification(d, false) : d);
    applied.push_back(kind + "/" + name);
  }
  if (absl::Status s = Durable(lock, std::move(batch)); !s.ok()) return s;
  return json{{"applied", applied}};
}

json ControlPlane::ListObjects(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.List(kind);
}

}  // namespace carve
