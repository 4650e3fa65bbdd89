// Reservations against the real server and agents (issue 16): before the start only jobs that
// end in time use the reserved node; in the window the holder's jobs alone, or borrowers that
// the holder's jobs preempt; `carve reservations` shows the use; explanations name the
// reservation; each tenant sees its own; a restart neither loses nor repeats the start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration/cli.h"
#include "integration/harness.h"
#include "integration/sanitized.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

const NodeList kNodes = {{"r-1", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"},
                         {"r-2", "gpus:\n  - {model: H200, count: 1, mode: exclusive}\n"}};

std::string Utc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

class ReservationTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNodes; }

  void SetUp() override {
    PlatformTest::SetUp();
    ApiPost("/api/v1/apply",
            json::array({{{"kind", "tenant"}, {"name", "acme"}},
                         {{"kind", "tenant"}, {"name", "globex"}},
                         {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                         {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}}}));
  }

  // A reservation of r-1 for acme from `start` for ten minutes.
  json Reservation(absl::Time start, bool borrowable) {
    return {{"kind", "reservation"},   {"name", "launch"},
            {"tenant", "acme"},        {"nodes", {"r-1"}},
            {"start", Utc(start)},     {"end", Utc(start + absl::Minutes(10))},
            {"borrowable", borrowable}};
  }

  int64_t SubmitAs(const std::string& tenant, json extra = json::object()) {
    json spec = {{"tenant", tenant},
                 {"project", tenant == "acme" ? "vision" : "nlp"},
                 {"command", {"sleep", "300"}},
                 {"resources", {{"gpus", 1}, {"gpu_model", {"H200"}}}}};
    spec.update(extra);
    return Submit(spec)["id"];
  }

  std::string NodeOf(int64_t id) { return Job(id)["replicas"][0].value("node", ""); }

  json Status(const std::string& token) {
    auto r = ApiClient(url_, token, ca_).Get("/api/v1/reservations/status");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)["reservations"] : json();
  }
};

// Whole seconds: the start is written to the second.
absl::Time SecondsFromNow(int seconds) {
  return absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) + 1 + seconds);
}

TEST_F(ReservationTest, AheadOnlyJobsEndingInTimeThenTheHolderAlone) {
  // Room for a short job to end before the start on a loaded machine (sanitizers slow it).
  ApiPost("/api/v1/apply", json::array({Reservation(SecondsFromNow(kSanitized ? 14 : 7), false)}));
  const int64_t first = SubmitAs("globex");
  ASSERT_TRUE(Eventually([&] { return Job(first)["state"] == "running"; })) << ServerLog();
  EXPECT_EQ(NodeOf(first), "r-2") << "a job without max_runtime landed on the reserved node";
  const int64_t quick = SubmitAs(
      "globex", {{"max_runtime", kSanitized ? "4s" : "2s"}, {"command", {"sleep", "0.2"}}});
  json done = WaitFinal(quick);
  EXPECT_EQ(done["state"], "succeeded") << done.dump(2);
  EXPECT_EQ(done["replicas"][0]["node"], "r-1") << "a job that ends before the start may use it";
  const int64_t waits = SubmitAs("globex");
  // Another tenant's reservation is counted, not named (its name is acme's).
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(Job(waits).value("explanation", ""),
                             "1 node reserved for another tenant");
  })) << Job(waits).dump(2);
  EXPECT_THAT(Job(waits).value("explanation", ""), ::testing::Not(HasSubstr("launch")));

  ASSERT_TRUE(Eventually([&] { return !EventsOf("reservation.started").empty(); }, 30));
  json started = EventsOf("reservation.started")[0];
  EXPECT_EQ(started["details"]["nodes"], json::array({"r-1"}));
  EXPECT_EQ(started["details"]["moved"], 0);
  const int64_t holder = SubmitAs("acme");
  ASSERT_TRUE(Eventually([&] { return Job(holder)["state"] == "running"; })) << ServerLog();
  EXPECT_EQ(NodeOf(holder), "r-1");
  EXPECT_EQ(Job(waits)["state"], "queued");
  EXPECT_THAT(Job(waits).value("explanation", ""), HasSubstr("reserved for another tenant"));

  // The use, in the API and the CLI; each tenant's members see their own reservations only.
  json all = Status(token_);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["phase"], "active");
  EXPECT_EQ(all[0]["use"]["holder_milli"], 1000);
  EXPECT_EQ(all[0]["use"]["idle_milli"], 0);
  EXPECT_EQ(all[0]["jobs"][0]["job"], holder);
  CliRun cli = RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ",
                                     CARVE_BINARY, " reservations 2>&1"));
  ASSERT_EQ(cli.exit, 0) << cli.out;
  EXPECT_THAT(cli.out, HasSubstr("launch             acme         active")) << cli.out;
  EXPECT_EQ(Status(MemberToken("gina", "globex", "nlp")), json::array());
  EXPECT_EQ(Status(MemberToken("ada", "acme", "vision")).size(), 1u);

  // A restart keeps the reservation and does not start it again.
  Kill(server_, SIGKILL);
  StartServer();
  const int64_t later = SubmitAs("globex");
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(Job(later).value("explanation", ""), "reserved for another tenant");
  })) << Job(later).dump(2);
  EXPECT_EQ(EventsOf("reservation.started").size(), 1u);
  EXPECT_EQ(NodeOf(holder), "r-1");
}

