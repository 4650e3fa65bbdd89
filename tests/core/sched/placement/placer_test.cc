#include "core/sched/placement/placer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>

#include "core/sched/placement/policies.h"

namespace carve {
namespace {

using ::testing::HasSubstr;

// A mixed cluster: exclusive H200, shared L40S, A100-80GB with dynamic and static MIG layouts.
Cluster MixedCluster(const GpuCatalog* catalog, int nodes, std::mt19937_64& rng) {
  Cluster cluster(catalog);
  GpuModelId h200 = *catalog->Find("H200"), l40s = *catalog->Find("L40S"),
             a100 = *catalog->Find("A100-80GB");
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "node-" + std::to_string(i);
    n.capacity = {CpuMilli(64000 + 32000 * (i % 3)), MemMib(524288), MemMib(1 << 20),
                  NetMbps(100000)};
    if (i % 2 == 0) n.capacity.extra = {{"nvme_gb", 3000}, {"rdma_gbps", 400}};
    int kind = static_cast<int>(rng() % 4);
    for (int g = 0; g < 4; ++g) {
      Device d;
      d.model = kind == 0 ? h200 : kind == 1 ? l40s : a100;
      d.mode = kind == 0   ? DeliveryMode::kExclusive
               : kind == 1 ? DeliveryMode::kShared
                           : DeliveryMode::kPartition;
      d.dynamic_layout = kind == 2;
      if (kind == 3) {  // static layout: 3g + 2g + 1g + 1g
        for (auto [p, start] :
             {std::pair{"3g.40gb", 4}, {"2g.20gb", 2}, {"1g.10gb", 0}, {"1g.10gb", 1}}) {
          d.instances.push_back({*catalog->FindProfile(a100, p), start, false, false});
        }
      }
      n.devices.push_back(d);
    }
    cluster.AddNode(std::move(n));
  }
  return cluster;
}

JobRequest RandomJob(const GpuCatalog& catalog, std::mt19937_64& rng) {
  JobRequest job;
  job.replicas = 1 + static_cast<int>(rng() % 3 == 0 ? rng() % 3 : 0);
  ReplicaRequest& r = job.replica;
  r.resources.cpu = CpuMilli(1000 * static_cast<int64_t>(1 + rng() % 24));
  r.resources.memory = MemMib(1024 * static_cast<int64_t>(1 + rng() % 64));
  switch (rng() % 4) {
    case 0:
      r.gpu = {DeliveryMode::kExclusive, static_cast<int>(rng() % 5), kWholeGpu, {}, ""};
      break;
    case 1:
      r.gpu = {DeliveryMode::kShared, 1, GpuMilli(100 * static_cast<int64_t>(1 + rng() % 9)),
               MemMib(1024 * static_cast<int64_t>(rng() % 16)), ""};
      break;
    default: {
      static const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"};
      r.gpu = {
          DeliveryMode::kPartition, 1 + static_cast<int>(rng() % 2), {}, {}, kProfiles[rng() % 5]};
      r.allowed_models = {*catalog.Find("A100-80GB")};
    }
  }
  // Now and then extra resources, and an application spread over nodes (at most 1 or 2 of its
  // replicas on one node, over every job of the app).
  if (rng() % 4 == 0)
    r.resources.extra = {{"rdma_gbps", 100 * static_cast<int64_t>(1 + rng() % 3)}};
  if (rng() % 4 == 0) {
    r.app = "app-" + std::to_string(rng() % 3);
    r.max_per_node = 1 + static_cast<int>(rng() % 2);
  }
  return job;
}

void ExpectNoOvercommit(const Cluster& cluster) {
  for (const Node& n : cluster.nodes()) {
    EXPECT_GE(n.free.cpu.units(), 0) << n.name;
    EXPECT_GE(n.free.memory.units(), 0) << n.name;
    for (const ExtraResource& x : n.free.extra) EXPECT_GE(x.amount, 0) << n.name << " " << x.name;
    // Each job's app has a limit of 1 or 2: never more than 2 of one app on a node.
    for (const auto& [app, count] : n.apps) EXPECT_LE(count, 2) << n.name << " " << app;
    for (const Device& d : n.devices) {
      EXPECT_GE(d.free_compute.units(), 0) << n.name;
      EXPECT_GE(d.free_memory.units(), 0) << n.name;
      std::vector<MigSlot> layout;
      for (const MigInstance& i : d.instances) layout.push_back({i.profile, i.start});
      EXPECT_TRUE(CheckMigLayout(cluster.catalog().model(d.model), layout).ok()) << n.name;
    }
  }
}

// An expected workload for fgd and carve: a few whole, shared and CPU-only classes.
PolicyOptions TestWorkload() {
  PolicyOptions options;
  for (int i = 0; i < 6; ++i) {
    WorkloadClass w;
    w.request.resources.cpu = CpuMilli(4000 * (i + 1));
    if (i % 3 == 0) w.request.gpu = {DeliveryMode::kExclusive, 1 + i / 3, kWholeGpu, {}, ""};
    if (i % 3 == 1) w.request.gpu = {DeliveryMode::kShared, 1, GpuMilli(250 * i), {}, ""};
    w.weight = 1.0 / 6;
    options.workload.push_back(w);
  }
  return options;
}

class PlacerPropertyTest : public ::testing::TestWithParam<std::string> {
 protected:
  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
};

// Allocate random jobs until full, then release them in random order: the cluster returns to
// exactly its starting state, and a failed placement never changes anything.
TEST_P(PlacerPropertyTest, ReleaseRestoresTheStartExactly) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::mt19937_64 rng(seed);
    Cluster cluster = MixedCluster(&catalog_, 24, rng);
    const Cluster start = cluster;
    auto policy = MakePolicy(GetParam(), TestWorkload());
    ASSERT_TRUE(policy.ok());
    Placer placer(&cluster, policy->get(), seed);
    std::vector<std::vector<ReplicaPlacement>> held;
    int failures = 0;
    for (int i = 0; i < 400; ++i) {
      JobRequest job = RandomJob(catalog_, rng);
      const Cluster before = cluster;
      PlaceResult r = placer.Place(job);
      if (!r.placed) {
        ++failures;
        EXPECT_TRUE(cluster == before) << "a failed placement changed the cluster";
        EXPECT_GE(r.report.replica, 0);
        continue;
      }
      EXPECT_EQ(static_cast<int>(r.replicas.size()), job.replicas);
      held.push_back(r.replicas);
      if (rng() % 4 == 0) {  // release something now and then
        size_t k = rng() % held.size();
        placer.Release(held[k]);
        held.erase(held.begin() + static_cast<long>(k));
      }
    }
    ExpectNoOvercommit(cluster);
    EXPECT_GT(failures, 0) << "the cluster never filled up";
    std::shuffle(held.begin(), held.end(), rng);
    for (const auto& replicas : held) placer.Release(replicas);
    EXPECT_TRUE(cluster == start) << "seed " << seed;
  }
}

