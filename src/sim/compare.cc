#include "sim/compare.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace carve::sim {

absl::StatusOr<CompareResult> RunCompare(const CompareOptions& options, std::ostream* progress) {
  if (options.pod_files.empty()) return absl::InvalidArgumentError("no pod lists given");
  if (options.policies.empty()) return absl::InvalidArgumentError("no policies given");
  CompareResult result;
  result.policies = options.policies;
  for (const std::string& pods : options.pod_files) {
    std::string stem = std::filesystem::path(pods).stem().string();
    result.pod_lists.push_back(stem);
    std::vector<CompareCell>& row = result.cells.emplace_back();
    for (const std::string& policy : options.policies) {
      FillOptions fill = options.fill;
      fill.pods_path = pods;
      fill.policy = policy;
      auto r = RunFill(fill);
      if (!r.ok()) return r.status();
      row.push_back({r->alloc_pct_at_100, r->alloc_pct_at_130});
      if (progress) {
        *progress << absl::StrFormat("%-28s %-12s %6.2f %6.2f\n", stem, policy, r->alloc_pct_at_100,
                                     r->alloc_pct_at_130);
      }
      if (!options.json_dir.empty()) {
        std::filesystem::create_directories(options.json_dir);
        std::ofstream out(absl::StrCat(options.json_dir, "/", stem, ".", policy, ".json"));
        out << r->ToJson().dump(2) << "\n";
        if (!out) return absl::InternalError(absl::StrCat(options.json_dir, ": cannot write"));
      }
    }
  }
  return result;
}

void CompareResult::PrintMarkdown(std::ostream& out) const {
  out << "| pod list |";
  for (const std::string& p : policies) out << " " << p << " |";
  out << "\n| --- |";
  for (size_t i = 0; i < policies.size(); ++i) out << " --- |";
  out << "\n";
  for (size_t r = 0; r < pod_lists.size(); ++r) {
    double best100 = 0, best_end = 0;
    for (const CompareCell& c : cells[r]) {
      best100 = std::max(best100, c.at_100);
      best_end = std::max(best_end, c.at_end);
    }
    out << "| " << pod_lists[r] << " |";
    for (const CompareCell& c : cells[r]) {
      auto cell = [](double v, bool best) {
        return best ? absl::StrFormat("**%.2f**", v) : absl::StrFormat("%.2f", v);
      };
      out << " " << cell(c.at_100, c.at_100 == best100) << " / "
          << cell(c.at_end, c.at_end == best_end) << " |";
    }
    out << "\n";
  }
}

}  // namespace carve::sim
