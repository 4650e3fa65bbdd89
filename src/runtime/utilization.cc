#include "runtime/utilization.h"

#include <algorithm>

namespace carve {

using json = nlohmann::json;

json UtilizationCell::ToJson() const {
  return {{"installed", installed},
          {"online", online},
          {"schedulable", schedulable},
          {"busy", busy},
          {"busy_reported", busy_reported}};
}

UtilizationCell UtilizationCell::FromJson(const json& j) {
  UtilizationCell c;
  c.installed = j.value("installed", 0.0);
  c.online = j.value("online", 0.0);
  c.schedulable = j.value("schedulable", 0.0);
  c.busy = j.value("busy", 0.0);
  c.busy_reported = j.value("busy_reported", 0.0);
  return c;
}

void UtilizationCell::Add(const UtilizationCell& o) {
  installed += o.installed;
  online += o.online;
  schedulable += o.schedulable;
  busy += o.busy;
  busy_reported += o.busy_reported;
}

void UtilizationLedger::Accrue(const Key& key, int64_t from, int64_t to,
                               const UtilizationCell& per_us) {
  while (from < to) {
    int64_t bucket = from - from % kBucketUs;
    int64_t end = std::min(to, bucket + kBucketUs);
    double dt = static_cast<double>(end - from);
    UtilizationCell& c = buckets[bucket][key];
    c.installed += per_us.installed * dt;
    c.online += per_us.online * dt;
    c.schedulable += per_us.schedulable * dt;
    c.busy += per_us.busy * dt;
    c.busy_reported += per_us.busy_reported * dt;
    dirty.insert(bucket);
    from = end;
  }
}

}  // namespace carve
