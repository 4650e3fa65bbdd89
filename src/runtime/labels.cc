#include "runtime/labels.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace carve {
namespace {

constexpr size_t kMaxName = 63;
constexpr size_t kMaxPrefix = 253;
constexpr absl::string_view kReservedPrefix = "carve.io";

bool IsName(absl::string_view s) {
  if (s.empty() || s.size() > kMaxName) return false;
  if (!absl::ascii_isalnum(s.front()) || !absl::ascii_isalnum(s.back())) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool IsPrefix(absl::string_view s) {
  if (s.empty() || s.size() > kMaxPrefix) return false;
  if (!absl::ascii_isalnum(s.front()) || !absl::ascii_isalnum(s.back())) return false;
  for (char c : s) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

absl::Status CheckLabelKey(absl::string_view key) {
  const size_t slash = key.find('/');
  const absl::string_view name = slash == absl::string_view::npos ? key : key.substr(slash + 1);
  if ((slash != absl::string_view::npos && !IsPrefix(key.substr(0, slash))) || !IsName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label key \"", key,
        "\": a name of at most 63 letters, digits, '-', '_' or '.', beginning and ending with a "
        "letter or digit, optionally after a lowercase DNS prefix and '/' (e.g. pool, "
        "example.com/rack)"));
  }
  if (slash != absl::string_view::npos && key.substr(0, slash) == kReservedPrefix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label key \"", key, "\": the prefix ", kReservedPrefix,
        "/ is Carve's own (the scheduler sets carve.io/node); use another prefix or none"));
  }
  return absl::OkStatus();
}

absl::Status CheckLabel(absl::string_view key, absl::string_view value) {
  if (absl::Status s = CheckLabelKey(key); !s.ok()) return s;
  if (key == "pool" && value.empty()) {
    return absl::InvalidArgumentError(
        "label pool: a pool needs a name (remove the label to put the node in the default pool)");
  }
  if (!value.empty() && !IsName(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label ", key, ": value \"", value,
                     "\": empty, or at most 63 letters, digits, '-', '_' or '.', beginning and "
                     "ending with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("label \"", text, "\": write KEY=VALUE, e.g. pool=train"));
  }
  std::string key(text.substr(0, eq));
  std::string value(text.substr(eq + 1));
  if (absl::Status s = CheckLabel(key, value); !s.ok()) return s;
  return std::make_pair(std::move(key), std::move(value));
}

Labels EffectiveLabels(const Labels& agent, const LabelEdits& admin) {
  Labels out = agent;
  for (const auto& [key, value] : admin) {
    if (value) {
      out[key] = *value;
    } else {
      out.erase(key);
    }
  }
  return out;
}

std::string PoolOf(const Labels& labels, const std::vector<PoolSelector>& pools) {
  if (auto it = labels.find("pool"); it != labels.end()) return it->second;
  for (const PoolSelector& pool : pools) {
    const bool matches = std::all_of(pool.match.begin(), pool.match.end(), [&](const auto& kv) {
      auto it = labels.find(kv.first);
      return it != labels.end() && it->second == kv.second;
    });
    if (matches) return pool.name;
  }
  return "default";
}

}  // namespace carve