// Changes one node of both clusters (kind 0: cordon, 1: taint, 2: a device fails, 3: every
// device fails, 4: every device is tainted), or gives back the node changed last time; tells
// `indexed`.
void ChangeNode(std::optional<NodeId>& changed, int kind, Cluster& a, Cluster& b, Placer& indexed,
                std::mt19937_64& rng) {
  NodeId id = changed ? *changed : NodeId(static_cast<int64_t>(rng() % a.size()));
  for (Cluster* c : {&a, &b}) {
    Node& n = c->mutable_node(id);
    if (changed) {
      n.state = NodeState::kReady;
      n.taints.clear();
      for (Device& d : n.devices) {
        d.health = DeviceHealth::kHealthy;
        d.taints.clear();
      }
    } else if (kind == 0) {
      n.state = NodeState::kCordoned;
    } else if (kind == 1) {
      n.taints.push_back({"reserved", "team-a"});
    } else if (kind == 2) {
      n.devices[0].health = DeviceHealth::kUnhealthy;
    } else {
      for (Device& d : n.devices) {
        if (kind == 3) d.health = DeviceHealth::kUnhealthy;
        if (kind == 4) d.taints.push_back({"reserved", "team-a"});
      }
    }
  }
  changed = changed ? std::nullopt : std::optional<NodeId>(id);
  indexed.Invalidate(id);
}

// The index gives exactly the scan's placements.
TEST_P(PlacerPropertyTest, IndexedAndScanAgree) {
  auto policy = MakePolicy(GetParam(), TestWorkload());
  ASSERT_TRUE(policy.ok());
  if (!(*policy)->indexable()) GTEST_SKIP() << "not indexable";
  std::mt19937_64 rng_a(7), rng_b(7);
  Cluster a = MixedCluster(&catalog_, 32, rng_a);
  Cluster b = MixedCluster(&catalog_, 32, rng_b);
  auto policy_b = MakePolicy(GetParam(), TestWorkload());
  Placer scan(&a, policy->get(), 1, Placer::Strategy::kScan);
  Placer indexed(&b, policy_b->get(), 1, Placer::Strategy::kIndexed);
  std::vector<int64_t> ranks(32);
  for (int i = 0; i < 32; ++i) ranks[i] = (i * 7) % 32;
  scan.SetNodeRanks(ranks);
  indexed.SetNodeRanks(ranks);
  std::mt19937_64 jobs(11);
  // Requests repeat (as they do in a real workload), so that the index re-scores only the nodes
  // that changed since a request was last placed instead of building afresh.
  std::vector<JobRequest> menu;
  for (int i = 0; i < 16; ++i) menu.push_back(RandomJob(catalog_, jobs));
  std::vector<std::vector<ReplicaPlacement>> held;
  std::optional<NodeId> changed;
  for (int i = 0; i < 600; ++i) {
    const JobRequest& job = menu[jobs() % menu.size()];
    PlaceResult ra = scan.Place(job);
    PlaceResult rb = indexed.Place(job);
    ASSERT_EQ(ra.placed, rb.placed) << "job " << i;
    ASSERT_EQ(ra.replicas, rb.replicas) << "job " << i;
    if (ra.placed) held.push_back(ra.replicas);
    if (!held.empty() && jobs() % 3 == 0) {
      size_t k = jobs() % held.size();
      scan.Release(held[k]);
      indexed.Release(held[k]);
      held.erase(held.begin() + static_cast<long>(k));
    }
    // Now and then a node is cordoned, tainted or its device fails, and some jobs later it is
    // given back: the index, told through Invalidate, must see both (a node the index ruled out
    // is skipped until then).
    if (i % 7 == 0) ChangeNode(changed, i / 7 % 5, a, b, indexed, jobs);
  }
  EXPECT_TRUE(a == b);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PlacerPropertyTest,
                         ::testing::Values("first-fit", "best-fit", "packing", "clustering",
                                           "dot-product", "random", "fgd", "carve"));

