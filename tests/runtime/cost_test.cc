#include "runtime/cost.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using json = nlohmann::json;
using ::testing::DoubleNear;
using ::testing::HasSubstr;

constexpr int64_t kHour = 3'600'000'000;

const GpuCatalog& Catalog() {
  static const GpuCatalog kCatalog = GpuCatalog::BuiltIn();
  return kCatalog;
}

PriceConfig Price(const std::string& name, int64_t effective_us, double h200) {
  auto p = DecodePrice({{"name", name},
                        {"effective_from", "2026-11-01"},
                        {"gpu_hour", {{"H200", h200}, {"A100-80GB", {{"partition", 2.8}}}}},
                        {"cpu_core_hour", 0.05},
                        {"memory_gib_hour", 0.01}},
                       Catalog());
  EXPECT_TRUE(p.ok()) << p.status();
  p->effective_us = effective_us;
  return *p;
}

// A usage record as control_plane_usage.cc writes it: one attempt holding `devices`.
json Record(int64_t job, const std::string& mode, json devices, int64_t from, int64_t to) {
  return {{"job", job},
          {"attempt", 0},
          {"tenant", "acme"},
          {"project", "vision"},
          {"queue", "default"},
          {"user", "alice"},
          {"mode", mode},
          {"replicas", 1},
          {"cpu_milli_per_replica", 2000},
          {"memory_mib_per_replica", 4096},
          {"held_from_us", from},
          {"held_to_us", to},
          {"end", "succeeded"},
          {"devices", std::move(devices)},
          {"device_busy_seconds", nullptr}};
}

TEST(CostTest, AnAttemptAcrossAPriceChangeHasALineForEachSideAtItsPrice) {
  const json rec = Record(1, "exclusive", {{{"model", "H200-141GB"}, {"gpus", 1.0}}}, 0, 2 * kHour);
  const json lines =
      InvoiceLines(json::array({rec}), {Price("old", 0, 4), Price("new", kHour, 5)}, 0, 10 * kHour);
  ASSERT_EQ(lines.size(), 2u) << lines.dump(2);
  EXPECT_EQ(lines[0]["price"], "old");
  EXPECT_THAT(lines[0]["gpu_cost"].get<double>(), DoubleNear(4, 1e-9));
  EXPECT_EQ(lines[1]["price"], "new");
  EXPECT_THAT(lines[1]["gpu_cost"].get<double>(), DoubleNear(5, 1e-9));
  // 2 cores and 4 GiB for an hour each side.
  EXPECT_THAT(lines[1]["cpu_cost"].get<double>(), DoubleNear(2 * 0.05, 1e-9));
  EXPECT_THAT(lines[1]["memory_cost"].get<double>(), DoubleNear(4 * 0.01, 1e-9));
  EXPECT_THAT(lines[1]["total"].get<double>(), DoubleNear(5 + 0.1 + 0.04, 1e-9));
  EXPECT_EQ(lines[1]["gpu_price"], 5);
}

TEST(CostTest, APartitionIsChargedByItsSlicesAndTheRangeCutsTheHold) {
  // 3g.40gb of an A100: 3/7 of a GPU, for the 1 h of its 3 h hold inside the range.
  const json rec =
      Record(2, "partition", {{{"model", "A100-80GB"}, {"gpus", 3.0 / 7}}}, 0, 3 * kHour);
  const json lines = InvoiceLines(json::array({rec}), {Price("p", 0, 4)}, 2 * kHour, 10 * kHour);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0]["gpu_hours"].get<double>(), DoubleNear(3.0 / 7, 1e-9));
  EXPECT_THAT(lines[0]["gpu_cost"].get<double>(), DoubleNear(3.0 / 7 * 2.8, 1e-9));
  EXPECT_EQ(lines[0]["from_us"], 2 * kHour);
}

TEST(CostTest, AModelNoPriceCoversIsUnpricedNotFree) {
  const json rec = Record(3, "exclusive", {{{"model", "T4"}, {"gpus", 1.0}}}, 0, kHour);
  const json lines = InvoiceLines(json::array({rec}), {Price("p", 0, 4)}, 0, kHour);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["unpriced_gpu_hours"], 1.0);
  EXPECT_EQ(lines[0]["gpu_cost"], 0.0);
  EXPECT_TRUE(lines[0]["gpu_price"].is_null());
  // Before any price took effect nothing prices it either.
  const json early = InvoiceLines(json::array({rec}), {Price("p", 5 * kHour, 4)}, 0, kHour);
  EXPECT_EQ(early[0]["price"], "");
  EXPECT_EQ(early[0]["total"], 0.0);
}

