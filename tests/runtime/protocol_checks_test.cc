#include "runtime/protocol_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(ProtocolChecksTest, HeartbeatBodiesHaveTheProtocolsTypes) {
  json good = {
      {"node", "n1"},
      {"replicas",
       {{{"job", 1},
         {"replica", 0},
         {"state", "exited"},
         {"exit_code", nullptr},
         {"signal", 9},
         {"log_truncated_at", 65536},
         {"log_disk", "bounded: ..."},
         {"reclaim", {{"status", "failed"}, {"checks", {{{"ok", false}, {"device", 0}}}}}}}}},
      {"gpus",
       {{{"index", 0}, {"utilization_pct", 40}, {"mig_instances", json::array()}},
        {{"index", 1},
         {"residue",
          {{"processes",
            {{{"pid", 41}, {"uid", 0}, {"command", "x"}, {"memory_mib", 9}, {"state", "defunct"}}}},
           {"unexplained_mib", 512},
           {"used_mib", 1024},
           {"baseline_mib", 512}}}}}},
      {"layouts", json::array()}};
  EXPECT_TRUE(CheckHeartbeatBody(good).ok());
  struct Case {
    json body;
    std::string error;
  };
  std::vector<Case> cases = {
      {json::array(), "body: must be an object"},
      {{{"node", 5}}, "body.node: must be a string"},
      {{{"replicas", {1}}}, "replicas[0]: must be an object"},
      {{{"replicas", {{{"job", "one"}}}}}, "replicas[0].job: must be a whole number"},
      {{{"replicas", {{{"job", 1.5}}}}}, "replicas[0].job"},
      {{{"replicas", {{{"reclaim", {{"checks", {{{"device", "x"}}}}}}}}}},
       "replicas[0].reclaim.checks[0].device"},
      {{{"gpus", {{{"index", 0}, {"mig_instances", {{{"start", "0"}}}}}}}},
       "gpus[0].mig_instances[0].start"},
      {{{"layouts", "none"}}, "layouts: must be a list"},
      {{{"replicas", {{{"log_truncated_at", "64Ki"}}}}}, "replicas[0].log_truncated_at"},
      {{{"replicas", {{{"log_disk", true}}}}}, "replicas[0].log_disk: must be a string"},
      // The node record keeps a GPU's residue as sent: one it could not store is refused here.
      {json::parse(R"({"gpus": [{"index": 0, "residue": {"processes": [{"pid": 7,
           "state": "zombie"}]}}]})"),
       "gpus[0].residue: processes[0].state: unknown state \"zombie\""},
      {json::parse(R"({"gpus": [{"index": 0, "residue": {"unexplained_mib": "lots"}}]})"),
       "gpus[0].residue: "},
  };
  for (const Case& c : cases) {
    absl::Status s = CheckHeartbeatBody(c.body);
    EXPECT_FALSE(s.ok()) << c.body.dump();
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.body.dump();
  }
}

}  // namespace
}  // namespace carve
