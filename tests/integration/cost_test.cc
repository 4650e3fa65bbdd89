// Cost allocation against the real server (runtime/cost.h): a price applied, a job run, its
// tenant's invoice for the month has the job's attempt at that price and `carve cost` sums the
// same; the invoice is for admins and the tenant's tenant-admins; a bad price names its field.
#include <fstream>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "integration/cli.h"
#include "integration/harness.h"

namespace carve::it {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

class CostTest : public PlatformTest {
 protected:
  void SetUp() override {
    PlatformTest::SetUp();
    auto applied = Api().Post(
        "/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "acme"}},
                                      {{"kind", "project"}, {"name", "vision"}, {"tenant", "acme"}},
                                      {{"kind", "price"},
                                       {"name", "list-2026"},
                                       {"effective_from", "2026-01-01"},
                                       {"currency", "EUR"},
                                       {"gpu_hour", {{"H200", 3.6}, {"*", 1.0}}},
                                       {"cpu_core_hour", 0.036},
                                       {"memory_gib_hour", 0.0036}}}));
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  CliRun Cli(const std::string& args) {
    return RunShell(absl::StrCat("CARVE_SERVER=", url_, " CARVE_TOKEN=", token_, " ", CARVE_BINARY,
                                 " ", args, " 2>&1"));
  }

  static std::string ThisMonth() {
    return absl::FormatTime("%Y-%m", absl::Now(), absl::UTCTimeZone());
  }
};

TEST_F(CostTest, AnInvoiceHasEachAttemptAtItsPriceAndCostSumsTheSame) {
  const std::string month =
      ThisMonth();  // before the job: one that ends at midnight is still in it
  const int64_t id =
      Submit({{"tenant", "acme"},
              {"project", "vision"},
              {"resources", {{"gpus", 1}, {"gpu_model", "H200"}, {"cpu", "1"}, {"memory", "1Gi"}}},
              {"command", {"sleep", "1"}}})["id"];
  ASSERT_EQ(WaitFinal(id)["state"], "succeeded");
  json invoice = ApiGet(absl::StrCat("/api/v1/invoices?tenant=acme&month=", month));
  ASSERT_EQ(invoice["lines"].size(), 1u) << invoice.dump(2);
  const json& line = invoice["lines"][0];
  EXPECT_EQ(line["job"], id);
  EXPECT_EQ(line["models"], "H200-141GB");  // priced as "H200", the catalog's alias
  EXPECT_EQ(line["price"], "list-2026");
  EXPECT_EQ(line["currency"], "EUR");
  EXPECT_EQ(line["gpu_price"], 3.6);
  const double hours = line["hours"];
  EXPECT_GT(hours, 0);
  EXPECT_THAT(line["gpu_cost"].get<double>(), DoubleNear(3.6 * hours, 1e-9));
  EXPECT_THAT(line["cpu_cost"].get<double>(), DoubleNear(0.036 * hours, 1e-9));
  EXPECT_THAT(line["memory_cost"].get<double>(), DoubleNear(0.0036 * hours, 1e-9));
  EXPECT_THAT(invoice["total"].get<double>(), DoubleNear(3.6396 * hours, 1e-9));

  // `carve cost` prices the same usage; nothing of another tenant is in acme's invoice.
  json cost =
      ApiGet(absl::StrCat("/api/v1/cost?by=tenant&since_us=", invoice["from_us"].get<int64_t>(),
                          "&until_us=", invoice["to_us"].get<int64_t>()));
  bool found = false;
  for (const json& r : cost["rows"]) {
    if (r["tenant"] != "acme") continue;
    found = true;
    EXPECT_EQ(r["jobs"], 1);
    EXPECT_THAT(r["total"].get<double>(), DoubleNear(invoice["total"].get<double>(), 1e-9));
  }
  EXPECT_TRUE(found) << cost.dump(2);

  CliRun csv = Cli(absl::StrCat("export invoice --tenant acme --month ", month));
  ASSERT_EQ(csv.exit, 0) << csv.out;
  std::vector<std::string> rows = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(rows.size(), 2u) << csv.out;
  EXPECT_THAT(rows[0], HasSubstr("tenant,project,queue,user,job,attempt"));
  EXPECT_THAT(rows[1], HasSubstr("acme,vision"));
  CliRun table = Cli("cost --by project");
  EXPECT_EQ(table.exit, 0) << table.out;
  EXPECT_THAT(table.out, HasSubstr("acme/vision"));
  EXPECT_THAT(table.out, HasSubstr("EUR"));
}