TEST(PlacerTest, FailureExplainsPerReason) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  std::mt19937_64 rng(3);
  Cluster cluster = MixedCluster(&catalog, 8, rng);
  auto policy = MakePolicy("carve", {});
  Placer placer(&cluster, policy->get(), 1);
  JobRequest job;
  job.replica.gpu = {DeliveryMode::kExclusive, 8, kWholeGpu, {}, ""};
  PlaceResult r = placer.Place(job);
  ASSERT_FALSE(r.placed);
  EXPECT_EQ(r.report.nodes_considered, 8);
  EXPECT_EQ(r.report.replica, 0);
  EXPECT_THAT(r.report.Summary(), HasSubstr("0/8 nodes fit replica 0"));
  EXPECT_THAT(r.report.Summary(), HasSubstr("insufficient-whole-gpus"));
}

// Two nodes n0, n1 of `gpus` H200 each.
Cluster TwoH200Nodes(const GpuCatalog& catalog, int gpus) {
  Cluster cluster(&catalog);
  for (int i = 0; i < 2; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.capacity.cpu = CpuMilli(64000);
    n.capacity.memory = MemMib(262144);
    n.devices.resize(gpus);
    for (Device& d : n.devices) d.model = *catalog.Find("H200");
    cluster.AddNode(std::move(n));
  }
  return cluster;
}

TEST(PlacerTest, GangIsAllOrNothing) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  Cluster cluster = TwoH200Nodes(catalog, 4);
  const Cluster start = cluster;
  auto policy = MakePolicy("best-fit", {});
  Placer placer(&cluster, policy->get(), 1);
  JobRequest job;
  job.replicas = 3;
  job.replica.gpu = {DeliveryMode::kExclusive, 3, kWholeGpu, {}, ""};
  PlaceResult r = placer.Place(job);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(r.report.replica, 2);
  EXPECT_TRUE(cluster == start);
  job.replicas = 2;
  EXPECT_TRUE(placer.Place(job).placed);
}

// A gang with a spread limit of one replica per node: packing policies would stack it; it lands
// on as many nodes as it has replicas, and a third replica on two nodes does not fit.
TEST(PlacerTest, ASpreadGangTakesOneNodePerReplica) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  const Cluster cluster = TwoH200Nodes(catalog, 8);
  for (const char* name : {"best-fit", "packing", "carve", "fgd"}) {
    SCOPED_TRACE(name);
    Cluster c = cluster;
    auto policy = MakePolicy(name, {});
    ASSERT_TRUE(policy.ok());
    Placer placer(&c, policy->get(), 1);
    JobRequest job;
    job.replicas = 3;
    job.replica.gpu = {DeliveryMode::kExclusive, 1, kWholeGpu, {}, ""};
    job.replica.app = "app web of tenant acme";
    job.replica.max_per_node = 1;
    PlaceResult r = placer.Place(job);
    EXPECT_FALSE(r.placed);
    EXPECT_EQ(r.report.replica, 2);
    EXPECT_THAT(r.report.Summary(), HasSubstr("2 spread-limit"));
    EXPECT_TRUE(c == cluster);
    job.replicas = 2;
    r = placer.Place(job);
    ASSERT_TRUE(r.placed);
    EXPECT_NE(r.replicas[0].node, r.replicas[1].node);
  }
}

TEST(PlacerTest, BaselinesPickTheFullestDeviceForAShare) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  Cluster cluster(&catalog);
  Node n;
  n.name = "n0";
  n.capacity.cpu = CpuMilli(64000);
  n.capacity.memory = MemMib(262144);
  for (int g = 0; g < 3; ++g) {
    Device d;
    d.model = *catalog.Find("L40S");
    d.mode = DeliveryMode::kShared;
    n.devices.push_back(d);
  }
  NodeId id = cluster.AddNode(std::move(n));
  ApplyReplica(cluster, {id, {}, {{1, GpuMilli(300), {}, -1, -1, false}}});
  ApplyReplica(cluster, {id, {}, {{2, GpuMilli(600), {}, -1, -1, false}}});
  auto policy = MakePolicy("best-fit", {});
  Placer placer(&cluster, policy->get(), 1);
  JobRequest job;
  job.replica.gpu = {DeliveryMode::kShared, 1, GpuMilli(400), {}, ""};
  PlaceResult r = placer.Place(job);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.replicas[0].grants[0].device, 2);  // 400 free: the fullest that fits
}

}  // namespace
}  // namespace carve
