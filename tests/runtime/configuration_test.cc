// The applied configuration as typed records (runtime/configuration.h): decoded once when applied
// or loaded, the same after a restart, and a stored document that cannot be read is refused at
// start, naming it. A real control plane and SQLite store.
#include "runtime/configuration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/control_plane.h"
#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

const GpuCatalog kCatalog = GpuCatalog::BuiltIn();

bool Anything(const std::string&, const std::string&) { return true; }

TEST(ConfigurationTest, AQueueIsDecodedOnceIntoItsTypedRecord) {
  auto object = DecodeConfig({{"kind", "queue"},
                              {"name", "team-a"},
                              {"pool", "west"},
                              {"cohort", "research"},
                              {"weight", 2.5},
                              {"quota", {{"gpus", 8}, {"gpus/H200", "4"}, {"memory", "64Gi"}}},
                              {"borrowing_limit", {{"gpus", 2}}},
                              {"tenants", {"acme", "*"}},
                              {"idle_after", "30m"},
                              {"idle_action", "stop"}},
                             kCatalog, Anything);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->kind(), "queue");
  EXPECT_EQ(object->name(), "team-a");
  const QueueConfig& q = std::get<QueueConfig>(object->record);
  EXPECT_EQ(q.spec.pool, "west");
  EXPECT_EQ(q.spec.cohort, "research");
  EXPECT_EQ(q.spec.weight, 2.5);
  EXPECT_EQ(ResourcesToJson(q.spec.nominal),
            json({{"gpus", "8"}, {"gpus/H200-141GB", "4"}, {"memory", "64Gi"}}));
  EXPECT_EQ(ResourcesToJson(q.spec.borrowing_limit), json({{"gpus", "2"}}));
  EXPECT_EQ(q.tenants, (std::vector<std::string>{"acme", "*"}));
  EXPECT_EQ(q.idle_after_us, int64_t{30} * 60 * 1000000);
  EXPECT_EQ(q.idle_after, "30m");
  EXPECT_EQ(q.idle_action, IdleAction::kStop);
}

TEST(ConfigurationTest, EveryRefusalNamesTheField) {
  auto error = [](const json& doc) {
    auto object = DecodeConfig(doc, kCatalog, Anything);
    return object.ok() ? std::string("ok") : std::string(object.status().message());
  };
  json q = {{"kind", "queue"}, {"name", "q"}};
  EXPECT_EQ(error(q), "ok");
  EXPECT_THAT(error({{"kind", "queue"}, {"name", "q"}, {"quota", {{"gpus/Z9", 1}}}}),
              HasSubstr("quota.gpus/Z9: "));
  EXPECT_EQ(error({{"kind", "queue"}, {"name", "q"}, {"lending_limit", {{"gpus", 1}}}}),
            "lending_limit: only a queue in a cohort borrows or lends; set cohort");
  EXPECT_EQ(error({{"kind", "queue"},
                   {"name", "q"},
                   {"cohort", "c"},
                   {"quota", {{"gpus", 1}}},
                   {"borrowing_limit", {{"cpu", 1}}}}),
            "borrowing_limit.cpu: has no quota for this resource");
  EXPECT_THAT(error({{"kind", "queue"}, {"name", "q"}, {"idle_after", 30}}),
              HasSubstr("idle_after: must be a duration"));
  EXPECT_EQ(error({{"kind", "queue"}, {"name", "q"}, {"idle_action", "pause"}}),
            "idle_action: must be flag or stop");
  EXPECT_EQ(error({{"kind", "queue"}, {"name", "q"}, {"weight", 0}}),
            "weight: must be a positive number");
  EXPECT_THAT(error({{"kind", "queue"}, {"name", "q"}, {"colour", "red"}}),
              HasSubstr("colour: unknown field; known: borrowing_limit, cohort, description"));
  EXPECT_THAT(error({{"kind", "tenant"}, {"name", "t"}, {"uid", 0}}),
              HasSubstr("uid: must be an integer from 1 to 4294967294"));
  EXPECT_EQ(error({{"kind", "priority-class"}, {"name", "c"}}),
            "priority: is required, an integer");
  EXPECT_EQ(error({{"kind", "priority-class"}, {"name", "c"}, {"priority", 2000000}}),
            "priority: must be an integer in [-1000000, 1000000]");
  EXPECT_THAT(error({{"kind", "queue"}, {"name", "Team_A"}}),
              HasSubstr("name: \"Team_A\" must be lowercase letters, digits and dashes"));
  EXPECT_THAT(error({{"kind", "cluster"}, {"name", "p"}}),
              HasSubstr("kind: \"cluster\" is not tenant, project, queue, priority-class, pool, "
                        "notification, price, reservation or node"));
  EXPECT_THAT(error({{"kind", "pool"}, {"name", "p"}}), HasSubstr("selector: is required"));
  EXPECT_EQ(error({{"kind", "pool"}, {"name", "p"}, {"selector", {{"pool", "a"}}}}),
            "selector.pool: a node's pool label already names its pool; select by other labels");
  EXPECT_EQ(error({{"kind", "pool"}, {"name", "p"}, {"selector", {{"tier", 3}}}}),
            "selector.tier: must be a string");
  EXPECT_THAT(error({{"kind", "pool"}, {"name", "p"}, {"selector", {{"tier", "two words"}}}}),
              HasSubstr("selector: label tier: value \"two words\""));
}

