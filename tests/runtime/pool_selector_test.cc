// A pool defined by a label selector (`kind: pool`, runtime/labels.h) in a real control plane:
// the nodes that match are in it, a queue bound to it places there, and the node list says so.
#include <gtest/gtest.h>

#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;

class PoolSelectorTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("pool-selector", {}, [] { return kT0; });
  }
};

TEST_F(PoolSelectorTest, AQueueBoundToASelectedPoolPlacesOnlyOnItsNodes) {
  RegisterH200Node("n-1", 1, kAdmin);
  RegisterH200Node("n-2", 1, kAdmin, {{"tier", "gold"}});
  RegisterH200Node("n-3", 1, kAdmin, {{"tier", "gold"}, {"pool", "b"}});
  auto applied = cp_->Apply(
      json::array({{{"kind", "pool"}, {"name", "gold"}, {"selector", {{"tier", "gold"}}}},
                   {{"kind", "queue"}, {"name", "qg"}, {"pool", "gold"}}}),
      kAdmin);
  ASSERT_TRUE(applied.ok()) << applied.status();
  json pools = json::object();
  for (const json& n : cp_->ListNodes()) pools[n["name"].get<std::string>()] = n["pool"];
  EXPECT_EQ(pools, (json{{"n-1", "default"}, {"n-2", "gold"}, {"n-3", "b"}}));

  json spec = {{"command", {"true"}}, {"queue", "qg"}, {"resources", {{"gpus", 1}}}};
  auto first = cp_->Submit(spec, "", kAdmin);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = cp_->Submit(spec, "", kAdmin);
  ASSERT_TRUE(second.ok()) << second.status();
  auto scheduled = cp_->ScheduleOnce();
  ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  EXPECT_EQ(*scheduled, 1) << cp_->Explain((*first)["id"].get<int64_t>())->dump(2);
  json jobs = Jobs(false);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0]["replicas"][0]["node"], "n-2") << jobs[0].dump(2);
  EXPECT_EQ(jobs[1]["state"], "queued");
}

}  // namespace
}  // namespace carve
