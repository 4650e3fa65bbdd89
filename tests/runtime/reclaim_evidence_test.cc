// The server holds a node's "verified" reclaim record to the checks the replica's placement calls
// for (runtime/reclaim_evidence.h): an agent that skips them cannot hand a GPU back unchecked.
#include "runtime/reclaim_evidence.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/control_plane_fixture.h"

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

ReplicaRecord OnGpus(std::vector<int> devices, int64_t pid) {
  ReplicaRecord rep;
  rep.node = "n1";
  rep.pid = pid;
  for (int d : devices) rep.grants.push_back({d, 1000, 0, "", -1, false});
  return rep;
}

TEST(ReclaimEvidenceTest, AVerifiedRecordWithEveryCheckIsKeptAsSent) {
  const json sent = VerifiedReclaim(2);
  EXPECT_EQ(AuditReclaim(OnGpus({0, 1}, 41), sent, 7), sent);
  // Skipped checks (the device could not say) count, as the agent records them.
  json skipped = VerifiedReclaim(1);
  skipped["checks"][2]["skipped"] = true;
  EXPECT_EQ(AuditReclaim(OnGpus({0}, 41), skipped, 7), skipped);
  // A record that is not "verified" is the agent's own word that it failed: kept as sent.
  const json failed = {{"status", "failed"}, {"checks", json::array()}};
  EXPECT_EQ(AuditReclaim(OnGpus({0}, 41), failed, 7), failed);
}

TEST(ReclaimEvidenceTest, VerifiedWithoutChecksIsUnverifiedAndFencesEveryGpu) {
  const json sent = {{"status", "verified"}, {"checks", json::array()}};
  json kept = AuditReclaim(OnGpus({0, 3}, 41), sent, 7);
  EXPECT_EQ(kept["status"], "unverified");
  EXPECT_EQ(kept["reported_status"], "verified");
  EXPECT_EQ(kept["reason"],
            "the node reported its reclaim verified without passed checks for: processes-gone; "
            "device-processes on GPU 0; device-memory on GPU 0; device-processes on GPU 3; "
            "device-memory on GPU 3");
  EXPECT_EQ(kept["quarantine"], json::array({0, 3}));
  ASSERT_EQ(kept["checks"].size(), 2u);
  EXPECT_EQ(kept["checks"][1]["name"], "reclaim-evidence");
  EXPECT_EQ(kept["checks"][1]["ok"], false);
  EXPECT_EQ(kept["checks"][1]["device"], 3);
  EXPECT_EQ(kept["checks"][1]["time_us"], 7);
}

TEST(ReclaimEvidenceTest, ChecksOfAnotherGpuOrAFailedCheckDoNotCount) {
  // GPU 1's checks do not vouch for GPU 0.
  json other = VerifiedReclaim(2);
  other["checks"].erase(other["checks"].begin() + 1, other["checks"].begin() + 3);
  EXPECT_THAT(AuditReclaim(OnGpus({0, 1}, 41), other, 7)["reason"].get<std::string>(),
              HasSubstr("for: device-processes on GPU 0; device-memory on GPU 0"));
  // "verified" beside a failed check is not verified.
  json failed_check = VerifiedReclaim(1);
  failed_check["checks"][0]["ok"] = false;
  json kept = AuditReclaim(OnGpus({0}, 41), failed_check, 7);
  EXPECT_EQ(kept["status"], "unverified");
  EXPECT_THAT(kept["reason"].get<std::string>(), HasSubstr("processes-gone (it failed)"));
  // A replica that never started a process owes no processes-gone check.
  json no_process = VerifiedReclaim(1);
  no_process["checks"].erase(0);
  EXPECT_EQ(AuditReclaim(OnGpus({0}, 0), no_process, 7)["status"], "verified");
  EXPECT_EQ(AuditReclaim(OnGpus({0}, 41), no_process, 7)["status"], "unverified");
}

}  // namespace
}  // namespace carve
