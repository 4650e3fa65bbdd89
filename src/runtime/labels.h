// Node labels: KEY=VALUE pairs that `carve agent --label`, `carve label` and a `kind: node`
// document's `labels:` set, that queues' pools (`pool`) and placement read. An agent's labels are
// what it registered; an admin's sit on top of them and outlive the agent's re-registration.
#ifndef CARVE_RUNTIME_LABELS_H_
#define CARVE_RUNTIME_LABELS_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace carve {

using Labels = std::map<std::string, std::string>;
// An admin's labels: a value sets the label, nullopt removes the agent's label of that key.
using LabelEdits = std::map<std::string, std::optional<std::string>>;

// A key is a name of at most 63 characters (letters, digits, '-', '_', '.', beginning and
// ending with a letter or digit), optionally after a DNS prefix and '/' ("example.com/rack")
// other than Carve's own (carve.io/); a value is empty or such a name. The error names what was
// wrong.
absl::Status CheckLabel(absl::string_view key, absl::string_view value);
// The key alone (a label being removed).
absl::Status CheckLabelKey(absl::string_view key);
// The most labels one node carries (an agent's, and those with an admin's on top): each is
// copied into every scheduling cycle and node listing.
inline constexpr size_t kMaxLabels = 64;
// "KEY=VALUE", checked.
absl::StatusOr<std::pair<std::string, std::string>> ParseLabel(absl::string_view text);
// The labels placement sees: the agent's, with the admin's edits applied.
Labels EffectiveLabels(const Labels& agent, const LabelEdits& admin);
// A pool defined by a label selector (`kind: pool`): the nodes that carry every label of it.
struct PoolSelector {
  std::string name;
  Labels match;
};

// A node's pool, which queues bind to (`pool:`): its label `pool`; else the first pool, by name,
// whose selector its labels match; else "default".
std::string PoolOf(const Labels& labels, const std::vector<PoolSelector>& pools = {});

}  // namespace carve

#endif  // CARVE_RUNTIME_LABELS_H_