TEST_F(ReservationTest, BorrowersRunUntilTheHolderTakesTheRoomBack) {
  ApiPost("/api/v1/apply", json::array({Reservation(SecondsFromNow(1), true)}));
  ASSERT_TRUE(Eventually([&] { return !EventsOf("reservation.started").empty(); }, 30));
  const int64_t a = SubmitAs("globex"), b = SubmitAs("globex");
  ASSERT_TRUE(Eventually([&] {
    return Job(a)["state"] == "running" && Job(b)["state"] == "running";
  })) << ServerLog();
  const int64_t borrower = NodeOf(a) == "r-1" ? a : b;
  ASSERT_EQ(NodeOf(borrower), "r-1");
  json use = Status(token_)[0]["use"];
  EXPECT_EQ(use["borrowed_milli"], 1000) << use.dump();
  EXPECT_EQ(use["holder_milli"], 0);

  const int64_t holder = SubmitAs("acme");
  ASSERT_TRUE(Eventually([&] { return Job(holder)["state"] == "running"; }))
      << Job(holder).dump(2) << ServerLog();
  EXPECT_EQ(NodeOf(holder), "r-1");
  json preempted = EventsOf("job.preempted");
  ASSERT_EQ(preempted.size(), 1u) << preempted.dump(2);
  EXPECT_EQ(preempted[0]["subject"], absl::StrCat("job/", borrower));
  EXPECT_EQ(preempted[0]["details"]["kind"], "reservation");
  EXPECT_THAT(preempted[0]["reason"].get<std::string>(),
              HasSubstr("preempted by a job of another tenant, which holds the reservation of "
                        "what this job borrowed"));
  EXPECT_THAT(preempted[0]["reason"].get<std::string>(), ::testing::Not(HasSubstr("launch")));
  // Nor the holder's job id (a hostile-tenant run read it in the reason and the event).
  EXPECT_THAT(preempted[0]["reason"].get<std::string>(),
              ::testing::Not(HasSubstr(absl::StrCat("job ", holder))));
  EXPECT_FALSE(preempted[0]["details"].contains("preemptor")) << preempted[0].dump(2);
  // Nor the records: the borrower's tenant reads no preempted_by, the holder's tenant no victim
  // id (both showed them before; an admin still sees both).
  ApiClient globex_reader(url_, MemberToken("gus", "globex", "nlp"), ca_);
  ApiClient acme_reader(url_, MemberToken("ann", "acme", "vision"), ca_);
  for (const std::string& path : {absl::StrCat("/api/v1/jobs/", borrower),
                                  absl::StrCat("/api/v1/jobs/", borrower, "/explain")}) {
    auto seen = globex_reader.Get(path);
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_FALSE(seen->contains("preempted_by")) << path << ": " << seen->dump(2);
    EXPECT_THAT(seen->dump(), ::testing::Not(HasSubstr(absl::StrCat("\"job\":", holder))));
  }
  auto listed = globex_reader.Get("/api/v1/jobs?all=true");
  ASSERT_TRUE(listed.ok()) << listed.status();
  int listed_borrower = 0;
  for (const json& j : *listed) {
    if (j["id"] != borrower) continue;
    ++listed_borrower;
    EXPECT_FALSE(j.contains("preempted_by")) << j.dump(2);
  }
  EXPECT_EQ(listed_borrower, 1);
  auto holder_seen = acme_reader.Get(absl::StrCat("/api/v1/jobs/", holder));
  ASSERT_TRUE(holder_seen.ok()) << holder_seen.status();
  ASSERT_EQ((*holder_seen)["victims"].size(), 1u) << holder_seen->dump(2);
  EXPECT_FALSE((*holder_seen)["victims"][0].contains("job")) << holder_seen->dump(2);
  EXPECT_EQ(Job(borrower)["preempted_by"], holder);
  EXPECT_EQ(Job(holder)["victims"][0]["job"], borrower);
  const int64_t other = borrower == a ? b : a;
  EXPECT_EQ(Job(other)["state"], "running") << "a job off the reserved node was preempted";
  EXPECT_EQ(Job(other)["attempt"], 0);
  // The borrower goes back to the queue by its policy and waits for room.
  ASSERT_TRUE(Eventually([&] { return Job(borrower)["state"] == "queued"; }))
      << Job(borrower).dump(2);
  EXPECT_EQ(Job(borrower)["attempt"], 1);

  // What the holder left unused of its reservation is charged to it at the reserved price; the
  // borrowers' use does not count as the holder's.
  ApiPost("/api/v1/apply",
          json::array({{{"kind", "price"},
                        {"name", "list"},
                        {"effective_from", "2026-01-01"},
                        {"gpu_hour", {{"H200", {{"*", 4.0}, {"reserved", 1.0}}}}}}}));
  json cost = ApiGet("/api/v1/cost?by=tenant&since_us=0");
  json acme;
  for (const json& r : cost["rows"]) {
    if (r["tenant"] == "acme") acme = r;
  }
  ASSERT_TRUE(acme.is_object()) << cost.dump(2);
  const double unused = acme["reserved_unused_gpu_hours"];
  EXPECT_GT(unused, 0) << "the borrower's hours counted as the holder's";
  EXPECT_NEAR(acme["reserved_unused_cost"].get<double>(), unused * 1.0, 1e-9);
  EXPECT_EQ(acme["jobs"], 1);
}

