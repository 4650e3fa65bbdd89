#include "runtime/configuration.h"

#include <algorithm>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/job_spec.h"

namespace carve {

using json = nlohmann::json;

namespace {

absl::Status Field(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status KnownFields(const json& doc, std::set<std::string> known) {
  known.insert({"kind", "name", "description"});
  for (const auto& [k, v] : doc.items()) {
    if (!known.count(k)) {
      return Field(k, absl::StrCat("unknown field; known: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

using Names = std::optional<std::vector<std::string>>;

// A list of names of `kind` in `field` (absent: nullopt); each must exist (or be "*" when `star`).
absl::Status ReadNames(const json& doc, const std::string& field, const std::string& kind,
                       bool star, const ExistsFn& exists, Names& out) {
  if (!doc.contains(field)) return absl::OkStatus();
  const json& list = doc[field];
  if (!list.is_array()) return Field(field, "must be a list of names");
  out.emplace();
  for (const json& v : list) {
    if (!v.is_string()) return Field(field, "must be a list of names");
    std::string name = v.get<std::string>();
    if (!(star && name == "*") && !exists(kind, name)) {
      return Field(field, absl::StrCat("no ", kind, " \"", name, "\" (apply it first or alongside",
                                       star ? "; \"*\" means every tenant)" : ")"));
    }
    out->push_back(std::move(name));
  }
  return absl::OkStatus();
}

std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

absl::Status ReadResources(const json& doc, const std::string& field, const GpuCatalog& catalog,
                           ResourceList& out) {
  if (!doc.contains(field)) return absl::OkStatus();
  const json& list = doc[field];
  if (!list.is_object()) return Field(field, "must be a map of resource: amount");
  for (const auto& [name, amount] : list.items()) {
    auto canonical = CanonicalResource(name, catalog);
    if (!canonical.ok()) return Field(field + "." + name, canonical.status().message());
    auto parsed = ParseResourceAmount(*canonical, Text(amount));
    if (!parsed.ok()) return Field(field + "." + name, parsed.status().message());
    out[*canonical] = *parsed;
  }
  return absl::OkStatus();
}

absl::Status ReadPriority(const json& doc, const std::string& field, std::optional<int64_t>& out) {
  if (!doc.contains(field)) return absl::OkStatus();
  const json& v = doc[field];
  if (!v.is_number_integer() || v.get<int64_t>() < -1000000 || v.get<int64_t>() > 1000000) {
    return Field(field, "must be an integer in [-1000000, 1000000]");
  }
  out = v.get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadBool(const json& doc, const std::string& field, bool& out) {
  if (!doc.contains(field)) return absl::OkStatus();
  if (!doc[field].is_boolean()) return Field(field, "must be true or false");
  out = doc[field].get<bool>();
  return absl::OkStatus();
}

absl::StatusOr<TenantConfig> DecodeTenant(const json& doc) {
  if (absl::Status s = KnownFields(doc, {"uid", "gid"}); !s.ok()) return s;
  TenantConfig t{doc["name"], std::nullopt, std::nullopt};
  for (auto [key, id] : {std::pair{"uid", &t.uid}, {"gid", &t.gid}}) {
    if (!doc.contains(key)) continue;
    const json& v = doc[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 4294967294) {
      return Field(key, "must be an integer from 1 to 4294967294 (jobs never run as root)");
    }
    *id = v.get<int64_t>();
  }
  return t;
}

absl::StatusOr<ProjectConfig> DecodeProject(const json& doc, const ExistsFn& exists) {
  if (absl::Status s = KnownFields(
          doc, {"tenant", "queues", "priority_classes", "max_priority", "allow_non_preemptible"});
      !s.ok()) {
    return s;
  }
  ProjectConfig p{doc["name"], doc.value("tenant", "")};
  if (!exists("tenant", p.tenant)) {
    return Field("tenant", "no tenant \"" + p.tenant + "\" (apply it first or alongside)");
  }
  absl::Status s = ReadNames(doc, "queues", "queue", false, exists, p.queues);
  if (s.ok()) {
    s = ReadNames(doc, "priority_classes", "priority-class", false, exists, p.priority_classes);
  }
  if (s.ok()) s = ReadPriority(doc, "max_priority", p.max_priority);
  if (s.ok()) s = ReadBool(doc, "allow_non_preemptible", p.allow_non_preemptible);
  if (!s.ok()) return s;
  return p;
}

absl::Status ReadQueueSpec(const json& doc, const GpuCatalog& catalog, QueueSpec& q) {
  q.name = doc["name"];
  absl::Status s = ReadResources(doc, "quota", catalog, q.nominal);
  if (s.ok()) s = ReadResources(doc, "borrowing_limit", catalog, q.borrowing_limit);
  if (s.ok()) s = ReadResources(doc, "lending_limit", catalog, q.lending_limit);
  if (!s.ok()) return s;
  if (doc.contains("weight")) {
    if (!doc["weight"].is_number() || doc["weight"].get<double>() <= 0) {
      return Field("weight", "must be a positive number");
    }
    q.weight = doc["weight"].get<double>();
  }
  for (auto [field, out] : {std::pair{"pool", &q.pool}, {"cohort", &q.cohort}}) {
    if (!doc.contains(field)) continue;
    if (!doc[field].is_string()) return Field(field, "must be a string");
    *out = doc[field].get<std::string>();
  }
  for (auto [field, limits] :
       {std::pair{"borrowing_limit", &q.borrowing_limit}, {"lending_limit", &q.lending_limit}}) {
    if (doc.contains(field) && q.cohort.empty()) {
      return Field(field, "only a queue in a cohort borrows or lends; set cohort");
    }
    for (const auto& [name, amount] : *limits) {
      if (!q.nominal.count(name)) {
        return Field(absl::StrCat(field, ".", name), "has no quota for this resource");
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QueueConfig> DecodeQueue(const json& doc, const GpuCatalog& catalog,
                                        const ExistsFn& exists) {
  if (absl::Status s = KnownFields(doc, {"pool", "quota", "weight", "cohort", "borrowing_limit",
                                         "lending_limit", "idle_after", "idle_action", "tenants"});
      !s.ok()) {
    return s;
  }
  QueueConfig q;
  absl::Status s = ReadQueueSpec(doc, catalog, q.spec);
  if (s.ok()) s = ReadNames(doc, "tenants", "tenant", true, exists, q.tenants);
  if (!s.ok()) return s;
  if (doc.contains("idle_after")) {
    const json& v = doc["idle_after"];
    auto after = v.is_string() ? ParseDurationUs(v.get<std::string>())
                               : absl::InvalidArgumentError("must be a duration");
    if (!after.ok()) return Field("idle_after", after.status().message());
    q.idle_after_us = *after;
    q.idle_after = v.get<std::string>();
  }
  if (doc.contains("idle_action")) {
    const json& v = doc["idle_action"];
    if (v != "flag" && v != "stop") return Field("idle_action", "must be flag or stop");
    q.idle_action = v == "stop" ? IdleAction::kStop : IdleAction::kFlag;
  }
  return q;
}

absl::StatusOr<PriorityClassConfig> DecodeClass(const json& doc, const ExistsFn& exists) {
  if (absl::Status s = KnownFields(doc, {"priority", "preemptible", "tenants"}); !s.ok()) return s;
  if (!doc.contains("priority") || !doc["priority"].is_number_integer()) {
    return Field("priority", "is required, an integer");
  }
  std::optional<int64_t> priority;
  PriorityClassConfig c{{doc["name"], 0, true}, std::nullopt};
  absl::Status s = ReadPriority(doc, "priority", priority);
  if (s.ok()) s = ReadBool(doc, "preemptible", c.priority_class.preemptible);
  if (s.ok()) s = ReadNames(doc, "tenants", "tenant", true, exists, c.tenants);
  if (!s.ok()) return s;
  c.priority_class.priority = *priority;
  return c;
}

absl::StatusOr<PoolConfig> DecodePool(const json& doc) {
  if (absl::Status s = KnownFields(doc, {"selector"}); !s.ok()) return s;
  const json selector = doc.value("selector", json());
  if (!selector.is_object() || selector.empty()) {
    return Field("selector", "is required: a map of node labels, e.g. {gpu-class: h200}");
  }
  PoolConfig p{{doc["name"], {}}};
  for (const auto& [key, value] : selector.items()) {
    if (!value.is_string()) return Field("selector." + key, "must be a string");
    if (key == "pool") {
      return Field("selector.pool",
                   "a node's pool label already names its pool; select by "
                   "other labels");
    }
    absl::Status s = CheckLabel(key, value.get<std::string>());
    if (!s.ok()) return Field("selector", s.message());
    p.selector.match[key] = value.get<std::string>();
  }
  return p;
}

template <typename T>
const T* RecordOf(const ConfigObject* object) {
  return object == nullptr ? nullptr : &std::get<T>(object->record);
}

template <typename T>
absl::StatusOr<ConfigObject> Wrap(absl::StatusOr<T> record, const json& doc) {
  if (!record.ok()) return record.status();
  return ConfigObject{*std::move(record), doc};
}

}  // namespace

std::string Name(IdleAction action) { return action == IdleAction::kStop ? "stop" : "flag"; }

const std::string& ConfigObject::kind() const {
  static const std::string kKinds[] = {"tenant", "project",      "queue", "priority-class",
                                       "pool",   "notification", "price", "reservation"};
  return kKinds[record.index()];
}

const std::string& ConfigObject::name() const {
  return std::visit(
      [](const auto& r) -> const std::string& {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, QueueConfig>) {
          return r.spec.name;
        } else if constexpr (std::is_same_v<T, PriorityClassConfig>) {
          return r.priority_class.name;
        } else if constexpr (std::is_same_v<T, PoolConfig>) {
          return r.selector.name;
        } else {
          return r.name;
        }
      },
      record);
}

absl::StatusOr<ConfigObject> DecodeConfig(const json& doc, const GpuCatalog& catalog,
                                          const ExistsFn& exists) {
  static const std::regex kName("[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?");
  if (!doc.is_object()) return Field("document", "must be a map");
  for (const char* key : {"kind", "name", "tenant", "description"}) {
    if (doc.contains(key) && !doc[key].is_string()) return Field(key, "must be a string");
  }
  std::string kind = doc.value("kind", ""), name = doc.value("name", "");
  if (std::find(std::begin(kConfigKinds), std::end(kConfigKinds), kind) == std::end(kConfigKinds))
    return Field("kind",
                 "\"" + kind +
                     "\" is not tenant, project, queue, priority-class, pool, notification, "
                     "price, reservation or node");
  if (!std::regex_match(name, kName)) {
    return Field("name", "\"" + name + "\" must be lowercase letters, digits and dashes");
  }
  if (kind == "tenant") return Wrap(DecodeTenant(doc), doc);
  if (kind == "project") return Wrap(DecodeProject(doc, exists), doc);
  if (kind == "queue") return Wrap(DecodeQueue(doc, catalog, exists), doc);
  if (kind == "pool") return Wrap(DecodePool(doc), doc);
  if (kind == "price") return Wrap(DecodePrice(doc, catalog), doc);
  if (kind == "reservation") return Wrap(DecodeReservation(doc, exists), doc);
  if (kind == "notification") {
    return Wrap(DecodeNotification(
                    doc, [&](const std::string& t) { return exists("tenant", t); },
                    [&](const std::string& p) { return exists("project", p); }),
                doc);
  }
  return Wrap(DecodeClass(doc, exists), doc);
}

absl::Status Configuration::Load(const std::string& kind, const std::string& name,
                                 const std::string& bytes) {
  json doc = json::parse(bytes, nullptr, false);
  // What was applied was checked then; references are not checked again (a queue may name a
  // tenant stored after it).
  auto object =
      DecodeConfig(doc, *catalog_, [](const std::string&, const std::string&) { return true; });
  if (object.ok() && (object->kind() != kind || object->name() != name)) {
    object = absl::InvalidArgumentError(
        absl::StrCat("the document is ", object->kind(), "/", object->name()));
  }
  if (!object.ok()) {
    return absl::DataLossError(absl::StrCat("stored ", kind, " \"", name,
                                            "\" cannot be read: ", object.status().message()));
  }
  Put(*std::move(object));
  return absl::OkStatus();
}

void Configuration::Put(ConfigObject object) {
  std::pair<std::string, std::string> key{object.kind(), object.name()};
  objects_.insert_or_assign(std::move(key), std::move(object));
  ++revision_;
}

const ConfigObject* Configuration::Find(const std::string& kind, const std::string& name) const {
  auto it = objects_.find({kind, name});
  return it == objects_.end() ? nullptr : &it->second;
}

template <typename F>
void Configuration::Each(const std::string& kind, F f) const {
  for (auto it = objects_.lower_bound({kind, ""}); it != objects_.end(); ++it) {
    if (it->first.first != kind) break;
    f(it->second);
  }
}

bool Configuration::Exists(const std::string& kind, const std::string& name) const {
  if (kind == "priority-class") {
    std::vector<PriorityClass> classes = Classes();
    return std::any_of(classes.begin(), classes.end(),
                       [&](const PriorityClass& c) { return c.name == name; });
  }
  return name == "default" || Find(kind, name) != nullptr;
}

const TenantConfig* Configuration::Tenant(const std::string& name) const {
  return RecordOf<TenantConfig>(Find("tenant", name));
}

const ProjectConfig* Configuration::Project(const std::string& name) const {
  return RecordOf<ProjectConfig>(Find("project", name));
}

const QueueConfig* Configuration::Queue(const std::string& name) const {
  return RecordOf<QueueConfig>(Find("queue", name));
}

const PriorityClassConfig* Configuration::Class(const std::string& name) const {
  return RecordOf<PriorityClassConfig>(Find("priority-class", name));
}

std::vector<const QueueConfig*> Configuration::Queues() const {
  std::vector<const QueueConfig*> out;
  Each("queue", [&](const ConfigObject& o) { out.push_back(&std::get<QueueConfig>(o.record)); });
  return out;
}

std::vector<QueueSpec> Configuration::QueueSpecs() const {
  std::vector<QueueSpec> out;
  for (const QueueConfig* q : Queues()) out.push_back(q->spec);
  return out;
}

std::vector<PoolSelector> Configuration::Pools() const {
  std::vector<PoolSelector> out;
  Each("pool",
       [&](const ConfigObject& o) { out.push_back(std::get<PoolConfig>(o.record).selector); });
  return out;
}

std::vector<ReservationConfig> Configuration::Reservations() const {
  std::vector<ReservationConfig> out;
  Each("reservation",
       [&](const ConfigObject& o) { out.push_back(std::get<ReservationConfig>(o.record)); });
  return out;
}

std::vector<PriceConfig> Configuration::Prices() const {
  std::vector<PriceConfig> out;
  Each("price", [&](const ConfigObject& o) { out.push_back(std::get<PriceConfig>(o.record)); });
  return out;
}

std::vector<NotificationConfig> Configuration::Notifications() const {
  std::vector<NotificationConfig> out;
  Each("notification",
       [&](const ConfigObject& o) { out.push_back(std::get<NotificationConfig>(o.record)); });
  return out;
}

std::vector<PriorityClass> Configuration::Classes() const {
  std::vector<PriorityClass> classes = BuiltInPriorityClasses();
  Each("priority-class", [&](const ConfigObject& o) {
    const PriorityClass& c = std::get<PriorityClassConfig>(o.record).priority_class;
    auto same = std::find_if(classes.begin(), classes.end(),
                             [&](const PriorityClass& k) { return k.name == c.name; });
    if (same != classes.end()) {
      *same = c;
    } else {
      classes.push_back(c);
    }
  });
  return classes;
}

std::vector<std::string> Configuration::ProjectsOf(const std::string& tenant) const {
  std::vector<std::string> out = {"default"};
  Each("project", [&](const ConfigObject& o) {
    if (std::get<ProjectConfig>(o.record).tenant == tenant) out.push_back(o.name());
  });
  return out;
}

json ResourcesToJson(const ResourceList& list) {
  json out = json::object();
  for (const auto& [name, amount] : list) out[name] = FormatResourceAmount(name, amount);
  return out;
}

json Configuration::List(const std::string& kind) const {
  json out = json::array();
  if (kind == "price" || kind == "reservation") {  // none by default
    Each(kind, [&](const ConfigObject& o) { out.push_back(o.doc); });
    return out;
  }
  if (kind == "notification") {  // none by default, and never with its secret
    Each(kind, [&](const ConfigObject& o) { out.push_back(RedactNotification(o.doc, true)); });
    return out;
  }
  out.push_back({{"kind", kind}, {"name", "default"}});
  Each(kind, [&](const ConfigObject& o) { out.push_back(o.doc); });
  return out;
}

}  // namespace carve
