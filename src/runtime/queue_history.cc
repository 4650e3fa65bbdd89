#include "runtime/queue_history.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace carve {

using json = nlohmann::json;

void QueueCell::Add(const QueueCell& o) {
  seconds += o.seconds;
  used += o.used;
  quota += o.quota;
  borrowed += o.borrowed;
  lent += o.lent;
  limited = limited || o.limited;
}

void QueueHistoryLedger::Accrue(const Key& key, int64_t from, int64_t to,
                                const QueueResourceStatus& s) {
  while (from < to) {
    const int64_t bucket = from - from % kBucketUs;
    const int64_t end = std::min(to, bucket + kBucketUs);
    const double dt = static_cast<double>(end - from) / 1e6;
    QueueCell& c = buckets[bucket][key];
    c.seconds += dt;
    c.used += static_cast<double>(s.used) * dt;
    if (s.limited) {
      c.limited = true;
      c.quota += static_cast<double>(s.nominal) * dt;
      c.borrowed += static_cast<double>(s.borrowed) * dt;
      c.lent += static_cast<double>(s.lent) * dt;
    }
    dirty.insert(bucket);
    from = end;
  }
}

void QueueHistoryLedger::Persist(int64_t now, StoreBatch& batch) {
  const int64_t open = now - now % kBucketUs;
  const bool closed = !buckets.empty() && buckets.begin()->first < open;
  if (dirty.empty() || (!closed && now - persisted_us < kPersistUs)) return;
  for (int64_t bucket : dirty) {
    batch.puts.push_back({kKind, Id(bucket), BucketJson(bucket, buckets[bucket]).dump()});
  }
  dirty.clear();
  persisted_us = now;
  buckets.erase(buckets.begin(), buckets.lower_bound(open));
}

std::string QueueHistoryLedger::Id(int64_t bucket) { return absl::StrFormat("%020d", bucket); }

json QueueHistoryLedger::BucketJson(int64_t bucket, const Cells& cells) {
  json out = json::array();
  for (const auto& [key, cell] : cells) {
    json c = cell;
    c["queue"] = key.first;
    c["resource"] = key.second;
    out.push_back(c);
  }
  return {{"bucket_us", bucket}, {"cells", out}};
}

absl::StatusOr<QueueHistoryLedger::Cells> QueueHistoryLedger::CellsFromJson(const json& j) {
  if (!j.is_object() || !j.value("cells", json()).is_array()) {
    return absl::DataLossError("a stored queue_usage bucket has no cells");
  }
  Cells cells;
  for (const json& c : j["cells"]) {
    if (!c.is_object()) return absl::DataLossError("a stored queue_usage cell is not an object");
    try {
      cells[{c.value("queue", ""), c.value("resource", "")}].Add(c.get<QueueCell>());
    } catch (const json::exception& e) {
      return absl::DataLossError(absl::StrCat("a stored queue_usage cell: ", e.what()));
    }
  }
  return cells;
}

double NaturalAmount(const std::string& resource, double units) {
  if (resource == "memory" || absl::StartsWith(resource, "mig/")) return units;
  return units / 1000;  // milli-GPUs, GPU shares and milli-cores
}

std::string NaturalUnit(const std::string& resource) {
  if (resource == "memory") return "MiB";
  if (absl::StartsWith(resource, "mig/")) return "instances";
  if (resource == "cpu") return "cores";
  return "GPUs";
}

int64_t QueueSteps(int64_t from, int64_t to, int64_t step) {
  const int64_t span = to - from;
  if (span <= 0 || step <= 0) return 0;
  return step >= span ? 1 : (span + step - 1) / step;
}

json QueueSeries(const std::map<int64_t, QueueHistoryLedger::Cells>& buckets, int64_t from,
                 int64_t to, int64_t step, const std::function<bool(const std::string&)>& visible) {
  const size_t n = static_cast<size_t>(QueueSteps(from, to, step));
  std::map<QueueHistoryLedger::Key, std::vector<QueueCell>> steps;
  for (auto it = buckets.lower_bound(from); it != buckets.end() && it->first < to; ++it) {
    const size_t i = static_cast<size_t>((it->first - from) / step);
    if (i >= n) break;
    for (const auto& [key, cell] : it->second) {
      if (!visible(key.first)) continue;
      auto& line = steps[key];
      line.resize(n);
      line[i].Add(cell);
    }
  }
  json queues = json::object();
  for (const auto& [key, line] : steps) {
    const std::string& resource = key.second;
    auto average = [&](const QueueCell& c, double QueueCell::*field) -> json {
      if (c.seconds <= 0) return nullptr;
      // (rounded: an average of a constant would read 1.9999999999999998)
      return std::round(NaturalAmount(resource, c.*field / c.seconds) * 1e6) / 1e6;
    };
    bool limited = false;
    for (const QueueCell& c : line) limited = limited || c.limited;
    json points = json::array();
    for (size_t i = 0; i < line.size(); ++i) {
      const QueueCell& c = line[i];
      json p = {{"t_us", from + static_cast<int64_t>(i) * step},
                {"used", average(c, &QueueCell::used)}};
      if (limited) {
        p["quota"] = average(c, &QueueCell::quota);
        p["borrowed"] = average(c, &QueueCell::borrowed);
        p["lent"] = average(c, &QueueCell::lent);
      }
      points.push_back(p);
    }
    queues[key.first][resource] = {
        {"unit", NaturalUnit(resource)}, {"limited", limited}, {"points", points}};
  }
  return {{"from_us", from}, {"to_us", to}, {"step_us", step}, {"queues", queues}};
}

}  // namespace carve