TEST_F(ReservationTest, OverlapsAndBadWindowsAreRefusedNamingWhy) {
  ApiPost("/api/v1/apply", json::array({Reservation(SecondsFromNow(3600), false)}));
  json other = Reservation(SecondsFromNow(3900), false);
  other["name"] = "other";
  other["tenant"] = "globex";
  auto overlap = Api().Post("/api/v1/apply", json::array({other}));
  ASSERT_FALSE(overlap.ok());
  EXPECT_THAT(std::string(overlap.status().message()),
              HasSubstr("document 0: reservation other would hold a node that reservation launch "
                        "holds over the same time"));
  other["nodes"] = {"r-2"};
  other["end"] = other["start"];
  auto empty = Api().Post("/api/v1/apply", json::array({other}));
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("end: must be after start"));
  json past = Reservation(absl::Now() - absl::Hours(1), false);
  past["name"] = "past";
  past["nodes"] = {"r-2"};
  auto late = Api().Post("/api/v1/apply", json::array({past}));
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(std::string(late.status().message()),
              HasSubstr("start: a reservation's start must not be in the past"));
  // A pool that holds r-1 overlaps the reservation naming r-1.
  ApiPost("/api/v1/apply",
          json::array({{{"kind", "node"}, {"name", "r-1"}, {"labels", {{"pool", "big"}}}}}));
  json by_pool = Reservation(SecondsFromNow(3700), false);
  by_pool["name"] = "by-pool";
  by_pool.erase("nodes");
  by_pool["pool"] = "big";
  auto pooled = Api().Post("/api/v1/apply", json::array({by_pool}));
  ASSERT_FALSE(pooled.ok());
  EXPECT_THAT(std::string(pooled.status().message()), HasSubstr("reservation launch"));
  EXPECT_EQ(ApiGet("/api/v1/reservations").size(), 1u) << "a refused document was kept";
  EXPECT_EQ(Status(token_)[0]["phase"], "ahead");
}

