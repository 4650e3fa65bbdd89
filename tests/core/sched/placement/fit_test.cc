#include "core/sched/placement/fit.h"

#include <gtest/gtest.h>

namespace carve {
namespace {

class FitTest : public ::testing::Test {
 protected:
  NodeId AddNode(absl::string_view model, int gpus, DeliveryMode mode, int64_t cpu = 64000,
                 int64_t mem = 262144) {
    Node n;
    n.name = "node-" + std::to_string(cluster_.size());
    n.capacity = {CpuMilli(cpu), MemMib(mem), MemMib(0), NetMbps(0)};
    for (int i = 0; i < gpus; ++i) {
      Device d;
      d.model = *catalog_.Find(model);
      d.mode = mode;
      d.dynamic_layout = mode == DeliveryMode::kPartition;
      n.devices.push_back(d);
    }
    return cluster_.AddNode(std::move(n));
  }
  ReplicaRequest Whole(int count, int64_t cpu = 1000) {
    ReplicaRequest r;
    r.gpu = {DeliveryMode::kExclusive, count, kWholeGpu, {}, ""};
    r.resources.cpu = CpuMilli(cpu);
    return r;
  }
  ReplicaRequest Share(int64_t milli, int64_t mem_mib = 0) {
    ReplicaRequest r;
    r.gpu = {DeliveryMode::kShared, 1, GpuMilli(milli), MemMib(mem_mib), ""};
    return r;
  }
  ReplicaRequest Mig(std::string profile, int count = 1) {
    ReplicaRequest r;
    r.gpu = {DeliveryMode::kPartition, count, {}, {}, std::move(profile)};
    return r;
  }
  FitReason Check(NodeId id, const ReplicaRequest& r) {
    return CheckNode(cluster_, cluster_.node(id), r);
  }
  ReplicaPlacement Take(NodeId id, const ReplicaRequest& r, size_t option = 0) {
    auto options = DeviceOptions(cluster_, cluster_.node(id), r);
    ReplicaPlacement p{id, r.resources, options.at(option), r.app};
    ApplyReplica(cluster_, p);
    return p;
  }

  GpuCatalog catalog_ = GpuCatalog::BuiltIn();
  Cluster cluster_{&catalog_};
};

TEST_F(FitTest, ReasonsFollowFilterOrder) {
  NodeId n = AddNode("T4", 2, DeliveryMode::kExclusive, 4000);
  EXPECT_EQ(Check(n, Whole(1, 8000)), FitReason::kCpu);
  EXPECT_EQ(Check(n, Whole(3)), FitReason::kGpuCount);
  EXPECT_EQ(Check(n, Share(500)), FitReason::kGpuMode);
  ReplicaRequest other_model = Whole(1);
  other_model.allowed_models = {*catalog_.Find("A10")};
  EXPECT_EQ(Check(n, other_model), FitReason::kGpuModel);
  ReplicaRequest selector = Whole(1);
  selector.node_selector["zone"] = "a";
  EXPECT_EQ(Check(n, selector), FitReason::kNodeSelector);
  cluster_.mutable_node(n).taints.push_back({"dedicated", "infer"});
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kTaint);
  ReplicaRequest tolerant = Whole(1);
  tolerant.tolerations.push_back({"dedicated", "infer"});
  EXPECT_EQ(Check(n, tolerant), FitReason::kFits);
  cluster_.mutable_node(n).state = NodeState::kCordoned;
  EXPECT_EQ(Check(n, tolerant), FitReason::kNodeNotReady);
}

TEST_F(FitTest, SharesPackOntoDevicesUntilFull) {
  NodeId n = AddNode("L40S", 1, DeliveryMode::kShared);
  ReplicaPlacement a = Take(n, Share(600, 20000));
  EXPECT_EQ(Check(n, Share(500)), FitReason::kGpuShare);
  EXPECT_EQ(Check(n, Share(400, 30000)), FitReason::kGpuMemory);
  EXPECT_EQ(Check(n, Share(400, 20000)), FitReason::kFits);
  // A whole-GPU request may take an idle shared device, not a busy one.
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kGpuCount);
  ReleaseReplica(cluster_, a);
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kFits);
}

// One MPS server serves one Unix user at a time: a device holding group A's shares takes no
// share of group B until A's are gone.
TEST_F(FitTest, SharesOfAnotherGroupWaitUntilTheDeviceIsFree) {
  NodeId n = AddNode("L40S", 1, DeliveryMode::kShared);
  ReplicaRequest acme = Share(300, 4096), globex = Share(300, 4096);
  acme.share_group = "acme";
  globex.share_group = "globex";
  ReplicaPlacement a = Take(n, acme);
  EXPECT_EQ(cluster_.node(n).devices[0].share_group, "acme");
  EXPECT_EQ(Check(n, globex), FitReason::kGpuShareGroup);
  EXPECT_TRUE(DeviceOptions(cluster_, cluster_.node(n), globex).empty());
  ReplicaPlacement a2 = Take(n, acme);  // the same group packs beside it
  ReleaseReplica(cluster_, a);
  EXPECT_EQ(Check(n, globex), FitReason::kGpuShareGroup);
  ReleaseReplica(cluster_, a2);
  EXPECT_EQ(cluster_.node(n).devices[0].share_group, "");
  EXPECT_EQ(Check(n, globex), FitReason::kFits);
}

