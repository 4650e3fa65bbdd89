#include "runtime/explain_json.h"

namespace carve {

using json = nlohmann::json;

namespace {

json GateToJson(const GateFacts& g) {
  json out = {{"gate", std::string(ToString(g.gate))}, {"summary", g.summary}};
  switch (g.gate) {
    case Gate::kQuota: {
      const QuotaVerdict& q = g.quota;
      auto amount = [&](int64_t v) { return FormatResourceAmount(q.resource, v); };
      out.update({{"queue", g.queue},
                  {"resource", q.resource},
                  {"requested", amount(q.requested)},
                  {"used", amount(q.used)},
                  {"nominal", amount(q.nominal)},
                  {"borrowable", amount(q.borrowable)},
                  {"available", amount(q.available)},
                  {"reclaimable", q.reclaimable}});
      break;
    }
    case Gate::kGang:
      out.update({{"needed", g.needed}, {"placeable", g.placeable}});
      break;
    case Gate::kPlacement:
      out.update({{"nodes_considered", g.nodes_considered}, {"reasons", g.reasons}});
      break;
    case Gate::kOrder:
      out.update({{"reserved_job", g.reserved_job}, {"reserved_start_us", g.reserved_start_us}});
      break;
    case Gate::kPreemption:
      out["victims"] = g.victims;
      break;
  }
  return out;
}

}  // namespace

json WaitToJson(const WaitExplanation& wait) {
  json gates = json::array();
  json reasons = json::object();
  for (const GateFacts& g : wait.gates) {
    gates.push_back(GateToJson(g));
    if (g.gate == Gate::kPlacement) reasons = g.reasons;
  }
  json ahead = json::array();
  for (const AheadOf& a : wait.ahead) ahead.push_back({{"job", a.job}, {"why", a.why}});
  json out = {{"gate", wait.gates.empty() ? "" : std::string(ToString(wait.gates[0].gate))},
              {"gates", gates},
              {"fix", wait.fix},
              {"position", wait.position},
              {"ahead", ahead},
              {"reserved", wait.reserved},
              {"explanation", wait.Summary()},
              {"reasons", reasons}};
  if (wait.reserved) out["reserved_start_us"] = wait.reserved_start_us;
  return out;
}

}  // namespace carve