// GPUs by count (gpus: {model, count}): the reservation holds three of the four H200s, device by
// device; another tenant gets the fourth and waits for the rest, told GPUs (not nodes) are
// reserved for another tenant; the holder's jobs use the held devices; `carve reservations` says
// what was asked and covered; more than the cluster has is refused.
const NodeList kGpuNodes = {{"g-1", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"},
                            {"g-2", "gpus:\n  - {model: H200, count: 2, mode: exclusive}\n"}};

class ReservationGpusTest : public ReservationTest {
 protected:
  const NodeList& Nodes() const override { return kGpuNodes; }
  json ByCount(absl::Time start, int count) {
    return {{"kind", "reservation"}, {"name", "eval"},
            {"tenant", "acme"},      {"gpus", {{"model", "H200"}, {"count", count}}},
            {"start", Utc(start)},   {"end", Utc(start + absl::Minutes(10))}};
  }
};

TEST_F(ReservationGpusTest, ItHoldsTheDevicesItCountsAndNoWholeNode) {
  auto too_many = Api().Post("/api/v1/apply", json::array({ByCount(SecondsFromNow(60), 5)}));
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()),
              HasSubstr("reservation eval asking for 5 H200 GPUs: the registered nodes have 4"));
  json unknown = ByCount(SecondsFromNow(60), 1);
  unknown["gpus"]["model"] = "Z9000";
  auto bad = Api().Post("/api/v1/apply", json::array({unknown}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gpus.model: no GPU model \"Z9000\""));

  // Another tenant fills the four GPUs; at the start its jobs on the three held devices are
  // moved, the one on the fourth stays.
  std::vector<int64_t> before;
  for (int i = 0; i < 4; ++i) before.push_back(SubmitAs("globex"));
  ASSERT_TRUE(Eventually([&] {
    return std::all_of(before.begin(), before.end(),
                       [&](int64_t id) { return Job(id)["state"] == "running"; });
  })) << ServerLog();
  int64_t stays = 0;
  for (int64_t id : before) {
    const json rep = Job(id)["replicas"][0];
    if (rep["node"] == "g-2" && rep["grants"][0]["device"] == 1) stays = id;
  }
  ASSERT_NE(stays, 0);
  ApiPost("/api/v1/apply", json::array({ByCount(SecondsFromNow(1), 3)}));
  ASSERT_TRUE(Eventually([&] { return !EventsOf("reservation.started").empty(); }, 30));
  json started = EventsOf("reservation.started")[0];
  EXPECT_EQ(started["details"]["nodes"], json::array({"g-1", "g-2"})) << started.dump(2);
  EXPECT_EQ(started["details"]["devices"], json::array({"g-1/0", "g-1/1", "g-2/0"}));
  EXPECT_EQ(started["details"]["moved"], 3) << started.dump(2);
  EXPECT_THAT(started["reason"].get<std::string>(), HasSubstr("3 H200 GPUs on 2 node(s)"));
  for (int64_t id : before) {
    if (id == stays) continue;
    ASSERT_TRUE(Eventually([&] { return Job(id)["state"] != "running"; })) << Job(id).dump(2);
  }
  EXPECT_EQ(Job(stays)["state"], "running");
  EXPECT_EQ(Job(stays)["attempt"], 0);
  // Another tenant's new job waits, told GPUs (not nodes) are reserved.
  const int64_t waits = SubmitAs("globex");
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(Job(waits).value("explanation", ""),
                             "3 GPUs reserved for another tenant");
  })) << Job(waits).dump(2);
  // The holder: two GPUs on g-1 and one on g-2, all on its devices.
  const int64_t pair = SubmitAs("acme", {{"resources", {{"gpus", 2}, {"gpu_model", {"H200"}}}}});
  const int64_t one = SubmitAs("acme");
  ASSERT_TRUE(Eventually([&] {
    return Job(pair)["state"] == "running" && Job(one)["state"] == "running";
  })) << ServerLog();
  EXPECT_EQ(NodeOf(pair), "g-1");
  EXPECT_EQ(NodeOf(one), "g-2");
  EXPECT_EQ(Job(one)["replicas"][0]["grants"][0]["device"], 0);
  json status = Status(token_);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0]["gpu_milli"], 3000) << status.dump(2);
  EXPECT_EQ(status[0]["gpus"]["covered"], 3);
  EXPECT_EQ(status[0]["gpus"]["asked"], "3 H200 GPUs");
  EXPECT_EQ(status[0]["use"]["holder_milli"], 3000);
  EXPECT_EQ(status[0]["use"]["idle_milli"], 0);
  EXPECT_EQ(status[0]["jobs"].size(), 2u) << "globex's job beside them is not the reservation's";
  EXPECT_EQ(Job(stays)["state"], "running");
  EXPECT_EQ(Job(waits)["state"], "queued");
}

