#include "runtime/job_filter.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace carve {

namespace {

std::string* Field(JobFilter& f, absl::string_view key) {
  if (key == "user") return &f.user;
  if (key == "tenant") return &f.tenant;
  if (key == "project") return &f.project;
  if (key == "queue") return &f.queue;
  if (key == "node") return &f.node;
  if (key == "kind") return &f.kind;
  if (key == "text") return &f.text;
  return &f.name;
}

absl::Status AddStates(JobFilter& f, absl::string_view list) {
  for (absl::string_view word : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    std::optional<JobState> s = ParseJobState(word);
    if (!s) {
      std::vector<std::string> names;
      for (int i = 0; i <= static_cast<int>(JobState::kPreempted); ++i) {
        names.emplace_back(Name(static_cast<JobState>(i)));
      }
      return absl::InvalidArgumentError(absl::StrCat("state \"", word, "\" is not a job state (",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    f.states.insert(*s);
  }
  return absl::OkStatus();
}

bool NameMatches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return absl::StartsWith(name, absl::string_view(pattern).substr(0, pattern.size() - 1));
  }
  return pattern == name;
}

// Whether `lower` (lowercase) occurs, ignoring case, in the job's name, submitter or command.
bool TextMatches(const std::string& lower, const JobRecord& job) {
  auto in = [&](const std::string& s) {
    return absl::StrContains(absl::AsciiStrToLower(s), lower);
  };
  return in(job.spec.name) || in(job.submitted_by) ||
         std::any_of(job.spec.command.begin(), job.spec.command.end(), in);
}

}  // namespace

const std::vector<std::string>& JobFilter::TextKeys() {
  static const std::vector<std::string> keys = {"user", "tenant", "project", "queue",
                                                "node", "name",   "kind",    "text"};
  return keys;
}

bool JobFilter::empty() const {
  return states.empty() && user.empty() && tenant.empty() && project.empty() && queue.empty() &&
         node.empty() && name.empty() && kind.empty() && text.empty() && since_us == 0;
}

bool JobFilter::WantsEnded() const {
  return std::any_of(states.begin(), states.end(), [](JobState s) { return IsFinal(s); });
}

bool JobFilter::Matches(const JobRecord& job) const {
  if (!states.empty() && states.count(job.state) == 0) return false;
  if (!user.empty() && job.submitted_by != user) return false;
  if (!tenant.empty() && job.spec.tenant != tenant) return false;
  if (!project.empty() && job.spec.project != project) return false;
  if (!queue.empty() && job.spec.queue != queue) return false;
  if (!name.empty() && !NameMatches(name, job.spec.name)) return false;
  if (!kind.empty() && job.spec.kind != kind) return false;
  if (!text.empty() && !TextMatches(text, job)) return false;
  if (since_us > 0 && job.created_us < since_us) return false;
  if (!node.empty()) {
    auto on = [&](const auto& r) { return r.node == node; };
    bool now = std::any_of(job.replicas.begin(), job.replicas.end(), on);
    bool before = std::any_of(job.attempts.begin(), job.attempts.end(), [&](const auto& a) {
      return std::any_of(a.replicas.begin(), a.replicas.end(), on);
    });
    if (!now && !before) return false;
  }
  return true;
}

absl::StatusOr<JobFilter> JobFilter::FromParams(
    const std::function<std::optional<std::string>(const char*)>& param) {
  JobFilter f;
  if (auto s = param("state"); s) {
    if (absl::Status st = AddStates(f, *s); !st.ok()) return st;
  }
  for (const std::string& key : TextKeys()) {
    if (auto v = param(key.c_str()); v) *Field(f, key) = *v;
  }
  f.text = absl::AsciiStrToLower(f.text);  // once, not per job matched
  if (auto since = param("since"); since) {
    if (!absl::SimpleAtoi(*since, &f.since_us) || f.since_us < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("since: \"", *since, "\" is not a time in microseconds since the epoch"));
    }
  }
  return f;
}

absl::StatusOr<JobFilter> JobFilter::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("filter: must be an object");
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const bool known = key == "state" || key == "states" || key == "since" ||
                       std::any_of(TextKeys().begin(), TextKeys().end(),
                                   [&](const std::string& k) { return key == k; });
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "filter.", key,
          ": not a filter (state, states, user, tenant, project, queue, node, name, kind, text, "
          "since)"));
    }
    const bool is_list = key == "states";
    if (key == "since" ? !value.is_number_integer()
        : is_list      ? !value.is_array()
                       : !value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("filter.", key, ": must be ",
                                                     key == "since" ? "microseconds since the epoch"
                                                     : is_list      ? "a list of states"
                                                                    : "a string"));
    }
  }
  std::vector<std::string> states;
  for (const auto& s : j.value("states", nlohmann::json::array())) {
    if (!s.is_string()) return absl::InvalidArgumentError("filter.states: must be strings");
    states.push_back(s.get<std::string>());
  }
  if (j.contains("state")) states.push_back(j["state"].get<std::string>());
  return FromParams([&](const char* key) -> std::optional<std::string> {
    if (std::string(key) == "state") {
      if (states.empty()) return std::nullopt;
      return absl::StrJoin(states, ",");
    }
    if (!j.contains(key)) return std::nullopt;
    if (std::string(key) == "since") return std::to_string(j[key].get<int64_t>());
    return j[key].get<std::string>();
  });
}

}  // namespace carve
