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
  EXPECT_THAT(Error(with("gpus", 8)), HasSubstr("gpus: must be {model: H100, count: 4}"));
  EXPECT_THAT(Error(with("size", 8)), HasSubstr("size: is not a field of a reservation"));
}

// gpus: devices by count, instead of nodes: whole GPUs, MIG instances or GPUs' worth of shares.
TEST(ReservationConfigTest, GpusByCountNameWhatIsWrong) {
  auto gpus = [](json g, bool keep_nodes = false) {
    json d = Doc();
    if (!keep_nodes) d.erase("nodes");
    d["gpus"] = std::move(g);
    return d;
  };
  auto whole = Decode(gpus({{"model", "H100"}, {"count", 4}}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->GpusText(), "4 H100 GPUs");
  EXPECT_FALSE(whole->Covers("n-1", "default")) << "it holds devices, not nodes";
  auto mig = Decode(gpus({{"model", "A100-80GB"}, {"mig", "1g.10gb"}, {"count", 14}}));
  ASSERT_TRUE(mig.ok()) << mig.status();
  EXPECT_EQ(mig->GpusText(), "14 A100-80GB 1g.10gb instances");
  auto shares = Decode(gpus({{"model", "L40S"}, {"shares", 2.5}}));
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(shares->gpus->share_milli, 2500);
  EXPECT_EQ(shares->GpusText(), "2.5 L40S GPUs of shares");
  EXPECT_THAT(Error(gpus({{"count", 4}})), HasSubstr("gpus.model: is required"));
  EXPECT_THAT(Error(gpus({{"model", "H100"}})), HasSubstr("gpus.count: is required"));
  EXPECT_THAT(Error(gpus({{"model", "H100"}, {"count", 0}})),
              HasSubstr("gpus.count: must be a whole number from 1"));
  EXPECT_THAT(Error(gpus({{"model", "H100"}, {"count", 2.5}})),
              HasSubstr("gpus.count: must be a whole number"));
  EXPECT_THAT(Error(gpus({{"model", "L40S"}, {"shares", 1}, {"count", 1}})),
              HasSubstr("gpus.shares: counts GPUs' worth of shares"));
  EXPECT_THAT(Error(gpus({{"model", "L40S"}, {"shares", -1}})), HasSubstr("gpus.shares: must be"));
  EXPECT_THAT(Error(gpus({{"model", "H100"}, {"count", 1}, {"size", 1}})),
              HasSubstr("gpus.size: is not a field of gpus"));
  EXPECT_THAT(Error(gpus({{"model", "H100"}, {"count", 1}}, true)),
              HasSubstr("gpus: a reservation holds named nodes or GPUs by count, not both"));
  // Never an overlap of nodes: each picks devices no other holds at that time (the view).
  ReservationConfig a = *whole, b = *whole;
  b.name = "b";
  EXPECT_FALSE(Overlap(a, b));
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
  ReservationView At(int64_t now) const {
    return ReservationView({launch_}, nodes_, {}, now, catalog_);
  }
  std::vector<Taint> Tolerated(const ReservationView& v, const std::string& tenant,
                               bool preemptible, int64_t max_runtime_us) const {
    ReplicaRequest r;
    v.Tolerate(r, tenant, "default", preemptible, max_runtime_us);
    return r.tolerations;
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
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
}

TEST_F(ReservationViewTest, ActiveTheHolderAndPreemptibleBorrowers) {
  const ReservationView v = At(kStart);
  const Taint active{kReservationTaint, "launch"};
  EXPECT_THAT(v.TaintsOf("n-1"), ElementsAre(active));
  EXPECT_THAT(Tolerated(v, "acme", false, 0), ElementsAre(active));
  EXPECT_THAT(Tolerated(v, "globex", true, 0), ElementsAre(active));  // a borrower
  EXPECT_TRUE(Tolerated(v, "globex", false, 0).empty()) << "one that cannot be preempted";
  EXPECT_THAT(v.Holds("acme", "default"), ElementsAre("launch"));
  EXPECT_EQ(v.Borrows("globex", "default", {{"n-2", {0}}, {"n-1", {}}}), "launch");
  EXPECT_EQ(v.Borrows("globex", "default", {{"n-2", {0}}}), "");
  EXPECT_EQ(v.Borrows("acme", "default", {{"n-1", {0}}}), "");
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

// Nodes with GPUs, as an agent registers them.
NodeRecord WithGpus(const std::string& model, const std::string& mode, int count,
                    bool dynamic = false) {
  NodeRecord rec;
  for (int i = 0; i < count; ++i) {
    DiscoveredGpu g;
    g.index = i;
    g.model = model;
    g.mode = mode;
    g.dynamic_layout = dynamic;
    rec.gpus.push_back(g);
  }
  return rec;
}

// A reservation of gpus picks devices of its model and mode in node and device order, skips
// nodes held whole and devices an earlier reservation holds at the same time, taints only them,
// and keeps its picks when an earlier one ends.
TEST_F(ReservationViewTest, GpusByCountArePickedDeviceByDevice) {
  nodes_.clear();
  nodes_["a"] = WithGpus("H100", "exclusive", 2);
  nodes_["b"] = WithGpus("H100", "exclusive", 4);
  nodes_["c"] = WithGpus("H100", "exclusive", 4);
  nodes_["d"] = WithGpus("L40S", "exclusive", 4);
  ReservationConfig whole_a = launch_;  // node a, whole, over the same window
  whole_a.name = "node-a";
  whole_a.nodes = {"a"};
  ReservationConfig first = launch_;
  first.name = "first";
  first.nodes.clear();
  first.gpus = ReservationConfig::Gpus{"H100", "", 3, 0};
  ReservationConfig second = first;  // starts an hour later, overlapping
  second.name = "second";
  second.start_us += 3600 * kSecond;
  second.end_us += 3600 * kSecond;
  const std::vector<ReservationConfig> all = {whole_a, second, first};
  const ReservationView v(all, nodes_, {}, kStart, catalog_);
  EXPECT_THAT(v.NodesOf(first), ElementsAre("b"));
  EXPECT_TRUE(v.HoldsDevice(first, "b", 2));
  EXPECT_FALSE(v.HoldsDevice(first, "b", 3));
  EXPECT_THAT(v.NodesOf(second), ElementsAre("b", "c"));
  EXPECT_TRUE(v.HoldsDevice(second, "b", 3));
  EXPECT_TRUE(v.HoldsDevice(second, "c", 1));
  EXPECT_FALSE(v.HoldsDevice(second, "c", 2));
  EXPECT_EQ(v.CoverOf(second).covered, 3);
  const Taint active{kReservationTaint, "first"}, ahead{kReservationAheadTaint, "second"};
  EXPECT_THAT(v.DeviceTaintsOf("b", 0), ElementsAre(active));
  EXPECT_THAT(v.DeviceTaintsOf("b", 3), ElementsAre(ahead));
  EXPECT_TRUE(v.DeviceTaintsOf("c", 2).empty());
  EXPECT_TRUE(v.TaintsOf("b").empty()) << "the node itself is not held";
  const Node b = v.Build(catalog_, "b", nodes_["b"], {});
  EXPECT_TRUE(b.taints.empty());
  EXPECT_THAT(b.devices[1].taints, ElementsAre(active));
  EXPECT_THAT(b.devices[3].taints, ElementsAre(ahead));
  EXPECT_EQ(v.ActiveOn("b", 1)->name, "first");
  EXPECT_EQ(v.ActiveOn("b", 3), nullptr) << "second is still ahead";
  EXPECT_EQ(v.Borrows("globex", "default", {{"b", {3}}}), "");
  EXPECT_EQ(v.Borrows("globex", "default", {{"b", {3, 0}}}), "first");
  // Once `first` is over, `second` keeps the devices it had.
  const ReservationView later(all, nodes_, {}, first.end_us, catalog_);
  EXPECT_TRUE(later.DeviceTaintsOf("b", 0).empty());
  EXPECT_TRUE(later.HoldsDevice(second, "b", 3));
  EXPECT_FALSE(later.HoldsDevice(second, "b", 0));
  EXPECT_THAT(v.DevicesOf(first), ElementsAre("b/0", "b/1", "b/2"));
  // A node declared dead gives nothing: the picks go on past it.
  nodes_["b"].state = NodeRecordState::kDead;
  const ReservationView dead(all, nodes_, {}, kStart, catalog_);
  EXPECT_THAT(dead.DevicesOf(first), ElementsAre("c/0", "c/1", "c/2"));
}

TEST_F(ReservationViewTest, MigInstancesAndSharesCountInTheirUnits) {
  nodes_.clear();
  nodes_["m"] = WithGpus("A100-80GB", "partition", 3, true);
  nodes_["s"] = WithGpus("L40S", "shared", 3);
  ReservationConfig mig = launch_;
  mig.nodes.clear();
  mig.gpus = ReservationConfig::Gpus{"A100-80GB", "1g.10gb", 9, 0};  // 7 per GPU: two GPUs
  ReservationConfig shares = mig;
  shares.name = "shares";
  shares.gpus = ReservationConfig::Gpus{"L40S", "", 0, 1500};  // two GPUs' shares
  ReservationConfig short_of = mig;
  short_of.name = "short";
  short_of.gpus = ReservationConfig::Gpus{"A100-80GB", "3g.40gb", 4, 0};  // 2 per GPU, 1 left
  const ReservationView v({mig, shares, short_of}, nodes_, {}, kStart, catalog_);
  EXPECT_EQ(v.CoverOf(mig).covered, 14);
  EXPECT_EQ(v.CoverOf(mig).devices, 2);
  EXPECT_EQ(v.CoverOf(shares).covered, 2000);
  EXPECT_EQ(v.CoverOf(shares).devices, 2);
  EXPECT_TRUE(v.HoldsDevice(shares, "s", 1));
  EXPECT_FALSE(v.HoldsDevice(shares, "s", 2));
  EXPECT_EQ(v.CoverOf(short_of).asked, 4);
  EXPECT_EQ(v.CoverOf(short_of).covered, 2) << "one GPU left, two 3g instances on it";
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
  // Devices held by a reservation of gpus are counted as GPUs.
  Node gpus;
  gpus.name = "n-4";
  gpus.devices.resize(2);
  for (Device& d : gpus.devices) d.model = *catalog.Find("H200");
  gpus.devices[0].taints.push_back({kReservationTaint, "eval"});
  gpus.devices[1].taints.push_back({kReservationTaint, "eval"});
  cluster.AddNode(std::move(gpus));
  EXPECT_EQ(ReservationsHoldingBack(CountReservationTaints(cluster), {}, r),
            "reservation eval (2 GPUs)");
  EXPECT_EQ(ReservationsHoldingBack(CountReservationTaints(cluster), {"eval"}, r),
            "2 GPUs reserved for another tenant");
}

}  // namespace
}  // namespace carve
