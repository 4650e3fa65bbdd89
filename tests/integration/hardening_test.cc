// Hardening of the API against the real server: a flooding client is rate-limited while others
// are served, oversized bodies are refused, idle connections do not block others; /metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "integration/harness.h"

namespace carve {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using json = nlohmann::json;
using namespace carve::it;  // NOLINT: the harness

const NodeList kNoNodes = {};

class HardeningTest : public PlatformTest {
 protected:
  const NodeList& Nodes() const override { return kNoNodes; }

  std::string MemberToken(const std::string& name) {
    EXPECT_TRUE(
        Api()
            .Post(
                "/api/v1/users",
                {{"name", name}, {"role", "member"}, {"tenant", "default"}, {"project", "default"}})
            .ok());
    return (*Api().Post("/api/v1/tokens", {{"user", name}}))["token"];
  }

  int Get(const std::string& path, const std::string& token) {
    httplib::Client cli(url_);
    auto r = cli.Get(path, {{"Authorization", "Bearer " + token}});
    return r ? r->status : 0;
  }
};

TEST_F(HardeningTest, AFloodingTokenIsLimitedWhileOthersAreServed) {
  std::string flooder = MemberToken("flooder");
  std::string other = MemberToken("other");
  std::atomic<int> limited{0}, served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      httplib::Client cli(url_);
      for (int i = 0; i < 150; ++i) {
        auto r = cli.Get("/api/v1/jobs", {{"Authorization", "Bearer " + flooder}});
        if (r && r->status == 429) ++limited;
        if (r && r->status == 200) ++served;
      }
    });
  }
  // Meanwhile another member's requests all succeed.
  int ok = 0;
  for (int i = 0; i < 40; ++i) ok += Get("/api/v1/jobs", other) == 200;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 40);
  EXPECT_GT(limited.load(), 0);
  EXPECT_GT(served.load(), 0);
  EXPECT_EQ(limited + served, 8 * 150);
  httplib::Client cli(url_);
  auto r = cli.Get("/api/v1/jobs", {{"Authorization", "Bearer " + flooder}});
  ASSERT_TRUE(r);
  if (r->status == 429) {
    EXPECT_THAT(r->body, HasSubstr("rate limit"));
  }
  auto metrics = cli.Get("/metrics", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(metrics);
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(metrics->body, m, std::regex("carve_api_rate_limited_total ([0-9]+)")));
  EXPECT_GE(std::stoi(m[1]), limited.load());
}

TEST_F(HardeningTest, OversizedBodiesAreRefusedAndChangeNothing) {
  size_t before = Api().Get("/api/v1/jobs?all=true")->size();
  httplib::Client cli(url_);
  std::string big = json{{"command", {"true"}}, {"env", {{"X", std::string(5 << 20, 'x')}}}}.dump();
  auto r =
      cli.Post("/api/v1/jobs", {{"Authorization", "Bearer " + token_}}, big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_THAT(r->body, HasSubstr("too large"));
  EXPECT_EQ(Api().Get("/api/v1/jobs?all=true")->size(), before);
}

TEST_F(HardeningTest, IdleConnectionsDoNotBlockOthers) {
  std::vector<int> sockets;
  int port = std::stoi(url_.substr(url_.rfind(':') + 1));
  for (int i = 0; i < 24; ++i) {  // half-sent requests, held open
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    std::string partial = "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n";
    ASSERT_GT(write(fd, partial.data(), partial.size()), 0);
    sockets.push_back(fd);
  }
  int ok = 0;
  for (int i = 0; i < 20; ++i) ok += Get("/api/v1/jobs", token_) == 200;
  EXPECT_EQ(ok, 20);
  for (int fd : sockets) close(fd);
}

// /metrics in the Prometheus text format, with labels naming the tenant and job.
TEST_F(PlatformTest, MetricsExposeDevicesQueuesAndCycles) {
  json waiting = Submit({{"command", {"true"}}, {"resources", {{"gpus", 8}}}}, "", true);
  json done = Submit({{"command", {"true"}}});
  WaitFinal(done["id"]);
  httplib::Client cli(url_);
  auto r = cli.Get("/metrics", {{"Authorization", "Bearer " + token_}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain"));
  const std::string& text = r->body;
  EXPECT_THAT(text, HasSubstr("carve_gpus{model=\"H200-141GB\",pool=\"default\","
                              "state=\"installed\"} 3"));
  EXPECT_THAT(text, HasSubstr("carve_queue_depth{queue=\"default\",tenant=\"default\"} 1"));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("carve_job_wait_seconds{job=\"", waiting["id"].get<int64_t>(),
                                     "\",queue=\"default\",tenant=\"default\"}")));
  EXPECT_THAT(text, HasSubstr("carve_reclaims{outcome=\"verified\"} 1"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("carve_scheduler_cycle_seconds_count (\\d+)")));
  EXPECT_GT(std::stoi(m[1]), 0);
  // Every sample line is NAME{labels} VALUE or NAME VALUE.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_THAT(line, MatchesRegex("[a-z_]+(\\{.*\\})? [-+0-9.e]+")) << line;
  }
}

}  // namespace
}  // namespace carve
