// Reservations as documents and as the scheduler reads them (runtime/reservations.h): the fields
// checked and named, and per phase which nodes are tainted and which jobs tolerate, hold or
// borrow them.
#include "runtime/reservations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/records.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Phase = ReservationConfig::Phase;

constexpr int64_t kSecond = 1'000'000;
// 2026-12-07T08:00:00Z
constexpr int64_t kStart = 1'796'630'400 * kSecond;

json Doc() {
  return {{"kind", "reservation"},
          {"name", "launch"},
          {"tenant", "acme"},
          {"nodes", {"n-1"}},
          {"start", "2026-12-07T08:00:00Z"},
          {"end", "2026-12-07T20:00:00Z"}};
}

absl::StatusOr<ReservationConfig> Decode(const json& doc) {
  return DecodeReservation(doc, [](const std::string& kind, const std::string& name) {
    return (kind == "tenant" && name == "acme") || (kind == "queue" && name == "training");
  });
}

std::string Error(json doc) {
  auto r = Decode(doc);
  return r.ok() ? "accepted" : std::string(r.status().message());
}

TEST(ReservationConfigTest, DecodesTheWindowAndHolder) {
  json doc = Doc();
  doc["queue"] = "training";
  doc["borrowable"] = true;
  auto r = Decode(doc);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->start_us, kStart);
  EXPECT_EQ(r->end_us, kStart + 12 * 3600 * kSecond);
  EXPECT_TRUE(r->borrowable);
  EXPECT_TRUE(r->HeldBy("acme", "training"));
  EXPECT_FALSE(r->HeldBy("acme", "default"));
  EXPECT_FALSE(r->HeldBy("globex", "training"));
  EXPECT_EQ(r->PhaseAt(kStart - 1), Phase::kAhead);
  EXPECT_EQ(r->PhaseAt(kStart), Phase::kActive);
  EXPECT_EQ(r->PhaseAt(r->end_us), Phase::kOver);
}

TEST(ReservationConfigTest, EveryRefusalNamesTheField) {
  auto with = [](const char* key, json v) {
    json d = Doc();
    if (v.is_null()) {
      d.erase(key);
    } else {
      d[key] = v;
    }
    return d;
  };
  EXPECT_EQ(Error(with("tenant", "globex")), "tenant: no tenant \"globex\"");
  EXPECT_EQ(Error(with("tenant", nullptr)), "tenant: is required: the tenant that holds it");
  EXPECT_EQ(Error(with("queue", "nope")), "queue: no queue \"nope\"");
  EXPECT_THAT(Error(with("nodes", nullptr)), HasSubstr("nodes: a reservation holds nodes"));
  EXPECT_EQ(Error(with("nodes", {"n-1", "n-1"})), "nodes[1]: \"n-1\" is named twice");
  EXPECT_EQ(Error(with("nodes", {7})), "nodes[0]: must be a node name");
  EXPECT_THAT(Error(with("start", "tomorrow")), HasSubstr("start: \"tomorrow\" is not a UTC time"));
  EXPECT_THAT(Error(with("end", nullptr)), HasSubstr("end: is required"));
  EXPECT_EQ(Error(with("end", "2026-12-07T08:00:00Z")), "end: must be after start");
  EXPECT_EQ(Error(with("end", "2300-01-01")), "end: \"2300-01-01\" is not between 2000 and 2200");
  EXPECT_THAT(Error(with("end", "infinite-future")), HasSubstr("end: \"infinite-future\""));
  EXPECT_EQ(Error(with("borrowable", "yes")), "borrowable: must be true or false");
  EXPECT_THAT(Error(with("gpus", 8)), HasSubstr("gpus: is not a field of a reservation"));
}

TEST(ReservationConfigTest, OverlapIsTheSameNodeOrPoolAtTheSameTime) {
  ReservationConfig a = *Decode(Doc());
  ReservationConfig b = a;
  b.name = "b";
  EXPECT_TRUE(Overlap(a, b));
  b.start_us = a.end_us;  // back to back
  b.end_us = a.end_us + kSecond;
  EXPECT_FALSE(Overlap(a, b));
  ReservationConfig c = a;
  c.nodes = {"n-2"};
  EXPECT_FALSE(Overlap(a, c));
  a.pool = c.pool = "h200";
  EXPECT_TRUE(Overlap(a, c));
}

class ReservationViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    launch_ = *Decode(Doc());
    launch_.borrowable = true;
    nodes_["n-1"] = NodeRecord{};
    nodes_["n-2"] = NodeRecord{};
  }
  ReservationView At(int64_t now) const { return ReservationView({launch_}, nodes_, {}, now); }
  std::vector<Taint> Tolerated(const ReservationView& v, const std::string& tenant,
                               bool preemptible, int64_t max_runtime_us) const {
    ReplicaRequest r;
    v.Tolerate(r, tenant, "default", preemptible, max_runtime_us);
    return r.tolerations;
  }

  ReservationConfig launch_;
  std::map<std::string, NodeRecord> nodes_;
};

TEST_F(ReservationViewTest, AheadOnlyJobsEndingBeforeTheStartAndTheHolder) {
  const ReservationView v = At(kStart - 60 * kSecond);
  const Taint ahead{kReservationAheadTaint, "launch"};
  EXPECT_THAT(v.TaintsOf("n-1"), ElementsAre(ahead));
  EXPECT_TRUE(v.TaintsOf("n-2").empty());
  EXPECT_THAT(Tolerated(v, "acme", true, 0), ElementsAre(ahead));
  EXPECT_THAT(Tolerated(v, "globex", true, 60 * kSecond), ElementsAre(ahead));  // ends in time
  EXPECT_TRUE(Tolerated(v, "globex", true, 61 * kSecond).empty());
  EXPECT_TRUE(Tolerated(v, "globex", true, 0).empty());  // no max_runtime: never
  EXPECT_TRUE(v.Holds("acme", "default").empty()) << "nothing to take back before the start";
  EXPECT_EQ(ReservationTaints({launch_}, "n-1", "default", kStart - 1), v.TaintsOf("n-1"));
}

TEST_F(ReservationViewTest, ActiveTheHolderAndPreemptibleBorrowers) {
  const ReservationView v = At(kStart);
  const Taint active{kReservationTaint, "launch"};
  EXPECT_THAT(v.TaintsOf("n-1"), ElementsAre(active));
  EXPECT_THAT(Tolerated(v, "acme", false, 0), ElementsAre(active));
  EXPECT_THAT(Tolerated(v, "globex", true, 0), ElementsAre(active));  // a borrower
  EXPECT_TRUE(Tolerated(v, "globex", false, 0).empty()) << "one that cannot be preempted";
  EXPECT_THAT(v.Holds("acme", "default"), ElementsAre("launch"));
  EXPECT_EQ(v.Borrows("globex", "default", {"n-2", "n-1"}), "launch");
  EXPECT_EQ(v.Borrows("globex", "default", {"n-2"}), "");
  EXPECT_EQ(v.Borrows("acme", "default", {"n-1"}), "");
  launch_.borrowable = false;
  EXPECT_TRUE(Tolerated(At(kStart), "globex", true, 0).empty());
  EXPECT_TRUE(At(launch_.end_us).empty()) << "over: nothing left";
}

TEST_F(ReservationViewTest, APoolHoldsEveryNodeOfIt) {
  launch_.nodes.clear();
  launch_.pool = "h200";
  nodes_["n-2"].labels["pool"] = "h200";
  const ReservationView v = At(kStart);
  EXPECT_THAT(v.NodesOf(launch_), ElementsAre("n-2"));
  EXPECT_TRUE(v.TaintsOf("n-1").empty());
}

TEST(ReservationsHoldingBackTest, NamesTheReservationsAReplicaDoesNotTolerate) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  Cluster cluster(&catalog);
  for (const char* name : {"n-1", "n-2", "n-3"}) {
    Node n;
    n.name = name;
    cluster.AddNode(std::move(n));
  }
  cluster.mutable_node(NodeId(0)).taints.push_back({kReservationTaint, "launch"});
  cluster.mutable_node(NodeId(1)).taints.push_back({kReservationTaint, "launch"});
  cluster.mutable_node(NodeId(2)).taints.push_back({"carve.io/maintenance", "1"});
  const ReservationTaintCounts counts = CountReservationTaints(cluster);
  EXPECT_EQ(counts.size(), 1u) << "a maintenance taint is not a reservation's";
  ReplicaRequest r;
  EXPECT_EQ(ReservationsHoldingBack(counts, {}, r), "reservation launch (2 nodes)");
  // Another tenant's reservation: counted, its name (and so its holder's plans) not shown.
  EXPECT_EQ(ReservationsHoldingBack(counts, {"launch"}, r), "2 nodes reserved for another tenant");
  r.tolerations.push_back({kReservationTaint, "launch"});
  EXPECT_EQ(ReservationsHoldingBack(counts, {}, r), "");
}

}  // namespace
}  // namespace carve
