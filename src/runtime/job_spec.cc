#include "runtime/job_spec.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/input_limits.h"
#include "runtime/labels.h"
#include "yaml-cpp/yaml.h"

namespace carve {
namespace {

using json = nlohmann::json;

absl::Status FieldError(const std::string& field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckKeys(const json& j, const std::string& where, const std::set<std::string>& keys) {
  if (!j.is_object()) return FieldError(where.empty() ? "job" : where, "must be an object");
  for (const auto& [k, v] : j.items()) {
    if (!keys.count(k)) {
      std::vector<std::string> known(keys.begin(), keys.end());
      return FieldError(where.empty() ? k : absl::StrCat(where, ".", k),
                        absl::StrCat("unknown field; known fields: ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

// Reads j[key] into out when present, with a type check. Numbers are accepted for quantity
// strings (cpu: 8) and turned into their decimal text.
absl::Status Read(const json& j, const std::string& key, const std::string& path,
                  std::string& out) {
  if (!j.contains(key)) return absl::OkStatus();
  const json& v = j[key];
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_number_integer()) {
    out = v.dump();  // an unsigned above INT64_MAX keeps its digits, never wraps
  } else if (v.is_number_float()) {
    out = v.dump();
  } else {
    return FieldError(path, "must be a string");
  }
  return absl::OkStatus();
}

absl::Status Read(const json& j, const std::string& key, const std::string& path, int64_t& out,
                  int64_t lo, int64_t hi) {
  if (!j.contains(key)) return absl::OkStatus();
  if (!j[key].is_number_integer()) return FieldError(path, "must be an integer");
  if (j[key].is_number_unsigned() &&
      j[key].get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return FieldError(
        path, absl::StrCat(j[key].get<uint64_t>(), " is out of range [", lo, ", ", hi, "]"));
  }
  out = j[key].get<int64_t>();
  if (out < lo || out > hi) {
    return FieldError(path, absl::StrCat(out, " is out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

// Why `v` is refused where a string belongs, and how to write it: YAML reads `60` and `true` as a
// number and a boolean, so `command: [sleep, 60]` needs quotes around the 60.
std::string NotAString(const json& v) {
  if (v.is_number() || v.is_boolean()) {
    return absl::StrCat(v.dump(), " is a ", v.is_boolean() ? "boolean" : "number",
                        ", not a string; quote it: \"", v.dump(), "\"");
  }
  return absl::StrCat("must be a string, not ", v.is_null() ? "empty" : v.type_name());
}

absl::Status ReadList(const json& j, const std::string& key, const std::string& path,
                      std::vector<std::string>& out) {
  if (!j.contains(key)) return absl::OkStatus();
  const json& v = j[key];
  if (v.is_string()) {
    out = {v.get<std::string>()};
    return absl::OkStatus();
  }
  if (!v.is_array()) return FieldError(path, "must be a list of strings");
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return FieldError(absl::StrCat(path, "[", i, "]"), NotAString(v[i]));
    }
    out.push_back(v[i].get<std::string>());
  }
  return absl::OkStatus();
}

// YAML to JSON within limits: aliases are expanded here (yaml-cpp shares the aliased node), so
// a few lines of anchors can stand for billions of values (an alias bomb); nesting is bounded
// like the API's bodies.
class YamlConverter {
 public:
  static constexpr int64_t kMaxValues = 200'000;

  json Convert(const YAML::Node& n, int depth = 0) {
    if (!error_.empty()) return nullptr;
    if (--values_left_ < 0) {
      error_ = absl::StrCat("the YAML expands to more than ", kMaxValues,
                            " values (aliases of aliases?)");
      return nullptr;
    }
    if ((n.IsMap() || n.IsSequence()) && depth >= kMaxJsonDepth) {
      error_ = absl::StrCat("the YAML nests deeper than ", kMaxJsonDepth, " levels");
      return nullptr;
    }
    switch (n.Type()) {
      case YAML::NodeType::Map: {
        json out = json::object();
        for (const auto& kv : n) out[kv.first.as<std::string>()] = Convert(kv.second, depth + 1);
        return out;
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (const auto& e : n) out.push_back(Convert(e, depth + 1));
        return out;
      }
      case YAML::NodeType::Scalar:
        return Scalar(n);
      default:
        return nullptr;
    }
  }
  // The conversion's result, or what limit it hit.
  absl::StatusOr<json> Result(json j) const {
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    return j;
  }

 private:
  static json Scalar(const YAML::Node& n) {
    const std::string s = n.Scalar();
    if (n.Tag() == "!") return s;  // quoted: keep as text
    int64_t i;
    size_t used = 0;
    try {
      i = std::stoll(s, &used);
      if (used == s.size()) return i;
    } catch (...) {
    }
    if (s == "true") return true;
    if (s == "false") return false;
    // A decimal number (YAML 1.2's core schema: 4.20, -0.5, 1e3) is a number, as in JSON: a
    // price of 4.20 applied from a file was text, and refused (found re-applying an export).
    static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
    if (s.size() <= 64 && std::regex_match(s, kFloat)) {
      const double d = std::strtod(s.c_str(), nullptr);
      if (std::isfinite(d)) return d;
    }
    return s;
  }

  int64_t values_left_ = kMaxValues;
  std::string error_;
};

// A job without a name is named after its command: printable, and at most kMaxNameBytes.
std::string DefaultName(const std::string& command) {
  std::string name = TerminalSafe(command);
  if (name.size() <= kMaxNameBytes) return name;
  size_t end = kMaxNameBytes;
  while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return name.substr(0, end);
}

// Preemptibility and topology; the priority class is checked against the configured classes
// when the job is submitted.
absl::Status ReadScheduling(const json& j, JobSpec& spec) {
  if (j.contains("preemptible")) {
    if (!j["preemptible"].is_boolean()) return FieldError("preemptible", "must be true or false");
    spec.preemptible = j["preemptible"].get<bool>();
  }
  if (auto t = ParseTopology(spec.topology); !t.ok()) {
    return FieldError("topology", t.status().message());
  }
  if (!spec.checkpoint_grace.empty()) {
    auto grace = ParseDurationUs(spec.checkpoint_grace);
    if (!grace.ok()) return FieldError("checkpoint_grace", grace.status().message());
    if (*grace > 600'000'000) return FieldError("checkpoint_grace", "must be at most 10m");
  }
  if (!spec.isolation.empty() && spec.isolation != "enforced" && spec.isolation != "best-effort") {
    return FieldError("isolation",
                      absl::StrCat("\"", spec.isolation, "\" is not enforced or best-effort"));
  }
  return absl::OkStatus();
}

// Beyond any machine: a typo ("8000" cores, "32Ti"), refused rather than queued forever.
constexpr int64_t kMaxCpuMilli = 4096 * 1000;        // 4,096 cores
constexpr int64_t kMaxMemoryMib = 64 * 1024 * 1024;  // 64 TiB

// spread: {max_per_node: N, app: NAME}.
absl::Status ReadSpread(const json& j, JobSpec& spec) {
  if (!j.contains("spread")) return absl::OkStatus();
  const json& s = j["spread"];
  if (absl::Status e = CheckKeys(s, "spread", {"max_per_node", "app"}); !e.ok()) return e;
  if (!s.contains("max_per_node")) {
    return FieldError("spread.max_per_node", "is required (the most replicas on one node)");
  }
  int64_t max = 0;
  if (absl::Status e = Read(s, "max_per_node", "spread.max_per_node", max, 1, 4096); !e.ok()) {
    return e;
  }
  spec.spread_max_per_node = static_cast<int>(max);
  if (s.contains("app")) {
    if (!s["app"].is_string()) return FieldError("spread.app", NotAString(s["app"]));
    spec.spread_app = s["app"].get<std::string>();
    if (spec.spread_app.empty()) {
      return FieldError("spread.app", "must not be empty (leave it out to count this job alone)");
    }
    if (absl::Status e = CheckLabelKey(spec.spread_app); !e.ok()) {
      return FieldError("spread.app", e.message());
    }
  }
  return absl::OkStatus();
}

// A CPU limit at least the request, within what any node has.
absl::Status CheckLimits(const JobSpec& spec, CpuMilli cpu) {
  if (!spec.cpu_limit.empty()) {
    auto limit = ParseCpuMilli(spec.cpu_limit);
    if (!limit.ok()) return FieldError("resources.limits.cpu", limit.status().message());
    if (*limit < cpu || limit->units() > kMaxCpuMilli) {
      return FieldError("resources.limits.cpu",
                        absl::StrCat("\"", spec.cpu_limit, "\" must be at least the request (",
                                     spec.cpu, ") and at most 4096"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExtraResources(const std::map<std::string, int64_t>& extra,
                                 const std::string& field) {
  if (extra.size() > kMaxExtraResources) {
    return FieldError(field,
                      absl::StrCat(extra.size(), " resources; at most ", kMaxExtraResources));
  }
  constexpr int64_t kMaxAmount = 1'000'000'000'000'000;
  for (const auto& [name, amount] : extra) {
    if (absl::Status s = CheckLabelKey(name); !s.ok()) {
      return FieldError(field, absl::StrCat("\"", TerminalSafe(name.substr(0, kMaxNameBytes)),
                                            "\": ", s.message()));
    }
    if (amount < 1 || amount > kMaxAmount) {
      return FieldError(absl::StrCat(field, ".", name),
                        absl::StrCat(amount, " is out of range [1, ", kMaxAmount, "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, int64_t>> ParseExtraResource(absl::string_view text) {
  const size_t eq = text.find('=');
  int64_t amount = 0;
  if (eq == absl::string_view::npos || !absl::SimpleAtoi(text.substr(eq + 1), &amount)) {
    return FieldError("--resource",
                      absl::StrCat("\"", TerminalSafe(std::string(text.substr(0, 200))),
                                   "\" is not NAME=AMOUNT (a whole number)"));
  }
  std::string name(text.substr(0, eq));
  if (absl::Status s = CheckExtraResources({{name, amount}}, "--resource"); !s.ok()) return s;
  return std::pair{name, amount};
}

absl::Status ReadExtraResources(const json& j, const std::string& key, const std::string& field,
                                std::map<std::string, int64_t>& out) {
  if (!j.contains(key)) return absl::OkStatus();
  const json& v = j[key];
  if (!v.is_object()) return FieldError(field, "must be a map of names to whole amounts");
  out.clear();
  for (const auto& [name, amount] : v.items()) {
    int64_t n = 0;
    if (absl::Status s = Read(v, name, absl::StrCat(field, ".", name), n, 1,
                              std::numeric_limits<int64_t>::max());
        !s.ok()) {
      return s;
    }
    out[name] = n;
  }
  return CheckExtraResources(out, field);
}

absl::StatusOr<JobSpec> JobSpecFromJson(const json& j) {
  static const std::set<std::string> kTop = {
      "name",        "tenant",      "project",          "queue",     "kind",
      "priority",    "replicas",    "resources",        "command",   "env",
      "workdir",     "max_runtime", "recovery",         "lease",     "priority_class",
      "preemptible", "topology",    "checkpoint_grace", "isolation", "spread"};
  static const std::set<std::string> kResources = {
      "gpus",      "mode", "gpu_compute", "gpu_memory", "profile",
      "gpu_model", "cpu",  "memory",      "extra",      "limits"};
  if (absl::Status s = CheckKeys(j, "", kTop); !s.ok()) return s;
  JobSpec spec;
  for (auto [key, out] : {std::pair{"name", &spec.name},
                          {"lease", &spec.lease},
                          {"tenant", &spec.tenant},
                          {"project", &spec.project},
                          {"queue", &spec.queue},
                          {"kind", &spec.kind},
                          {"workdir", &spec.workdir},
                          {"max_runtime", &spec.max_runtime},
                          {"priority_class", &spec.priority_class},
                          {"topology", &spec.topology},
                          {"checkpoint_grace", &spec.checkpoint_grace},
                          {"isolation", &spec.isolation}}) {
    if (absl::Status s = Read(j, key, key, *out); !s.ok()) return s;
  }
  int64_t replicas = 1;
  if (absl::Status s = Read(j, "priority", "priority", spec.priority, -1000000, 1000000); !s.ok())
    return s;
  if (absl::Status s = Read(j, "replicas", "replicas", replicas, 1, 4096); !s.ok()) return s;
  spec.replicas = static_cast<int>(replicas);
  if (j.contains("resources")) {
    const json& r = j["resources"];
    if (absl::Status s = CheckKeys(r, "resources", kResources); !s.ok()) return s;
    int64_t gpus = 0;
    if (absl::Status s = Read(r, "gpus", "resources.gpus", gpus, 0, 64); !s.ok()) return s;
    spec.gpus = static_cast<int>(gpus);
    for (auto [key, out] : {std::pair{"mode", &spec.mode},
                            {"gpu_compute", &spec.gpu_compute},
                            {"gpu_memory", &spec.gpu_memory},
                            {"profile", &spec.profile},
                            {"cpu", &spec.cpu},
                            {"memory", &spec.memory}}) {
      if (absl::Status s = Read(r, key, absl::StrCat("resources.", key), *out); !s.ok()) return s;
    }
    if (absl::Status s = ReadList(r, "gpu_model", "resources.gpu_model", spec.gpu_models); !s.ok())
      return s;
    if (absl::Status s = ReadExtraResources(r, "extra", "resources.extra", spec.extra); !s.ok()) {
      return s;
    }
    if (r.contains("limits")) {
      const json& l = r["limits"];
      if (l.is_object() && l.contains("memory")) {
        return FieldError("resources.limits.memory",
                          "memory has no limit above its request (memory is not given back under "
                          "pressure); ask for what the job needs in resources.memory");
      }
      if (absl::Status s = CheckKeys(l, "resources.limits", {"cpu"}); !s.ok()) return s;
      if (absl::Status s = Read(l, "cpu", "resources.limits.cpu", spec.cpu_limit); !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = ReadSpread(j, spec); !s.ok()) return s;
  if (absl::Status s = ReadList(j, "command", "command", spec.command); !s.ok()) return s;
  if (j.contains("env")) {
    if (!j["env"].is_object()) return FieldError("env", "must be a map of strings");
    for (const auto& [k, v] : j["env"].items()) {
      if (!v.is_string()) return FieldError("env." + k, NotAString(v));
      spec.env[k] = v.get<std::string>();
    }
  }
  static const std::set<std::string> kKinds = {"training",   "inference",   "batch",
                                               "evaluation", "interactive", "data"};
  if (!kKinds.count(spec.kind)) {
    return FieldError("kind", absl::StrCat("\"", spec.kind,
                                           "\" is not one of training, inference, batch, "
                                           "evaluation, interactive, data"));
  }
  if (j.contains("recovery")) {
    const json& r = j["recovery"];
    if (absl::Status s = CheckKeys(r, "recovery", {"policy", "max_retries"}); !s.ok()) return s;
    if (absl::Status s = Read(r, "policy", "recovery.policy", spec.recovery); !s.ok()) return s;
    int64_t retries = -1;
    if (absl::Status s = Read(r, "max_retries", "recovery.max_retries", retries, 0, 100); !s.ok())
      return s;
    spec.max_retries = static_cast<int>(retries);
    static const std::set<std::string> kPolicies = {"checkpoint-retry", "failover", "requeue",
                                                    "none"};
    if (!spec.recovery.empty() && !kPolicies.count(spec.recovery)) {
      return FieldError("recovery.policy",
                        absl::StrCat("\"", spec.recovery,
                                     "\" is not checkpoint-retry, failover, requeue or none"));
    }
  }
  if (absl::Status s = ReadScheduling(j, spec); !s.ok()) return s;
  if (spec.command.empty()) return FieldError("command", "is required (what the job runs)");
  if (spec.name.empty()) spec.name = DefaultName(spec.command[0]);
  return spec;
}

absl::Status CheckSubmission(const JobSpec& spec) {
  if (absl::Status s = CheckPrintable("name", spec.name, kMaxNameBytes); !s.ok()) return s;
  for (auto [field, value] : {std::pair{"tenant", &spec.tenant},
                              {"project", &spec.project},
                              {"queue", &spec.queue},
                              {"priority_class", &spec.priority_class}}) {
    if (absl::Status s = CheckPrintable(field, *value, kMaxNameBytes); !s.ok()) return s;
  }
  size_t bytes = 0;
  for (size_t i = 0; i < spec.command.size(); ++i) {
    if (spec.command[i].find('\0') != std::string::npos) {
      return FieldError(absl::StrCat("command[", i, "]"), "holds a NUL byte");
    }
    bytes += spec.command[i].size();
  }
  for (const auto& [k, v] : spec.env) {
    if (!IsEnvName(k)) {
      return FieldError("env", absl::StrCat("\"", TerminalSafe(k.substr(0, kMaxNameBytes)),
                                            "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*, "
                                            "at most 256 bytes)"));
    }
    if (v.find('\0') != std::string::npos) return FieldError("env." + k, "holds a NUL byte");
    bytes += k.size() + v.size();
  }
  if (bytes > kMaxCommandEnvBytes) {
    return FieldError("command", absl::StrCat("command and env hold ", bytes, " bytes; at most ",
                                              kMaxCommandEnvBytes));
  }
  return absl::OkStatus();
}

json JobSpec::ToJson() const {
  json r = {{"gpus", gpus}, {"mode", mode}, {"cpu", cpu}, {"memory", memory}};
  if (!gpu_compute.empty()) r["gpu_compute"] = gpu_compute;
  if (!gpu_memory.empty()) r["gpu_memory"] = gpu_memory;
  if (!profile.empty()) r["profile"] = profile;
  if (!gpu_models.empty()) r["gpu_model"] = gpu_models;
  if (!extra.empty()) r["extra"] = extra;
  if (!cpu_limit.empty()) r["limits"] = {{"cpu", cpu_limit}};
  json j = {{"name", name},         {"tenant", tenant},
            {"project", project},   {"queue", queue},
            {"kind", kind},         {"priority", priority},
            {"replicas", replicas}, {"resources", r},
            {"command", command},   {"env", env}};
  if (!workdir.empty()) j["workdir"] = workdir;
  if (!max_runtime.empty()) j["max_runtime"] = max_runtime;
  if (!lease.empty()) j["lease"] = lease;
  if (!priority_class.empty()) j["priority_class"] = priority_class;
  if (preemptible.has_value()) j["preemptible"] = *preemptible;
  if (!topology.empty()) j["topology"] = topology;
  if (!checkpoint_grace.empty()) j["checkpoint_grace"] = checkpoint_grace;
  if (!isolation.empty()) j["isolation"] = isolation;
  if (spread_max_per_node > 0) {
    j["spread"] = {{"max_per_node", spread_max_per_node}};
    if (!spread_app.empty()) j["spread"]["app"] = spread_app;
  }
  if (!recovery.empty() || max_retries >= 0) {
    j["recovery"] = json::object();
    if (!recovery.empty()) j["recovery"]["policy"] = recovery;
    if (max_retries >= 0) j["recovery"]["max_retries"] = max_retries;
  }
  return j;
}

std::string JobSpec::RecoveryPolicy() const {
  if (!recovery.empty()) return recovery;
  if (kind == "training") return "checkpoint-retry";
  if (kind == "inference") return "failover";
  return "requeue";
}

int JobSpec::MaxRetries() const {
  if (max_retries >= 0) return max_retries;
  std::string policy = RecoveryPolicy();
  return policy == "none" ? 0 : policy == "failover" ? 10 : 3;
}

absl::StatusOr<json> YamlToJson(const std::string& yaml_text) {
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root.IsMap()) return absl::InvalidArgumentError("the file must hold a YAML map");
    YamlConverter converter;
    json j = converter.Convert(root);
    return converter.Result(std::move(j));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", e.what()));
  }
}

// The documents of a YAML stream, each with its first line: a line starting with "---" (then a
// space or its end) starts one. Split here because yaml-cpp 0.7's LoadAll loops forever on some
// malformed input (" ,a:b"), which a fuzz target found; Load does not.
static std::vector<std::pair<int, std::string>> SplitYamlDocuments(const std::string& text) {
  std::vector<std::pair<int, std::string>> docs = {{1, ""}};  // first line, text
  size_t start = 0;
  for (int line_no = 1; start < text.size(); ++line_no) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    absl::string_view line(text.data() + start, end - start);
    if (absl::StartsWith(line, "---") && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' ||
                                          line[3] == '\n' || line[3] == '\r')) {
      docs.push_back({line_no, std::string(line.substr(3))});
    } else {
      docs.back().second.append(line.data(), line.size());
    }
    start = end;
  }
  return docs;
}

absl::StatusOr<json> YamlDocumentsToJson(const std::string& yaml_text) {
  json out = json::array();
  YamlConverter converter;  // one budget for the whole file
  for (const auto& [first_line, text] : SplitYamlDocuments(yaml_text)) {
    json j;
    try {
      j = converter.Convert(YAML::Load(text));
    } catch (const YAML::Exception& e) {
      if (e.mark.is_null()) {
        return absl::InvalidArgumentError(absl::StrCat("invalid YAML: ", e.what()));
      }
      return absl::InvalidArgumentError(absl::StrCat("invalid YAML: line ",
                                                     first_line + e.mark.line, ", column ",
                                                     e.mark.column + 1, ": ", e.msg));
    }
    if (auto r = converter.Result(nullptr); !r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("document at line ", first_line, ": ", r.status().message()));
    }
    if (j.is_array()) {
      for (json& item : j) out.push_back(std::move(item));
    } else if (!j.is_null()) {
      out.push_back(std::move(j));
    }
  }
  return out;
}

absl::StatusOr<int64_t> ParseDurationUs(const std::string& text) {
  if (text.empty()) return absl::InvalidArgumentError("empty duration");
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = n * 10 + (text[i++] - '0');
      if (n > 10'000'000'000) return absl::InvalidArgumentError("duration too long");
    }
    if (i == start || i == text.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid duration \"", text, "\": write it as 90s, 30m, 2h or 1h30m"));
    }
    char unit = text[i++];
    int64_t us = unit == 's'   ? 1'000'000
                 : unit == 'm' ? 60'000'000
                 : unit == 'h' ? 3'600'000'000
                               : 0;
    if (us == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid duration \"", text, "\": units are s, m and h"));
    }
    // At most about 31,000 years in all (a fuzz finding: 4444444444h overflowed).
    constexpr int64_t kMaxUs = 1'000'000'000'000'000'000;
    if (n > (kMaxUs - total) / us) return absl::InvalidArgumentError("duration too long");
    total += n * us;
  }
  return total;
}

absl::StatusOr<JobRequest> ToJobRequest(const JobSpec& spec, const GpuCatalog& catalog,
                                        int64_t job_id) {
  JobRequest job;
  job.replicas = spec.replicas;
  ReplicaRequest& r = job.replica;
  auto cpu = ParseCpuMilli(spec.cpu);
  if (!cpu.ok()) return FieldError("resources.cpu", cpu.status().message());
  auto memory = ParseMemMib(spec.memory);
  if (!memory.ok()) return FieldError("resources.memory", memory.status().message());
  if (cpu->units() > kMaxCpuMilli) {
    return FieldError("resources.cpu",
                      absl::StrCat("\"", spec.cpu, "\" is more than any node has (at most 4096)"));
  }
  if (memory->units() > kMaxMemoryMib) {
    return FieldError(
        "resources.memory",
        absl::StrCat("\"", spec.memory, "\" is more than any node has (at most 64Ti)"));
  }
  if (absl::Status s = CheckLimits(spec, *cpu); !s.ok()) return s;
  r.resources.cpu = *cpu;
  r.resources.memory = *memory;
  for (const auto& [name, amount] : spec.extra) r.resources.extra.push_back({name, amount});
  // An application is the tenant's: another tenant's replicas of the same name never count. The
  // key cannot be written by two tenants: an app name has no space (CheckLabelKey), so "app A of
  // tenant T" splits one way only, and a job's own key ("job N") begins otherwise.
  if (!spec.spread_app.empty()) {
    r.app = absl::StrCat("app ", spec.spread_app, " of tenant ", spec.tenant);
  } else if (spec.spread_max_per_node > 0) {
    r.app = absl::StrCat("job ", job_id);
  }
  r.max_per_node = spec.spread_max_per_node;
  auto mode = ParseDeliveryMode(spec.mode);
  if (!mode.ok()) return FieldError("resources.mode", mode.status().message());
  r.gpu.mode = *mode;
  r.gpu.count = spec.gpus;
  if (*mode == DeliveryMode::kShared) {
    if (spec.gpus == 0) r.gpu.count = 1;
    if (spec.gpu_compute.empty()) {
      return FieldError("resources.gpu_compute", "a shared GPU needs a compute share, e.g. 30%");
    }
    auto compute = ParseGpuMilli(spec.gpu_compute);
    if (!compute.ok()) return FieldError("resources.gpu_compute", compute.status().message());
    r.gpu.compute = *compute;
    if (!spec.gpu_memory.empty()) {
      auto mem = ParseMemMib(spec.gpu_memory);
      if (!mem.ok()) return FieldError("resources.gpu_memory", mem.status().message());
      r.gpu.memory = *mem;
    }
    // One MPS server serves one Unix user at a time, and each tenant runs as its own user.
    r.share_group = spec.tenant;
    r.best_effort = spec.isolation == "best-effort";
    r.cap_memory = true;  // never an uncapped share
  } else if (*mode == DeliveryMode::kExclusive) {
    r.gpu.compute = spec.gpus > 0 ? kWholeGpu : GpuMilli(0);
    if (!spec.gpu_compute.empty() || !spec.gpu_memory.empty()) {
      return FieldError("resources.gpu_compute",
                        "exclusive GPUs are whole; use mode: shared for a share of one GPU");
    }
  } else {
    if (spec.gpus == 0) r.gpu.count = 1;
    r.gpu.profile = spec.profile;
  }
  for (const std::string& m : spec.gpu_models) {
    auto id = catalog.Find(m);
    if (!id.ok()) return FieldError("resources.gpu_model", id.status().message());
    r.allowed_models.push_back(*id);
  }
  if (!spec.max_runtime.empty()) {
    if (auto d = ParseDurationUs(spec.max_runtime); !d.ok()) {
      return FieldError("max_runtime", d.status().message());
    }
  }
  if (!spec.lease.empty()) {
    if (auto d = ParseDurationUs(spec.lease); !d.ok())
      return FieldError("lease", d.status().message());
  }

  if (absl::Status s = ValidateRequest(job, catalog); !s.ok()) {
    return FieldError("resources", s.message());
  }
  return job;
}

absl::Status CheckSubmissionMinimums(const JobSpec& spec) {
  // A submission's check, not the request's: a job stored before it existed still loads.
  if (spec.gpus == 0 && !spec.gpu_models.empty() &&
      (spec.mode.empty() || spec.mode == "exclusive")) {
    return FieldError("resources.gpu_model",
                      "a job without GPUs runs on no GPU model; ask for GPUs too (gpus: N, or "
                      "--gpus N)");
  }
  auto cpu = ParseCpuMilli(spec.cpu);
  if (!cpu.ok()) return FieldError("resources.cpu", cpu.status().message());
  if (cpu->units() < kMinCpuMilli) {
    return FieldError("resources.cpu",
                      absl::StrCat("\"", spec.cpu, "\" is below the minimum of 100m per replica"));
  }
  auto memory = ParseMemMib(spec.memory);
  if (!memory.ok()) return FieldError("resources.memory", memory.status().message());
  if (memory->units() < kMinMemoryMib) {
    return FieldError(
        "resources.memory",
        absl::StrCat("\"", spec.memory, "\" is below the minimum of 16Mi per replica"));
  }
  return absl::OkStatus();
}

}  // namespace carve
