#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace carve::sim {
namespace {

// The columns a row may carry after its layout's: `extra:<name>` (an amount of a named extra
// resource) on either list, and `app` and `max_instance_per_node` on a pod list.
bool OptionalColumn(absl::string_view column, bool pods) {
  if (absl::StartsWith(column, "extra:")) return column.size() > 6;
  return pods && (column == "app" || column == "max_instance_per_node");
}

// Which layout a header has, and the optional columns after it.
struct Header {
  size_t layout = 0;
  std::vector<std::string> optional;
};

// Reads a CSV with a header, checking the header against `expected` layouts (each may be followed
// by optional columns) and handing each row's fields to `row`. Errors carry "file:line".
absl::Status ForEachRow(
    const std::string& path, const std::vector<std::vector<std::string>>& layouts, bool pods,
    const std::function<absl::Status(const std::vector<absl::string_view>&, const Header&)>& row) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string line;
  if (!std::getline(in, line)) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
  std::vector<std::string> columns = absl::StrSplit(absl::StripSuffix(line, "\r"), ',');
  Header header{layouts.size(), {}};
  for (size_t i = 0; i < layouts.size() && header.layout == layouts.size(); ++i) {
    const std::vector<std::string>& l = layouts[i];
    if (columns.size() < l.size() || !std::equal(l.begin(), l.end(), columns.begin())) continue;
    std::vector<std::string> rest(columns.begin() + static_cast<std::ptrdiff_t>(l.size()),
                                  columns.end());
    if (std::all_of(rest.begin(), rest.end(), [&](const std::string& c) {
          return OptionalColumn(c, pods) && std::count(rest.begin(), rest.end(), c) == 1;
        })) {
      header = {i, std::move(rest)};
    }
  }
  if (header.layout == layouts.size()) {
    std::vector<std::string> expected;
    for (const auto& l : layouts) expected.push_back(absl::StrJoin(l, ","));
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":1: unexpected header \"", line, "\"; expected ",
                     absl::StrJoin(expected, " or "), ", then optional columns ",
                     pods ? "app, max_instance_per_node, " : "", "extra:<name> (each once)"));
  }
  const size_t width = layouts[header.layout].size() + header.optional.size();
  for (int number = 2; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripSuffix(line, "\r");
    if (text.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(text, ',');
    absl::Status status = fields.size() != width
                              ? absl::InvalidArgumentError(absl::StrCat(
                                    "expected ", width, " fields, found ", fields.size()))
                              : row(fields, header);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseInt(absl::string_view field, absl::string_view name, int64_t& out) {
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out);
  if (ec != std::errc() || end != field.data() + field.size() || out < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": \"", field, "\" is not a non-negative integer"));
  }
  return absl::OkStatus();
}

// The optional columns of a row (after `base` fields): extra resources (an empty field or 0 is
// none), and on a pod list its application and spread limit.
absl::Status ReadOptional(const std::vector<absl::string_view>& f, size_t base, const Header& h,
                          ExtraAmounts& extra, std::string* app, int* max_per_node) {
  for (size_t i = 0; i < h.optional.size(); ++i) {
    absl::string_view column = h.optional[i], field = f[base + i];
    if (column == "app") {
      *app = std::string(field);
      continue;
    }
    if (field.empty()) continue;
    int64_t amount = 0;
    if (absl::Status s = ParseInt(field, column, amount); !s.ok()) return s;
    if (column == "max_instance_per_node") {
      *max_per_node = static_cast<int>(std::min<int64_t>(amount, 1 << 30));
    } else if (amount > 0) {
      extra.emplace_back(std::string(absl::StripPrefix(column, "extra:")), amount);
    }
  }
  std::sort(extra.begin(), extra.end());
  if (app != nullptr && *max_per_node > 0 && app->empty()) {
    return absl::InvalidArgumentError("max_instance_per_node: a spread limit needs an app");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TraceNode>> ReadNodeList(const std::string& path) {
  std::vector<TraceNode> nodes;
  absl::Status status =
      ForEachRow(path, {{"sn", "cpu_milli", "memory_mib", "gpu", "model"}}, false,
                 [&](const std::vector<absl::string_view>& f, const Header& h) -> absl::Status {
                   TraceNode n;
                   n.name = std::string(f[0]);
                   int64_t gpus = 0;
                   for (auto [field, name, out] : {std::tuple{f[1], "cpu_milli", &n.cpu_milli},
                                                   std::tuple{f[2], "memory_mib", &n.memory_mib},
                                                   std::tuple{f[3], "gpu", &gpus}}) {
                     if (absl::Status s = ParseInt(field, name, *out); !s.ok()) return s;
                   }
                   n.gpus = static_cast<int>(gpus);
                   n.model = f[4] == "nan" ? "" : std::string(f[4]);
                   if (n.gpus > 0 && n.model.empty()) {
                     return absl::InvalidArgumentError("model: a node with GPUs needs a model");
                   }
                   if (absl::Status s = ReadOptional(f, 5, h, n.extra, nullptr, nullptr); !s.ok()) {
                     return s;
                   }
                   nodes.push_back(std::move(n));
                   return absl::OkStatus();
                 });
  if (!status.ok()) return status;
  return nodes;
}

absl::StatusOr<std::vector<TracePod>> ReadPodList(const std::string& path) {
  std::vector<TracePod> pods;
  absl::Status status = ForEachRow(
      path,
      {{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
        "creation_time", "deletion_time", "scheduled_time"},
       {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}},
      true, [&](const std::vector<absl::string_view>& f, const Header& h) -> absl::Status {
        const size_t layout = h.layout;
        TracePod p;
        p.name = std::string(f[0]);
        int64_t num_gpu = 0;
        for (auto [field, name, out] :
             {std::tuple{f[1], "cpu_milli", &p.cpu_milli},
              std::tuple{f[2], "memory_mib", &p.memory_mib}, std::tuple{f[3], "num_gpu", &num_gpu},
              std::tuple{f[4], "gpu_milli", &p.gpu_milli}}) {
          if (absl::Status s = ParseInt(field, name, *out); !s.ok()) return s;
        }
        p.num_gpu = static_cast<int>(num_gpu);
        if (p.gpu_milli > 1000) {
          return absl::InvalidArgumentError(
              absl::StrCat("gpu_milli: ", p.gpu_milli, " is more than one GPU (1000)"));
        }
        if (p.num_gpu > 1 && p.gpu_milli != 1000) {
          return absl::InvalidArgumentError("gpu_milli: a multi-GPU pod must take whole GPUs");
        }
        if ((p.num_gpu == 0) != (p.gpu_milli == 0)) {
          return absl::InvalidArgumentError("num_gpu and gpu_milli must both be zero or neither");
        }
        if (layout == 0 && !f[5].empty() && f[5] != "nan") {
          p.gpu_spec = absl::StrSplit(f[5], '|');
        }
        if (layout == 0) {
          p.qos = std::string(f[6]);
          for (auto [field, name, out] : {std::tuple{f[8], "creation_time", &p.creation_s},
                                          std::tuple{f[9], "deletion_time", &p.deletion_s}}) {
            if (field.empty() || field == "nan") continue;
            if (absl::Status s = ParseInt(field, name, *out); !s.ok()) return s;
          }
        }
        if (absl::Status s =
                ReadOptional(f, layout == 0 ? 11 : 5, h, p.extra, &p.app, &p.max_per_node);
            !s.ok()) {
          return s;
        }
        pods.push_back(std::move(p));
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return pods;
}

}  // namespace carve::sim