TEST(CostTest, IdleTimeIsShownApartWhereTheNodeMeasuredIt) {
  json rec = Record(4, "exclusive", {{{"model", "H200-141GB"}, {"gpus", 1.0}}}, 0, kHour);
  rec["device_busy_seconds"] = 900;  // busy a quarter of the hour
  const json lines = InvoiceLines(json::array({rec}), {Price("p", 0, 4)}, 0, kHour);
  EXPECT_THAT(lines[0]["idle_gpu_hours"].get<double>(), DoubleNear(0.75, 1e-9));
  EXPECT_THAT(lines[0]["idle_cost"].get<double>(), DoubleNear(3, 1e-9));
  // A share's busy time is not its own: not measured.
  json share = Record(5, "shared", {{{"model", "H200-141GB"}, {"gpus", 0.5}}}, 0, kHour);
  share["device_busy_seconds"] = 10;
  const json shared = InvoiceLines(json::array({share}), {Price("p", 0, 4)}, 0, kHour);
  EXPECT_TRUE(shared[0]["idle_gpu_hours"].is_null());

  auto by = CostBy("tenant", json{lines[0], shared[0]});
  ASSERT_TRUE(by.ok()) << by.status();
  const json row = (*by)["rows"][0];
  EXPECT_EQ(row["tenant"], "acme");
  EXPECT_EQ(row["jobs"], 2);
  EXPECT_THAT(row["gpu_cost"].get<double>(), DoubleNear(4 + 2, 1e-9));
  EXPECT_THAT(row["idle_gpu_hours"].get<double>(), DoubleNear(0.75, 1e-9));
  EXPECT_THAT(row["idle_unmeasured_gpu_hours"].get<double>(), DoubleNear(0.5, 1e-9));
  EXPECT_EQ(row["currency"], "USD");
  EXPECT_THAT(std::string(CostBy("model", lines).status().message()),
              HasSubstr("by: \"model\" is not tenant, project, queue or user"));
}