// MIG instances by count: the instances the holder's job uses on the held GPU count in the status
// by their share of its compute slices (a hostile-tenant run saw 0: MIG grants carry no milli).
const NodeList kMigNodes = {
    {"m-1", "gpus:\n  - {model: A100-80GB, count: 1, mode: partition, layout: dynamic}\n"}};

class ReservationMigTest : public ReservationTest {
 protected:
  const NodeList& Nodes() const override { return kMigNodes; }
};

TEST_F(ReservationMigTest, InstancesOnTheHeldGpuCountByTheirSlices) {
  const absl::Time start = SecondsFromNow(1);
  ApiPost("/api/v1/apply",
          json::array({{{"kind", "reservation"},
                        {"name", "slices"},
                        {"tenant", "acme"},
                        {"gpus", {{"model", "A100-80GB"}, {"mig", "3g.40gb"}, {"count", 2}}},
                        {"start", Utc(start)},
                        {"end", Utc(start + absl::Minutes(10))}}}));
  ASSERT_TRUE(Eventually([&] { return !EventsOf("reservation.started").empty(); }, 30));
  const int64_t slice =
      SubmitAs("acme", {{"resources", {{"mode", "partition"}, {"profile", "3g.40gb"}}}});
  ASSERT_TRUE(Eventually([&] { return Job(slice)["state"] == "running"; })) << ServerLog();
  json status = Status(token_);
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0]["gpus"]["covered"], 2) << status.dump(2);
  EXPECT_EQ(status[0]["gpu_milli"], 1000);
  EXPECT_EQ(status[0]["use"]["holder_milli"], 429) << status.dump(2);  // 3 of 7 slices
  EXPECT_EQ(status[0]["jobs"].size(), 1u);
}

}  // namespace
}  // namespace carve::it
