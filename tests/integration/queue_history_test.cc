// Each queue's quota, use, borrowing and lending over time (runtime/queue_history.h; issue 15's
// queues page): sampled from the quota ledger the scheduler charges, averaged per step, kept
// across a restart, and shown only for the queues the caller may see.
#include <string>

#include "integration/harness.h"

namespace carve::it {
namespace {

class QueueHistoryTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    auto applied = Api().Post(
        "/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                      {{"kind", "tenant"}, {"name", "globex"}},
                                      {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                      {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                                      {{"kind", "queue"},
                                       {"name", "acme-q"},
                                       {"tenants", {"acme"}},
                                       {"quota", {{"gpus", 2}}}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  // The last step of the last ten minutes that sampled the queue's GPUs (null when none).
  json LastGpuPoint(ApiClient api, const std::string& queue, int64_t* stored_through = nullptr) {
    auto history = api.Get(absl::StrCat("/api/v1/queues/history?since_us=", NowUs() - 600'000'000,
                                        "&step_us=60000000"));
    if (!history.ok()) return json();
    if (stored_through != nullptr) *stored_through = (*history)["stored_through_us"];
    json line = (*history)["queues"].value(queue, json::object()).value("gpus", json());
    if (!line.is_object()) return json();
    json last;
    for (const json& p : line["points"]) {
      if (!p["used"].is_null()) last = p;
    }
    return last;
  }

  static int64_t NowUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

TEST_F(QueueHistoryTest, AQueuesQuotaAndUseAreChartedAndKeptAcrossARestart) {
  json job = Submit({{"tenant", "acme"},
                     {"project", "vision"},
                     {"queue", "acme-q"},
                     {"command", {"sleep", "60"}},
                     {"resources", {{"gpus", 1}}}});
  const int64_t id = job["id"];
  ASSERT_TRUE(Eventually([&] { return Job(id)["state"] == "running"; })) << Job(id).dump(2);
  // A sample that saw the job: the queue held one GPU of its quota of two.
  json point;
  ASSERT_TRUE(Eventually([&] {
    point = LastGpuPoint(Api(), "acme-q");
    return point.is_object() && point["used"].get<double>() > 0;
  })) << ApiGet("/api/v1/queues/history").dump(2);
  EXPECT_EQ(point["quota"], 2.0) << point.dump();
  EXPECT_LE(point["used"].get<double>(), 1.0);
  EXPECT_EQ(point["borrowed"], 0.0);
  json line = ApiGet("/api/v1/queues/history")["queues"]["acme-q"]["gpus"];
  EXPECT_EQ(line["unit"], "GPUs");
  EXPECT_TRUE(line["limited"]);

  // Another tenant's member does not see the queue; its own member does.
  EXPECT_TRUE(
      LastGpuPoint(ApiClient(url_, MemberToken("gary", "globex", "nlp")), "acme-q").is_null());
  EXPECT_TRUE(
      LastGpuPoint(ApiClient(url_, MemberToken("alice", "acme", "vision")), "acme-q").is_object());

  // Once the samples are stored (stored_through_us passes the one seen), a restart keeps them.
  const int64_t seen = NowUs();
  int64_t stored = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        LastGpuPoint(Api(), "acme-q", &stored);
        return stored >= seen;
      },
      30));
  Kill(server_, SIGKILL);
  StartServer();
  json kept = LastGpuPoint(Api(), "acme-q");
  ASSERT_TRUE(kept.is_object()) << ApiGet("/api/v1/queues/history").dump(2);
  EXPECT_GT(kept["used"].get<double>(), 0);
  EXPECT_EQ(kept["quota"], 2.0);
  // A step of whole minutes so long that span + step overflowed: one piece (it made none, and
  // the buckets were written through an empty series).
  auto huge = Api().Get("/api/v1/queues/history?step_us=9223372036800000000");
  ASSERT_TRUE(huge.ok()) << huge.status() << ServerLog();
  EXPECT_EQ((*huge)["queues"]["acme-q"]["gpus"]["points"].size(), 1u) << huge->dump(2);
}

TEST_F(QueueHistoryTest, AStepThatIsNotWholeMinutesIsRefused) {
  auto r = Api().Get("/api/v1/queues/history?step_us=1000");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("step_us: 1000 is not a whole number of minutes"));
  r = Api().Get("/api/v1/queues/history?since_us=1&step_us=60000000");
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("longer than 90 days"));
  r = Api().Get(absl::StrCat("/api/v1/queues/history?since_us=", NowUs() - 43'200'000'000,
                             "&step_us=60000000"));  // 12 h: 720 steps
  EXPECT_TRUE(r.ok()) << r.status();
  r = Api().Get(absl::StrCat("/api/v1/queues/history?since_us=", NowUs() - 2 * 86'400'000'000,
                             "&step_us=60000000"));
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("at most 1440"));
}

}  // namespace
}  // namespace carve::it