TEST(CostTest, AMonthIsItsFirstDayToTheNextsInUtc) {
  auto nov = MonthRange("2026-11");
  ASSERT_TRUE(nov.ok());
  EXPECT_EQ(nov->first, 1'793'491'200'000'000);   // 2026-11-01T00:00:00Z
  EXPECT_EQ(nov->second, 1'796'083'200'000'000);  // 2026-12-01T00:00:00Z
  auto dec = MonthRange("2026-12");
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(dec->second, 1'798'761'600'000'000);  // 2027-01-01
  EXPECT_THAT(std::string(MonthRange("November").status().message()),
              HasSubstr("month: \"November\" is not a month such as 2026-11"));
}

TEST(CostTest, ABadPriceIsRefusedNamingTheField) {
  auto refused = [](json doc, const std::string& why) {
    doc["name"] = "p";
    if (!doc.contains("effective_from")) doc["effective_from"] = "2026-11-01";
    auto p = DecodePrice(doc, Catalog());
    ASSERT_FALSE(p.ok()) << doc.dump();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(why));
  };
  refused({{"effective_from", "soon"}}, "effective_from: \"soon\" is not a date");
  refused({{"gpu_hour", {{"H200", -1}}}}, "gpu_hour.H200: -1 is not a price");
  refused({{"gpu_hour", {{"H200", {{"mig", 1}}}}}},
          "gpu_hour.H200: \"mig\" is not a delivery mode");
  refused({{"cpu_core_hour", "cheap"}}, "cpu_core_hour: \"cheap\" is not a price");
  refused({{"currency", ""}}, "currency: must be a short label");
  refused({{"discount", 3}}, "discount: unknown field");
  json none = {{"name", "p"}};
  EXPECT_THAT(std::string(DecodePrice(none, Catalog()).status().message()),
              HasSubstr("effective_from: is required"));
  refused({{"gpu_hour", {{"Z9", 1}}}}, "gpu_hour.Z9: no GPU model \"Z9\"");
  auto ok = DecodePrice(
      {{"name", "p"}, {"effective_from", "2026-11-01T12:00:00Z"}, {"gpu_hour", {{"H200", 4}}}},
      Catalog());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->effective_us, 1'793'534'400'000'000);
  // An alias is kept under the catalog's name, the one usage records carry.
  EXPECT_EQ(ok->GpuHour("H200-141GB", "exclusive"), 4);
  EXPECT_FALSE(ok->GpuHour("H200", "exclusive").has_value());
}

// A reservation of two H200 for 4 hours: the holder used one of them for 3 hours (and another
// node, outside the reservation, which is not counted): 5 GPU-hours reserved but unused, at the
// reserved price where one is set, else the model's; a price change splits the window.
TEST(CostTest, ReservedButUnusedTimeIsChargedToTheHolder) {
  ReservedCapacity r{"launch", "acme", "", 2 * kHour, 6 * kHour, {{"n-1", {{"H200-141GB", 2}}}},
                     {}};
  json used = Record(1, "exclusive", {{{"node", "n-1"}, {"model", "H200-141GB"}, {"gpus", 1.0}}},
                     kHour, 5 * kHour);
  json elsewhere = Record(
      2, "exclusive", {{{"node", "n-2"}, {"model", "H200-141GB"}, {"gpus", 1.0}}}, 0, 8 * kHour);
  json other_tenant = used;
  other_tenant["tenant"] = "globex";
  PriceConfig price = Price("p", 0, 4);
  price.gpu_hour["H200-141GB"]["reserved"] = 1.5;
  const json records = json::array({used, elsewhere, other_tenant});
  json lines = ReservedLines({r}, records, {price}, 0, 10 * kHour);
  ASSERT_EQ(lines.size(), 1u) << lines.dump(2);
  EXPECT_EQ(lines[0]["kind"], "reservation");
  EXPECT_EQ(lines[0]["tenant"], "acme");
  EXPECT_THAT(lines[0]["reserved_gpu_hours"].get<double>(), DoubleNear(8, 1e-9));
  EXPECT_THAT(lines[0]["used_gpu_hours"].get<double>(), DoubleNear(3, 1e-9));
  EXPECT_THAT(lines[0]["gpu_hours"].get<double>(), DoubleNear(5, 1e-9));
  EXPECT_THAT(lines[0]["total"].get<double>(), DoubleNear(7.5, 1e-9));
  // Without a reserved price, the model's; a price taking effect at hour 4 splits the window.
  lines =
      ReservedLines({r}, records, {Price("old", 0, 4), Price("new", 4 * kHour, 5)}, 0, 10 * kHour);
  ASSERT_EQ(lines.size(), 2u) << lines.dump(2);
  EXPECT_THAT(lines[0]["gpu_hours"].get<double>(), DoubleNear(2, 1e-9));  // 4 - 2 used
  EXPECT_THAT(lines[0]["gpu_cost"].get<double>(), DoubleNear(8, 1e-9));
  EXPECT_THAT(lines[1]["gpu_hours"].get<double>(), DoubleNear(3, 1e-9));  // 4 - 1 used
  EXPECT_THAT(lines[1]["gpu_cost"].get<double>(), DoubleNear(15, 1e-9));
  // Only the window's part inside the range; none outside it.
  EXPECT_TRUE(ReservedLines({r}, records, {price}, 6 * kHour, 10 * kHour).empty());
  // Summed apart from the jobs' own cost, and not counted as a job.
  auto by = CostBy("tenant", ReservedLines({r}, records, {price}, 0, 10 * kHour));
  ASSERT_TRUE(by.ok());
  EXPECT_EQ(by->at("rows")[0]["jobs"], 0);
  EXPECT_THAT(by->at("rows")[0]["reserved_unused_cost"].get<double>(), DoubleNear(7.5, 1e-9));
}

// A reservation of gpus holds two of n-1's GPUs (0 and 1): the holder's use of GPU 3 there is not
// use of the reservation, so all 8 reserved GPU-hours are unused but the 3 on GPU 1.
TEST(CostTest, OnlyTheHeldDevicesCountAsUseOfAReservationOfGpus) {
  ReservedCapacity r{
      "eval", "acme", "", 2 * kHour, 6 * kHour, {{"n-1", {{"H200-141GB", 2}}}}, {{"n-1", {0, 1}}}};
  json on_held = Record(1, "exclusive",
                        {{{"node", "n-1"}, {"device", 1}, {"model", "H200-141GB"}, {"gpus", 1.0}}},
                        kHour, 5 * kHour);
  json beside = Record(2, "exclusive",
                       {{{"node", "n-1"}, {"device", 3}, {"model", "H200-141GB"}, {"gpus", 1.0}}},
                       0, 8 * kHour);
  json lines =
      ReservedLines({r}, json::array({on_held, beside}), {Price("p", 0, 4)}, 0, 10 * kHour);
  ASSERT_EQ(lines.size(), 1u) << lines.dump(2);
  EXPECT_THAT(lines[0]["reserved_gpu_hours"].get<double>(), DoubleNear(8, 1e-9));
  EXPECT_THAT(lines[0]["used_gpu_hours"].get<double>(), DoubleNear(3, 1e-9));
  EXPECT_THAT(lines[0]["gpu_hours"].get<double>(), DoubleNear(5, 1e-9));
}

}  // namespace
}  // namespace carve