class ConfigurationRestartTest : public ControlPlaneFixture {
 protected:
  void SetUp() override {
    OpenPlane("configuration", {}, [] { return kT0; });
  }
  absl::StatusOr<std::unique_ptr<ControlPlane>> Restart() {
    cp_.reset();
    ControlPlane::Options options;
    options.log_dir = (dir_ / "logs").string();
    return ControlPlane::Open(store_.get(), &catalog_, options, [] { return kT0; });
  }
  void Reopen() {
    auto cp = Restart();
    ASSERT_TRUE(cp.ok()) << cp.status();
    cp_ = *std::move(cp);
  }
  json Listed() {
    json out = json::object();
    for (const char* kind : kConfigKinds) out[kind] = cp_->ListObjects(kind);
    return out;
  }
};

// Every configuration kind applied, then a restart: the same documents are listed, and a member's
// submission is resolved the same way (its project's queue and class, the class's priority and
// preemptibility).
TEST_F(ConfigurationRestartTest, EveryKindAppliedIsTheSameAfterARestart) {
  json docs = json::array({{{"kind", "priority-class"},
                            {"name", "deadline"},
                            {"priority", 500},
                            {"preemptible", false},
                            {"tenants", {"acme"}}},
                           {{"kind", "project"},
                            {"name", "vision"},
                            {"tenant", "acme"},
                            {"queues", {"team-a"}},
                            {"priority_classes", {"deadline", "standard"}},
                            {"max_priority", 700}},
                           {{"kind", "tenant"}, {"name", "acme"}, {"uid", 4242}, {"gid", 4242}},
                           {{"kind", "queue"},
                            {"name", "team-a"},
                            {"quota", {{"gpus", 4}}},
                            {"tenants", {"acme"}},
                            {"idle_after", "1h"}},
                           {{"kind", "pool"}, {"name", "gold"}, {"selector", {{"tier", "gold"}}}}});
  ASSERT_TRUE(cp_->Apply(docs, kAdmin).ok());
  Principal member{"ana", Role::kMember, "acme", "vision", "t-ana"};
  json spec = {{"name", "train"},
               {"tenant", "acme"},
               {"project", "vision"},
               {"queue", "team-a"},
               {"priority_class", "deadline"},
               {"command", {"true"}}};
  auto first = cp_->Submit(spec, "", member);
  ASSERT_TRUE(first.ok()) << first.status();
  json before = Listed();

  Reopen();
  EXPECT_EQ(Listed(), before);
  auto second = cp_->Submit(spec, "", member);
  ASSERT_TRUE(second.ok()) << second.status();
  for (const char* field : {"priority_class", "priority", "preemptible", "queue"}) {
    EXPECT_EQ((*second)["spec"][field], (*first)["spec"][field]) << field;
  }
  EXPECT_EQ((*second)["spec"]["priority"], 500);
  EXPECT_EQ((*second)["spec"]["preemptible"], false);
  // The project's queue list holds after the restart too.
  json elsewhere = spec;
  elsewhere["queue"] = "default";
  EXPECT_THAT(cp_->Submit(elsewhere, "", member).status().message(),
              HasSubstr("project vision may use: team-a"));
}

// A stored queue document that cannot be read (a damaged disk, a hand edit) was loaded without a
// word, as a JSON value no look-up could use (nlohmann's value() throws on it), to be read first
// by the scheduling cycle. A restart now refuses it, naming it.
TEST_F(ConfigurationRestartTest, AStoredDocumentThatCannotBeReadIsRefusedAtStart) {
  ASSERT_TRUE(cp_->Apply(json::array({{{"kind", "queue"}, {"name", "team-a"}}}), kAdmin).ok());
  Reopen();  // what was applied loads
  cp_.reset();
  StoreBatch damage;
  damage.puts.push_back({"queue", "team-a", "{\"kind\": \"queue\", \"name\": \"team-a\", \"quo"});
  ASSERT_TRUE(store_->Commit(std::move(damage)).ok());
  auto cp = Restart();
  ASSERT_FALSE(cp.ok());
  EXPECT_EQ(cp.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cp.status().message(), HasSubstr("stored queue \"team-a\" cannot be read"));

  StoreBatch renamed;
  renamed.puts.push_back({"queue", "team-a", R"({"kind": "queue", "name": "team-b"})"});
  ASSERT_TRUE(store_->Commit(std::move(renamed)).ok());
  cp = Restart();
  ASSERT_FALSE(cp.ok());
  EXPECT_THAT(cp.status().message(), HasSubstr("the document is queue/team-b"));
}

}  // namespace
}  // namespace carve