// A share without a memory request is capped anyway, in proportion to its compute.
TEST_F(FitTest, ShareWithoutMemoryRequestGetsItsProportionOfTheDevice) {
  NodeId n = AddNode("L40S", 1, DeliveryMode::kShared);
  ReplicaRequest r = Share(250);
  r.cap_memory = true;
  ReplicaPlacement p = Take(n, r);
  EXPECT_EQ(p.grants[0].memory, MemMib(46068 / 4));
  EXPECT_EQ(cluster_.node(n).devices[0].free_memory, MemMib(46068 - 46068 / 4));
}

TEST_F(FitTest, DeviceWithoutEnforcedCapsTakesOnlyBestEffortShares) {
  NodeId n = AddNode("L40S", 1, DeliveryMode::kShared);
  cluster_.mutable_node(n).devices[0].share_caps_enforced = false;
  EXPECT_EQ(Check(n, Share(300)), FitReason::kGpuCapsNotEnforced);
  ReplicaRequest best = Share(300);
  best.best_effort = true;
  EXPECT_EQ(Check(n, best), FitReason::kFits);
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kFits);  // a whole GPU needs no share caps
}

// A device taint (a reservation of GPUs by count) holds that device alone: a replica that does
// not tolerate it gets the node's other devices, and is told "taint" when every device it could
// use is held.
TEST_F(FitTest, ATaintedDeviceIsOfferedOnlyToReplicasThatTolerateIt) {
  NodeId n = AddNode("H100", 2, DeliveryMode::kExclusive);
  cluster_.mutable_node(n).devices[0].taints.push_back({"carve.io/reservation", "eval"});
  auto options = DeviceOptions(cluster_, cluster_.node(n), Whole(1));
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0][0].device, 1);
  EXPECT_EQ(Check(n, Whole(2)), FitReason::kGpuCount);
  ReplicaRequest holder = Whole(2);
  holder.tolerations.push_back({"carve.io/reservation", "eval"});
  EXPECT_EQ(Check(n, holder), FitReason::kFits);
  cluster_.mutable_node(n).devices[1].taints.push_back({"carve.io/reservation", "other"});
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kTaint);
  EXPECT_EQ(Check(n, holder), FitReason::kGpuCount);  // it tolerates only its own
}

TEST_F(FitTest, TaintedSharedAndPartitionDevicesAreHeldToo) {
  NodeId shared = AddNode("L40S", 1, DeliveryMode::kShared);
  NodeId mig = AddNode("A100-80GB", 1, DeliveryMode::kPartition);
  for (NodeId id : {shared, mig}) {
    cluster_.mutable_node(id).devices[0].taints.push_back({"carve.io/reservation", "r"});
  }
  EXPECT_EQ(Check(shared, Share(250)), FitReason::kTaint);
  EXPECT_EQ(Check(mig, Mig("1g.10gb")), FitReason::kTaint);
  ReplicaRequest share = Share(250);
  share.tolerations.push_back({"carve.io/reservation", "r"});
  EXPECT_EQ(Check(shared, share), FitReason::kFits);
  ReplicaRequest slice = Mig("1g.10gb");
  slice.tolerations.push_back({"carve.io/reservation", "r"});
  EXPECT_EQ(Check(mig, slice), FitReason::kFits);
  EXPECT_FALSE(DeviceOptions(cluster_, cluster_.node(mig), slice).empty());
  EXPECT_TRUE(DeviceOptions(cluster_, cluster_.node(mig), Mig("1g.10gb")).empty());
}

TEST_F(FitTest, UnhealthyDevicesAreNotOffered) {
  NodeId n = AddNode("H200", 1, DeliveryMode::kExclusive);
  cluster_.mutable_node(n).devices[0].health = DeviceHealth::kUnhealthy;
  EXPECT_EQ(Check(n, Whole(1)), FitReason::kGpuUnhealthy);
}

TEST_F(FitTest, PartitionsRespectMigGeometry) {
  NodeId n = AddNode("A100-40GB", 1, DeliveryMode::kPartition);
  // Two 3g instances fill the compute; a dynamic layout creates them on demand.
  EXPECT_EQ(DeviceOptions(cluster_, cluster_.node(n), Mig("3g.20gb")).size(), 2u);
  ReplicaPlacement a = Take(n, Mig("3g.20gb"));
  ReplicaPlacement b = Take(n, Mig("3g.20gb"));
  EXPECT_EQ(Check(n, Mig("1g.5gb")), FitReason::kMigProfile);
  EXPECT_EQ(Check(n, Mig("3g.71gb")), FitReason::kMigProfile);
  ReleaseReplica(cluster_, a);
  EXPECT_EQ(Check(n, Mig("2g.10gb")), FitReason::kFits);
  ReleaseReplica(cluster_, b);
  EXPECT_TRUE(cluster_.node(n).devices[0].instances.empty());
}

