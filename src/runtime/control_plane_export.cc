// Leaving, or moving in (archive.h): the server's side of `carve export all`.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/archive.h"
#include "runtime/control_plane.h"

namespace carve {

using json = nlohmann::json;

absl::StatusOr<json> ControlPlane::ExportRecords(const std::string& kind, const std::string& after,
                                                 int64_t limit, const Principal& who) const {
  if (who.role != Role::kAdmin) {
    return absl::PermissionDeniedError(
        "an export is for admins: it holds every tenant's jobs and the webhooks' secrets");
  }
  const bool config =
      std::find(std::begin(kConfigKinds), std::end(kConfigKinds), kind) != std::end(kConfigKinds);
  if (!config && !IsArchiveKind(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kind: \"", kind, "\" is not exported; exported: ", absl::StrJoin(kConfigKinds, ", "), ", ",
        absl::StrJoin(kArchiveKinds, ", ")));
  }
  limit = std::clamp<int64_t>(limit, 1, 1000);
  auto page = store_->List(kind, after, limit);
  if (!page.ok()) return page.status();
  json records = json::array();
  for (const StoredRecord& r : *page) {
    json doc = json::parse(r.json, nullptr, false);
    if (doc.is_discarded()) {
      return absl::DataLossError(absl::StrCat("stored ", kind, " ", r.id, " is not JSON"));
    }
    records.push_back({{"id", r.id}, {"doc", std::move(doc)}});
  }
  const std::string next =
      static_cast<int64_t>(page->size()) == limit ? page->back().id : std::string();
  return json{{"kind", kind}, {"records", std::move(records)}, {"next", next}};
}

}  // namespace carve