TEST_F(CostTest, AnInvoiceIsForAdminsAndTheTenantsTenantAdmins) {
  ApiClient member(url_, MemberToken("alice", "acme", "vision"), ca_);
  auto refused = member.Get(absl::StrCat("/api/v1/invoices?tenant=acme&month=", ThisMonth()));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  // Its tenant's tenant-admin reads it; another tenant's does not.
  ASSERT_TRUE(
      Api().Post("/api/v1/apply", json::array({{{"kind", "tenant"}, {"name", "globex"}}})).ok());
  for (const char* tenant : {"acme", "globex"}) {
    ASSERT_TRUE(Api()
                    .Post("/api/v1/users", {{"name", absl::StrCat("ta-", tenant)},
                                            {"role", "tenant-admin"},
                                            {"tenant", tenant}})
                    .ok());
  }
  auto token = [&](const std::string& user) {
    auto t = Api().Post("/api/v1/tokens", {{"user", user}, {"expires_in", "1d"}});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? (*t)["token"].get<std::string>() : "";
  };
  const std::string path = absl::StrCat("/api/v1/invoices?tenant=acme&month=", ThisMonth());
  EXPECT_TRUE(ApiClient(url_, token("ta-acme"), ca_).Get(path).ok());
  EXPECT_EQ(ApiClient(url_, token("ta-globex"), ca_).Get(path).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Members read their own costs, and the prices.
  EXPECT_TRUE(member.Get("/api/v1/cost?by=user").ok());
  auto prices = member.Get("/api/v1/prices");
  ASSERT_TRUE(prices.ok()) << prices.status();
  ASSERT_EQ(prices->size(), 1u);
  EXPECT_EQ((*prices)[0]["name"], "list-2026");
  // A month that is not one, a tenant that does not exist.
  auto bad = Api().Get("/api/v1/invoices?tenant=acme&month=2026-13");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("month: \"2026-13\""));
  auto nobody = Api().Get(absl::StrCat("/api/v1/invoices?tenant=nobody&month=", ThisMonth()));
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CostTest, PricesShareOneCurrencyAndNeverTakeEffectAtTheSameMoment) {
  json other = {
      {"kind", "price"}, {"name", "usd"}, {"effective_from", "2026-06-01"}, {"currency", "USD"}};
  auto currency = Api().Post("/api/v1/apply", json::array({other}));
  EXPECT_THAT(std::string(currency.status().message()),
              HasSubstr("currency: every price shares one"));
  other["currency"] = "EUR";
  other["effective_from"] = "2026-01-01";
  auto same = Api().Post("/api/v1/apply", json::array({other}));
  EXPECT_THAT(std::string(same.status().message()), HasSubstr("takes effect at that moment"));
  other["effective_from"] = "2026-06-01";
  EXPECT_TRUE(Api().Post("/api/v1/apply", json::array({other})).ok());
}

// The documented example applies from its file as written: its prices (4.20) were YAML text,
// and refused as "not a price", until decimals read as numbers.
TEST_F(CostTest, TheExamplePriceFileApplies) {
  // In the fixture's currency (every price shares one), otherwise as written.
  std::string text = Slurp(absl::StrCat(CARVE_SOURCE_DIR, "/examples/price.yaml"));
  ASSERT_NE(text.find("currency: USD"), std::string::npos);
  text.replace(text.find("currency: USD"), 13, "currency: EUR");
  std::ofstream(dir_ / "price.yaml") << text;
  CliRun applied = Cli("apply -f " + (dir_ / "price.yaml").string());
  ASSERT_EQ(applied.exit, 0) << applied.out;
  json prices = ApiGet("/api/v1/prices");
  ASSERT_EQ(prices.size(), 2u) << prices.dump();
  EXPECT_EQ(prices[1]["gpu_hour"]["H200"], 4.2);
  EXPECT_EQ(prices[1]["gpu_hour"]["A100-80GB"]["reserved"], 1.5);
}

TEST_F(CostTest, ABadPriceIsRefusedNamingTheFieldAndNothingIsApplied) {
  auto r = Api().Post("/api/v1/apply", json::array({{{"kind", "price"},
                                                     {"name", "broken"},
                                                     {"effective_from", "2026-01-01"},
                                                     {"gpu_hour", {{"H200", "three"}}}}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("gpu_hour.H200"));
  EXPECT_EQ(ApiGet("/api/v1/prices").size(), 1u);
}

}  // namespace
}  // namespace carve::it