TEST_F(FitTest, StaticLayoutOffersOnlyExistingInstances) {
  NodeId n = AddNode("H200", 1, DeliveryMode::kPartition);
  Device& d = cluster_.mutable_node(n).devices[0];
  d.dynamic_layout = false;
  d.instances = {{*catalog_.FindProfile(d.model, "3g.71gb"), 4, false, false}};
  EXPECT_EQ(Check(n, Mig("1g.18gb")), FitReason::kMigProfile);
  ReplicaPlacement p = Take(n, Mig("3g.71gb"));
  EXPECT_EQ(Check(n, Mig("3g.71gb")), FitReason::kMigProfile);
  ReleaseReplica(cluster_, p);
  EXPECT_EQ(cluster_.node(n).devices[0].instances.size(), 1u);
  EXPECT_EQ(Check(n, Mig("3g.71gb")), FitReason::kFits);
}

TEST_F(FitTest, MultiInstancePartitionRequestAvoidsOverlap) {
  NodeId n = AddNode("A100-40GB", 1, DeliveryMode::kPartition);
  auto options = DeviceOptions(cluster_, cluster_.node(n), Mig("3g.20gb", 2));
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0][0].mig_start, 0);
  EXPECT_EQ(options[0][1].mig_start, 4);
  EXPECT_TRUE(DeviceOptions(cluster_, cluster_.node(n), Mig("3g.20gb", 3)).empty());
}

// A node offers named extra resources; a replica that asks for more than is left does not fit
// there, and the amount comes back when it leaves.
TEST_F(FitTest, ExtraResourcesAreTakenAndGivenBack) {
  NodeId n = AddNode("H200", 4, DeliveryMode::kExclusive);
  cluster_.mutable_node(n).capacity.extra = {{"rdma_gbps", 400}};
  cluster_.mutable_node(n).free.extra = {{"rdma_gbps", 400}};
  const Cluster start = cluster_;
  ReplicaRequest r = Whole(1);
  r.resources.extra = {{"rdma_gbps", 300}};
  ASSERT_EQ(Check(n, r), FitReason::kFits);
  ReplicaPlacement p = Take(n, r);
  EXPECT_EQ(ExtraAmount(cluster_.node(n).free.extra, "rdma_gbps"), 100);
  EXPECT_EQ(Check(n, r), FitReason::kExtra);
  ReplicaRequest other = Whole(1);
  other.resources.extra = {{"nvme_gb", 1}};  // a resource the node does not offer at all
  EXPECT_EQ(Check(n, other), FitReason::kExtra);
  EXPECT_EQ(ToString(FitReason::kExtra), "insufficient-extra-resource");
  ReleaseReplica(cluster_, p);
  EXPECT_TRUE(cluster_ == start);
}

// At most max_per_node replicas of one application on a node, counting every request of the
// app; replicas of other apps, or without one, do not count.
TEST_F(FitTest, SpreadLimitsReplicasOfOneAppPerNode) {
  NodeId n = AddNode("H200", 8, DeliveryMode::kExclusive);
  const Cluster start = cluster_;
  ReplicaRequest web = Whole(1);
  web.app = "app web of tenant acme";
  web.max_per_node = 2;
  ReplicaRequest other = Whole(1);
  other.app = "acme/db";
  other.max_per_node = 1;
  std::vector<ReplicaPlacement> held = {Take(n, web), Take(n, other), Take(n, Whole(1))};
  EXPECT_EQ(cluster_.node(n).apps.at("app web of tenant acme"), 1);
  EXPECT_EQ(Check(n, web), FitReason::kFits);
  held.push_back(Take(n, web));
  EXPECT_EQ(Check(n, web), FitReason::kSpread);
  EXPECT_EQ(Check(n, other), FitReason::kSpread);
  ReplicaRequest uncounted = web;  // the same app without a limit of its own is placed
  uncounted.max_per_node = 0;
  EXPECT_EQ(Check(n, uncounted), FitReason::kFits);
  EXPECT_EQ(ToString(FitReason::kSpread), "spread-limit");
  for (auto it = held.rbegin(); it != held.rend(); ++it) ReleaseReplica(cluster_, *it);
  EXPECT_TRUE(cluster_ == start) << "the app counts leave with their replicas";
}

TEST_F(FitTest, ExtraResourcesAndSpreadAreValidated) {
  JobRequest job;
  job.replica.resources.extra = {{"rdma", 0}};
  EXPECT_EQ(ValidateRequest(job, catalog_).message(), "extra: rdma: must be above 0");
  job.replica.resources.extra = {{"b", 1}, {"a", 1}};
  EXPECT_EQ(ValidateRequest(job, catalog_).message(), "extra: a: named twice or out of order");
  job.replica.resources.extra = {};
  job.replica.max_per_node = 1;
  EXPECT_EQ(ValidateRequest(job, catalog_).message(),
            "max-per-node: a spread limit needs the application it counts (app)");
  job.replica.app = "web";
  EXPECT_TRUE(ValidateRequest(job, catalog_).ok());
}

}  // namespace
}  // namespace carve
