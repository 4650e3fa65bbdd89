#include "runtime/scheduling_grants.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

const GpuCatalog kCatalog = GpuCatalog::BuiltIn();

ConfigObject Decode(const json& doc) {
  auto object =
      DecodeConfig(doc, kCatalog, [](const std::string&, const std::string&) { return true; });
  EXPECT_TRUE(object.ok()) << object.status();
  return *std::move(object);
}

Configuration Objects(const json& docs) {
  Configuration out(&kCatalog);
  for (const json& d : docs) out.Put(Decode(d));
  return out;
}

std::vector<std::string> Names(const std::vector<PriorityClass>& classes) {
  std::vector<std::string> out;
  for (const PriorityClass& c : classes) out.push_back(c.name);
  return out;
}

const json kDocs = json::array({
    {{"kind", "tenant"}, {"name", "acme"}},
    {{"kind", "tenant"}, {"name", "globex"}},
    {{"kind", "queue"}, {"name", "acme-q"}, {"tenants", {"acme"}}},
    {{"kind", "queue"}, {"name", "globex-q"}, {"tenants", {"globex"}}},
    {{"kind", "queue"}, {"name", "shared"}, {"tenants", {"*"}}},
    {{"kind", "queue"}, {"name", "ownerless"}},
    {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
    {{"kind", "project"}, {"name", "pinned"}, {"tenant", "acme"}, {"queues", {"globex-q"}}},
    {{"kind", "priority-class"},
     {"name", "deadline"},
     {"priority", 500},
     {"preemptible", false},
     {"tenants", {"globex"}}},
    {{"kind", "project"},
     {"name", "nlp"},
     {"tenant", "globex"},
     {"max_priority", 300},
     {"allow_non_preemptible", true}},
    {{"kind", "project"},
     {"name", "batch"},
     {"tenant", "acme"},
     {"priority_classes", {"exploratory", "critical"}}},
});

TEST(SchedulingGrantsTest, QueuesBelongToTheirTenantsAndDefaultToEveryone) {
  Configuration objects = Objects(kDocs);
  EXPECT_THAT(UsableQueues(objects, "acme", "vision"), ElementsAre("default", "acme-q", "shared"));
  EXPECT_THAT(UsableQueues(objects, "globex", "nlp"), ElementsAre("default", "globex-q", "shared"));
  EXPECT_FALSE(QueueUsable(objects, "acme", "vision", "globex-q"));
  EXPECT_FALSE(QueueUsable(objects, "acme", "vision", "ownerless"));  // admins only
  EXPECT_FALSE(QueueUsable(objects, "acme", "vision", "missing"));
  EXPECT_TRUE(QueueUsable(objects, "acme", "vision", "default"));
  // A project's list is an admin's grant, and exactly what its jobs may use.
  EXPECT_THAT(UsableQueues(objects, "acme", "pinned"), ElementsAre("globex-q"));
  EXPECT_TRUE(QueueUsable(objects, "acme", "pinned", "globex-q"));
  EXPECT_FALSE(QueueUsable(objects, "acme", "pinned", "default"));
  // An applied `default` queue that names tenants is theirs only.
  objects.Put(Decode({{"kind", "queue"}, {"name", "default"}, {"tenants", {"globex"}}}));
  EXPECT_FALSE(QueueUsable(objects, "acme", "vision", "default"));
  EXPECT_TRUE(QueueUsable(objects, "globex", "nlp", "default"));
}

TEST(SchedulingGrantsTest, ClassesComeFromTheProjectListOrTheClassDocument) {
  Configuration objects = Objects(kDocs);
  EXPECT_THAT(Names(UsableClasses(objects, "acme", "vision")),
              ElementsAre("standard", "exploratory"));
  EXPECT_THAT(Names(UsableClasses(objects, "globex", "nlp")),
              ElementsAre("standard", "exploratory", "deadline"));
  EXPECT_THAT(Names(UsableClasses(objects, "acme", "batch")),
              ElementsAre("exploratory", "critical"));
  EXPECT_EQ(DefaultClass(objects, "acme", "vision"), "standard");
  EXPECT_EQ(DefaultClass(objects, "acme", "batch"), "exploratory");
}

TEST(SchedulingGrantsTest, PriorityIsCappedByTheClassAndTheProject) {
  Configuration objects = Objects(kDocs);
  EXPECT_TRUE(CheckSchedulingCaps(objects, "acme", "vision", "standard", 100, true).ok());
  EXPECT_TRUE(CheckSchedulingCaps(objects, "acme", "vision", "exploratory", 100, true).ok());
  absl::Status high = CheckSchedulingCaps(objects, "acme", "vision", "standard", 1000000, true);
  EXPECT_EQ(high.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(high.message(), HasSubstr("priority: 1000000 exceeds project vision's max_priority "
                                        "100 (the default: the standard class's priority)"));
  EXPECT_THAT(high.message(), HasSubstr("classes allowed: standard (100), exploratory (0)"));
  // max_priority raises the cap; a granted class carries its own priority.
  EXPECT_TRUE(CheckSchedulingCaps(objects, "globex", "nlp", "standard", 300, true).ok());
  EXPECT_FALSE(CheckSchedulingCaps(objects, "globex", "nlp", "standard", 301, true).ok());
  EXPECT_TRUE(CheckSchedulingCaps(objects, "globex", "nlp", "deadline", 500, false).ok());
  EXPECT_TRUE(CheckSchedulingCaps(objects, "acme", "batch", "critical", 1000, false).ok());
}

TEST(SchedulingGrantsTest, ClassesNotGrantedAnswerLikeMissingOnes) {
  Configuration objects = Objects(kDocs);
  absl::Status critical = CheckSchedulingCaps(objects, "acme", "vision", "critical", 1000, false);
  absl::Status deadline = CheckSchedulingCaps(objects, "acme", "vision", "deadline", 500, false);
  absl::Status missing = CheckSchedulingCaps(objects, "acme", "vision", "nope", 100, true);
  EXPECT_EQ(critical.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(critical.message(),
            "priority_class: no class \"critical\" that project vision may use; classes allowed: "
            "standard (100), exploratory (0)");
  EXPECT_EQ(deadline.code(), missing.code());
  EXPECT_THAT(missing.message(), HasSubstr("no class \"nope\" that project vision may use"));
}

TEST(SchedulingGrantsTest, NonPreemptibleNeedsTheProjectOrTheClass) {
  Configuration objects = Objects(kDocs);
  absl::Status pinned = CheckSchedulingCaps(objects, "acme", "vision", "standard", 100, false);
  EXPECT_EQ(pinned.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(pinned.message(), HasSubstr("preemptible: project vision may not run "
                                          "non-preemptible jobs"));
  EXPECT_TRUE(CheckSchedulingCaps(objects, "globex", "nlp", "standard", 100, false).ok());
}

json With(json doc, const json& more) {
  doc.update(more);
  return doc;
}

TEST(SchedulingGrantsTest, ApplyChecksNameTheField) {
  auto exists = [](const std::string& kind, const std::string& name) {
    return (kind == "tenant" && name == "acme") || (kind == "priority-class" && name == "standard");
  };
  auto error = [&](json doc) {
    auto object = DecodeConfig(doc, kCatalog, exists);
    return object.ok() ? std::string("ok") : std::string(object.status().message());
  };
  json queue = {{"kind", "queue"}, {"name", "q"}};
  json project = {{"kind", "project"}, {"name", "p"}, {"tenant", "acme"}};
  json cls = {{"kind", "priority-class"}, {"name", "c"}, {"priority", 5}};
  EXPECT_EQ(error(With(queue, {{"tenants", {"acme", "*"}}})), "ok");
  EXPECT_THAT(error(With(queue, {{"tenants", {"globex"}}})),
              HasSubstr("tenants: no tenant \"globex\""));
  EXPECT_THAT(error(With(cls, {{"tenants", "acme"}})),
              HasSubstr("tenants: must be a list of names"));
  EXPECT_THAT(error(With(project, {{"priority_classes", {"urgent"}}})),
              HasSubstr("priority_classes: no priority-class \"urgent\""));
  EXPECT_THAT(error(With(project, {{"max_priority", "high"}})),
              HasSubstr("max_priority: must be an integer"));
  EXPECT_THAT(error(With(project, {{"allow_non_preemptible", 1}})),
              HasSubstr("allow_non_preemptible: must be true or false"));
}

}  // namespace
}  // namespace carve
