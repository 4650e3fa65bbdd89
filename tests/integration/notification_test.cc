// Webhook notifications (kind: notification; runtime/notifier.h) against a receiver in this
// process: a tenant's webhook gets its own jobs' events, signed, and never another tenant's; a
// receiver that answers 500 three times gets the event on the fourth try, every attempt recorded;
// an event committed before the server is killed is delivered after its restart (the event log
// is the outbox); a receiver that trickles its answer holds one attempt for its timeout only.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "integration/harness.h"
#include "integration/webhook_receiver.h"

namespace carve::it {
namespace {

using ::testing::HasSubstr;

constexpr char kSecret[] = "acme-webhook-secret-0123456789";

// Whether `signature` ("t=T,v1=HEX") is the HMAC-SHA256 of "T.body" under `secret`.
bool Signed(const std::string& signature, const std::string& secret, const std::string& body) {
  std::vector<std::string> parts = absl::StrSplit(signature, ',');
  if (parts.size() != 2 || parts[0].rfind("t=", 0) != 0 || parts[1].rfind("v1=", 0) != 0) {
    return false;
  }
  const std::string text = absl::StrCat(parts[0].substr(2), ".", body);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &size);
  return absl::BytesToHexString(std::string(reinterpret_cast<char*>(mac), size)) ==
         parts[1].substr(3);
}

class NotificationTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    auto applied = Api().Post(
        "/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                      {{"kind", "tenant"}, {"name", "globex"}},
                                      {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                      {{"kind", "project"}, {"name", "nlp"}, {"tenant", "globex"}},
                                      {{"kind", "notification"},
                                       {"name", "acme-hook"},
                                       {"tenant", "acme"},
                                       {"url", acme_.url()},
                                       {"secret", kSecret}},
                                      {{"kind", "notification"},
                                       {"name", "globex-hook"},
                                       {"tenant", "globex"},
                                       {"url", globex_.url()},
                                       {"secret", "globex-webhook-secret-0123456789"},
                                       {"events", {"job.succeeded"}}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
    WaitActive();
  }

  // Both notifications have a cursor: events from here on are theirs.
  void WaitActive() {
    ASSERT_TRUE(Eventually([&] {
      json status = ApiGet("/api/v1/notifications/status");
      int active = 0;
      for (const json& n : status) active += n.value("active", false) ? 1 : 0;
      return active == 2;
    })) << ApiGet("/api/v1/notifications/status").dump(2);
  }

  int64_t SubmitAs(const std::string& tenant, const std::string& project) {
    return Submit({{"tenant", tenant}, {"project", project}, {"command", {"true"}}})["id"];
  }

  // The delivery record of acme-hook for event `seq`.
  json Record(int64_t seq) {
    for (const json& d : ApiGet("/api/v1/notifications/deliveries?name=acme-hook")) {
      if (d["event"] == seq) return d;
    }
    return json();
  }

  // The record once it says delivered (the receiver has the event before the server has recorded
  // the answer it gave), or as it stands when waiting gave up.
  json Delivered(int64_t seq) {
    json record;
    Eventually([&] {
      record = Record(seq);
      return record["state"] == "delivered";
    });
    return record;
  }

  Receiver acme_, globex_;
};

TEST_F(NotificationTest, ATenantsWebhookGetsItsOwnJobsEventsSignedAndNeverAnotherTenants) {
  const int64_t mine = SubmitAs("acme", "vision");
  const int64_t theirs = SubmitAs("globex", "nlp");
  ASSERT_EQ(WaitFinal(mine)["state"], "succeeded");
  ASSERT_EQ(WaitFinal(theirs)["state"], "succeeded");
  const std::string subject = absl::StrCat("job/", mine);
  ASSERT_TRUE(Eventually([&] { return acme_.Find("job.succeeded", subject).has_value(); }))
      << ApiGet("/api/v1/notifications/status").dump(2);
  ASSERT_TRUE(acme_.Find("job.submitted", subject).has_value());
  for (const Delivery& d : acme_.got()) {
    EXPECT_EQ(d.body["tenant"], "acme") << d.body.dump();
    EXPECT_EQ(d.body["subject"], subject) << d.body.dump();
    EXPECT_EQ(d.event, std::to_string(d.body["id"].get<int64_t>()));
    EXPECT_TRUE(Signed(d.signature, kSecret, d.body.dump())) << d.signature;
    EXPECT_FALSE(Signed(d.signature, "another-secret-0123456789", d.body.dump()));
  }
  // globex asked for job.succeeded only, and gets its own.
  ASSERT_TRUE(Eventually(
      [&] { return globex_.Find("job.succeeded", absl::StrCat("job/", theirs)).has_value(); }));
  for (const Delivery& d : globex_.got()) {
    EXPECT_EQ(d.body["type"], "job.succeeded");
    EXPECT_EQ(d.body["tenant"], "globex");
  }
  // The secret is never listed back, nor in the audit of the apply; the URL (a credential for
  // some receivers) is listed to admins and tenant-admins only, and cut to its host in the event
  // the tenant's members read.
  const std::string listed = ApiGet("/api/v1/notifications").dump();
  EXPECT_THAT(listed, HasSubstr("\"secret\":\"(set)\""));
  EXPECT_THAT(listed, HasSubstr(acme_.url()));
  EXPECT_EQ(listed.find(kSecret), std::string::npos) << listed;
  const std::string applied = EventsOf("notification.applied").dump();
  EXPECT_EQ(applied.find(kSecret), std::string::npos) << applied;
  EXPECT_EQ(applied.find("/hook"), std::string::npos) << applied;
  ApiClient member(url_, MemberToken("alice", "acme", "vision"), ca_);
  EXPECT_EQ(member.Get("/api/v1/notifications").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(member.Get("/api/v1/notifications/deliveries?name=acme-hook").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(NotificationTest, AReceiverThatFailsThreeTimesGetsTheEventOnTheFourthTry) {
  acme_.Fail(3);
  const int64_t id = SubmitAs("acme", "vision");
  const std::string subject = absl::StrCat("job/", id);
  ASSERT_TRUE(Eventually([&] { return acme_.Find("job.submitted", subject).has_value(); }, 30))
      << ApiGet("/api/v1/notifications/status").dump(2);
  const int64_t seq = acme_.Find("job.submitted", subject)->body["id"];
  json record = Delivered(seq);
  EXPECT_EQ(record["state"], "delivered") << record.dump(2);
  ASSERT_EQ(record["attempts"].size(), 4u) << record.dump(2);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(record["attempts"][i]["status"], 500);
  EXPECT_EQ(record["attempts"][3]["status"], 200);
  // Backoff: 0.5 s before the second try, 2 s before the fourth.
  std::vector<int64_t> at;
  for (const json& a : record["attempts"]) at.push_back(a["time_us"]);
  EXPECT_GE(at[1] - at[0], 500'000);
  EXPECT_GE(at[3] - at[2], 2'000'000);
  EXPECT_LT(at[1] - at[0], at[3] - at[2]);
}

// Red team: the client's timeouts are per read, so a receiver that answered 200 and then a byte
// every 200 ms held the one delivery thread for good, and no other webhook got anything. An
// attempt now lasts the notifier's timeout (5 s) in all, and is recorded as failed.
TEST_F(NotificationTest, ATricklingReceiverHoldsAnAttemptForItsTimeoutNotForGood) {
  acme_.Trickle();
  const int64_t mine = SubmitAs("acme", "vision");
  json attempt;
  ASSERT_TRUE(Eventually(
      [&] {
        for (const json& d : ApiGet("/api/v1/notifications/deliveries?name=acme-hook")) {
          if (!d["attempts"].empty()) attempt = d["attempts"][0];
        }
        return !attempt.is_null();
      },
      30))
      << ApiGet("/api/v1/notifications/status").dump(2);
  EXPECT_EQ(attempt["error"], "no complete answer within 5000 ms") << attempt.dump();
  // The other tenant's webhook is served meanwhile.
  const int64_t theirs = SubmitAs("globex", "nlp");
  ASSERT_EQ(WaitFinal(theirs)["state"], "succeeded");
  ASSERT_TRUE(Eventually(
      [&] { return globex_.Find("job.succeeded", absl::StrCat("job/", theirs)).has_value(); }, 30));
  ASSERT_EQ(WaitFinal(mine)["state"], "succeeded");
}

TEST_F(NotificationTest, AnEventCommittedBeforeACrashIsDeliveredAfterTheRestart) {
  acme_.Fail(1'000'000);  // down, as far as the server can tell
  const int64_t id = SubmitAs("acme", "vision");
  // The first attempt failed: the event waits in the outbox.
  int64_t seq = 0;
  ASSERT_TRUE(Eventually([&] {
    for (const json& d : ApiGet("/api/v1/notifications/deliveries?name=acme-hook")) {
      if (!d["attempts"].empty()) seq = d["event"];
    }
    return seq > 0;
  }));
  Kill(server_, SIGKILL);
  acme_.Fail(0);
  StartServer();
  ASSERT_TRUE(Eventually([&] { return !acme_.got().empty(); }, 30));
  const Delivery first = acme_.got().front();
  EXPECT_EQ(first.body["id"], seq) << first.body.dump();
  EXPECT_EQ(first.body["subject"], absl::StrCat("job/", id));
  json record = Delivered(seq);
  EXPECT_EQ(record["state"], "delivered") << record.dump(2);
  EXPECT_GE(record["attempts"].size(), 2u) << record.dump(2);  // the failed one is kept
  EXPECT_EQ(record["attempts"][0]["status"], 500);
}

// The events a tenant asks for beyond its jobs' states: a job that waited longer than its
// notification's wait_longer_than (once, and only to the notifications with that threshold), its
// queue's quota running out (queue.quota-holds, to the queue's tenants only) and maintenance
// ahead on a node its job runs on (node.maintenance-scheduled naming the job).
TEST_F(NotificationTest, LongWaitsExhaustedQuotasAndMaintenanceAheadReachTheTenant) {
  auto applied = Api().Post(
      "/api/v1/apply",
      json::array(
          {{{"kind", "queue"}, {"name", "acme-q"}, {"tenants", {"acme"}}, {"quota", {{"gpus", 1}}}},
           {{"kind", "notification"},
            {"name", "acme-waits"},
            {"tenant", "acme"},
            {"url", acme_.url()},
            {"secret", kSecret},
            {"events", {"job.wait-exceeded", "queue.", "node."}},
            {"wait_longer_than", "2s"}},
           {{"kind", "notification"},
            {"name", "globex-queues"},
            {"tenant", "globex"},
            {"url", globex_.url()},
            {"secret", "globex-webhook-secret-0123456789"},
            {"events", {"queue.", "job.wait-exceeded"}}}}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_TRUE(Eventually([&] {
    int active = 0;
    for (const json& n : ApiGet("/api/v1/notifications/status")) active += n.value("active", false);
    return active == 4;
  }));
  const json gpu = {{"gpus", 1}, {"gpu_model", "H200"}};
  const int64_t holder = Submit({{"tenant", "acme"},
                                 {"project", "vision"},
                                 {"queue", "acme-q"},
                                 {"resources", gpu},
                                 {"command", {"sleep", "600"}}})["id"];
  ASSERT_TRUE(Eventually([&] { return Job(holder)["state"] == "running"; }));
  const int64_t waiter = Submit({{"tenant", "acme"},
                                 {"project", "vision"},
                                 {"queue", "acme-q"},
                                 {"resources", gpu},
                                 {"command", {"true"}}})["id"];
  const std::string subject = absl::StrCat("job/", waiter);
  auto from = [](const Delivery& d, const char* notification) {
    return d.body.value("notification", "") == notification;
  };
  ASSERT_TRUE(Eventually([&] { return acme_.Find("job.wait-exceeded", subject).has_value(); }, 30))
      << ApiGet("/api/v1/notifications/status").dump(2);
  const Delivery long_wait = *acme_.Find("job.wait-exceeded", subject);
  EXPECT_TRUE(from(long_wait, "acme-waits")) << long_wait.body.dump();
  EXPECT_EQ(long_wait.body["details"]["threshold_us"], 2'000'000) << long_wait.body.dump();
  EXPECT_THAT(long_wait.body["reason"].get<std::string>(), HasSubstr("queue acme-q"));
  ASSERT_TRUE(
      Eventually([&] { return acme_.Find("queue.quota-holds", "queue/acme-q").has_value(); }));
  EXPECT_EQ(acme_.Find("queue.quota-holds", "queue/acme-q")->body["details"]["resource"], "gpus");

  const std::string node = Job(holder)["replicas"][0]["node"];
  ASSERT_TRUE(Api()
                  .Post(absl::StrCat("/api/v1/nodes/", node, "/maintenance"),
                        {{"starts_in", "1h"}, {"lasts", "1h"}, {"reason", "firmware"}})
                  .ok());
  const std::string on = "node/" + node;
  ASSERT_TRUE(Eventually([&] { return acme_.Find("node.maintenance-scheduled", on).has_value(); }));
  const json ahead = acme_.Find("node.maintenance-scheduled", on)->body;
  EXPECT_EQ(ahead["jobs"], json::array({holder})) << ahead.dump();
  EXPECT_GT(ahead["window"].value("start_us", int64_t{0}), 0) << ahead.dump();
  EXPECT_FALSE(ahead.contains("reason")) << ahead.dump();  // the operator's words stay theirs
  ASSERT_TRUE(
      Api().Post(absl::StrCat("/api/v1/nodes/", node, "/maintenance"), {{"cancel", true}}).ok());
  ASSERT_TRUE(Api().Post(absl::StrCat("/api/v1/jobs/", holder, "/cancel"), json::object()).ok());
  ASSERT_EQ(WaitFinal(waiter, 30)["state"], "succeeded");
  ASSERT_TRUE(Eventually([&] { return acme_.Find("job.succeeded", subject).has_value(); }));

  // Once per wait, whatever the number of cycles it waited; to acme-waits only (acme-hook has no
  // threshold), and nothing of acme's queue or jobs to globex, whose cursor passed them all.
  int alerts = 0;
  for (const json& e : EventsOf("job.wait-exceeded")) alerts += e["subject"] == subject;
  EXPECT_EQ(alerts, 1) << EventsOf("job.wait-exceeded").dump(2);
  for (const Delivery& d : acme_.got()) {
    if (d.body["type"] == "job.wait-exceeded") {
      EXPECT_TRUE(from(d, "acme-waits")) << d.body.dump();
    }
  }
  const int64_t last = EventsOf("").back()["seq"];
  ASSERT_TRUE(Eventually([&] {
    for (const json& n : ApiGet("/api/v1/notifications/status")) {
      if (n["name"] == "globex-queues") return n.value("cursor", int64_t{0}) >= last;
    }
    return false;
  })) << ApiGet("/api/v1/notifications/status").dump(2);
  for (const Delivery& d : globex_.got()) {
    EXPECT_NE(d.body.value("subject", ""), "queue/acme-q") << d.body.dump();
    EXPECT_NE(d.body.value("type", ""), "job.wait-exceeded") << d.body.dump();
  }
}

// Issue 16: tenant-admins apply their own tenant's notifications (admins did it for them).
TEST_F(NotificationTest, ATenantAdminAppliesItsOwnTenantsNotificationsAndNothingElse) {
  ASSERT_TRUE(
      Api()
          .Post("/api/v1/users", {{"name", "ada"}, {"role", "tenant-admin"}, {"tenant", "acme"}})
          .ok());
  auto token = Api().Post("/api/v1/tokens", {{"user", "ada"}, {"expires_in", "1d"}});
  ASSERT_TRUE(token.ok()) << token.status();
  ApiClient ada(url_, (*token)["token"].get<std::string>(), ca_);
  // Not this machine, a link-local or a private network's address (an admin applies those).
  json own = {{"kind", "notification"},
              {"name", "acme-ops"},
              {"tenant", "acme"},
              {"url", acme_.url()},
              {"secret", kSecret}};
  for (const char* url : {"http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data",
                          "http://10.1.2.3/x", "http://localhost:8080/x"}) {
    own["url"] = url;
    auto refused = ada.Post("/api/v1/apply", json::array({own}));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << url;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("url: a tenant-admin's webhook must not reach"));
  }
  own["url"] = "https://hooks.example.com/carve";
  auto applied = ada.Post("/api/v1/apply", json::array({own}));
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(EventsOf("notification.applied").back()["actor"], "user:ada");
  // Another tenant's, a name another tenant's notification holds, any other kind: refused, and
  // nothing of the batch is applied.
  json theirs = own;
  theirs["name"] = "acme-ops-2";
  theirs["tenant"] = "globex";
  auto mixed = ada.Post("/api/v1/apply", json::array({own, theirs}));
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(mixed.status().message()),
              HasSubstr("document 1: a tenant-admin applies only notifications of its own tenant"));
  json taken = own;
  taken["name"] = "globex-hook";
  auto stolen = ada.Post("/api/v1/apply", json::array({taken}));
  EXPECT_THAT(std::string(stolen.status().message()), HasSubstr("belongs to another tenant"));
  auto queue = ada.Post(
      "/api/v1/apply", json::array({{{"kind", "queue"}, {"name", "mine"}, {"tenants", {"acme"}}}}));
  EXPECT_EQ(queue.status().code(), absl::StatusCode::kPermissionDenied);
  ApiClient member(url_, MemberToken("bob", "acme", "vision"), ca_);
  auto by_member = member.Post("/api/v1/apply", json::array({own}));
  EXPECT_THAT(std::string(by_member.status().message()), HasSubstr("only admins apply"));
  int notifications = 0;
  for (const json& n : ApiGet("/api/v1/notifications")) notifications += n["tenant"] == "acme";
  EXPECT_EQ(notifications, 2);  // acme-hook and acme-ops
}

TEST_F(NotificationTest, ABadNotificationIsRefusedNamingTheField) {
  auto refused = [&](json doc, const std::string& why) {
    doc["kind"] = "notification";
    doc["name"] = "bad";
    auto r = Api().Post("/api/v1/apply", json::array({doc}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << doc.dump();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(why));
  };
  const json good = {{"tenant", "acme"}, {"url", "http://127.0.0.1:1/x"}, {"secret", kSecret}};
  json doc = good;
  doc["url"] = "ftp://x";
  refused(doc, "url: \"ftp://x\" is not an http:// or https:// address");
  doc["url"] = "http://h:99999999999/x";  // (httplib's std::stoi threw on it, in the notifier)
  refused(doc, "url: \"http://h:99999999999/x\" is not an http:// or https:// address");
  doc["url"] = "http://h:70000/x";
  refused(doc, "url: the port must be 1-65535");
  doc["url"] = "http://user:pw@h/x";
  refused(doc, "no user info");
  doc = good;
  doc["secret"] = "short";
  refused(doc, "secret: is required, at least 16 characters");
  doc = good;
  doc["tenant"] = "nobody";
  refused(doc, "tenant: no tenant \"nobody\"");
  doc = good;
  doc["events"] = json::array();
  refused(doc, "events: must be a non-empty list");
  doc = good;
  doc["wait_longer_than"] = "0s";
  refused(doc, "wait_longer_than: \"0s\" is not a duration from 1s to 720h");
  doc = good;
  doc["retries"] = 3;
  refused(doc, "retries: unknown field");
}

}  // namespace
}  // namespace carve::it
