// The API server in process: connection handling under a small concurrent load.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "runtime/api_server.h"
#include "runtime/control_plane.h"

namespace carve {
namespace {

constexpr char kAdminToken[] = "api-server-test-admin-token";

// 16 clients, each on one kept-alive connection, 100 requests each: no response closes the
// connection (cpp-httplib's default closed it after 5 requests, Carve's after 20, so every
// client reconnected and, with the listen queue full, waited for a SYN retransmit).
TEST(ApiServerTest, SixteenClientsKeepTheirConnectionsAlive) {
  auto dir = std::filesystem::path(::testing::TempDir()) / absl::StrCat("api-server-", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = OpenSqliteStore((dir / "carve.db").string());
  ASSERT_TRUE(store.ok()) << store.status();
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  ControlPlane::Options cp_options;
  cp_options.log_dir = (dir / "logs").string();
  auto cp = ControlPlane::Open(store->get(), &catalog, cp_options, [] { return int64_t{1} << 50; });
  ASSERT_TRUE(cp.ok()) << cp.status();
  ASSERT_TRUE((*cp)->AddToken(kAdminToken, "admin", Role::kAdmin).ok());
  ApiServer::Options options;
  options.port = 0;
  ApiServer api(cp->get(), options);
  ASSERT_TRUE(api.Start().ok());

  constexpr int kClients = 16;
  constexpr int kRequests = 100;
  std::atomic<int> ok{0};
  std::atomic<int> closed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      httplib::Client http("127.0.0.1", api.port());
      http.set_keep_alive(true);
      http.set_bearer_token_auth(kAdminToken);
      for (int i = 0; i < kRequests; ++i) {
        auto res = http.Get("/api/v1/jobs");
        if (!res) continue;
        ok += res->status == 200;
        closed += res->get_header_value("Connection") == "close";
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, kClients * kRequests);
  EXPECT_EQ(closed, 0) << "responses that closed their kept-alive connection";
  api.Stop();
}

}  // namespace
}  // namespace carve
