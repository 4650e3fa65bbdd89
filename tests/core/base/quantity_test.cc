#include "core/base/quantity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace carve {
namespace {

using ::testing::HasSubstr;

TEST(ParseGpuMilli, DecimalIsExactNotTruncated) {
  // A double-based parser turns 0.57 into 569 milli (0.57 * 1000 = 569.999...).
  EXPECT_EQ(ParseGpuMilli("0.57")->units(), 570);
  EXPECT_EQ(ParseGpuMilli("0.29")->units(), 290);
  EXPECT_EQ(ParseGpuMilli("1.005")->units(), 1005);
}

TEST(ParseGpuMilli, AcceptsWholeMilliAndPercent) {
  EXPECT_EQ(ParseGpuMilli("1.5")->units(), 1500);
  EXPECT_EQ(ParseGpuMilli("2")->units(), 2000);
  EXPECT_EQ(ParseGpuMilli("500m")->units(), 500);
  EXPECT_EQ(ParseGpuMilli("30%")->units(), 300);
  EXPECT_EQ(ParseGpuMilli(" .25 ")->units(), 250);
}

TEST(ParseGpuMilli, RejectsWhatItCannotRepresent) {
  auto r = ParseGpuMilli("0.5705");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("not a whole number of the smallest unit"));
  EXPECT_THAT(ParseGpuMilli("1.5m").status().message(), HasSubstr("smallest unit"));
  EXPECT_THAT(ParseGpuMilli("").status().message(), HasSubstr("empty"));
  EXPECT_THAT(ParseGpuMilli("-1").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseGpuMilli("1GPU").status().message(), HasSubstr("unknown suffix \"GPU\""));
  EXPECT_THAT(ParseGpuMilli("abc").status().message(), HasSubstr("expected a number"));
  EXPECT_FALSE(ParseGpuMilli("1..5").ok());
  EXPECT_FALSE(ParseGpuMilli("99999999999999999999999").ok());
}

TEST(ParseCpuMilli, CoresAndMillicores) {
  EXPECT_EQ(ParseCpuMilli("500m")->units(), 500);
  EXPECT_EQ(ParseCpuMilli("16")->units(), 16000);
  EXPECT_EQ(ParseCpuMilli("0.1")->units(), 100);
  EXPECT_FALSE(ParseCpuMilli("50%").ok());
}

TEST(ParseMemMib, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(ParseMemMib("20Gi")->units(), 20480);
  EXPECT_EQ(ParseMemMib("1.5Gi")->units(), 1536);
  EXPECT_EQ(ParseMemMib("512Mi")->units(), 512);
  EXPECT_EQ(ParseMemMib("1Ti")->units(), 1048576);
  EXPECT_EQ(ParseMemMib("2048Ki")->units(), 2);
  EXPECT_EQ(ParseMemMib("1048576")->units(), 1);  // bare numbers are bytes
}

TEST(ParseMemMib, RejectsPartialMebibytes) {
  EXPECT_THAT(ParseMemMib("10G").status().message(), HasSubstr("smallest unit"));
  EXPECT_THAT(ParseMemMib("4096").status().message(), HasSubstr("whole number of MiB"));
  EXPECT_THAT(ParseMemMib("1.0001Gi").status().message(), HasSubstr("smallest unit"));
}

TEST(ParseNetMbps, BitRates) {
  EXPECT_EQ(ParseNetMbps("100M")->units(), 100);
  EXPECT_EQ(ParseNetMbps("25G")->units(), 25000);
  EXPECT_EQ(ParseNetMbps("1.5G")->units(), 1500);
  EXPECT_EQ(ParseNetMbps("400")->units(), 400);
  EXPECT_FALSE(ParseNetMbps("0.5M").ok());
}

TEST(ParseBytes, SuffixesAndErrors) {
  EXPECT_EQ(*ParseBytes("65536"), 65536);
  EXPECT_EQ(*ParseBytes("64Ki"), 65536);
  EXPECT_EQ(*ParseBytes("64Mi"), int64_t{64} << 20);
  EXPECT_EQ(*ParseBytes("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(*ParseBytes("2k"), 2000);
  EXPECT_FALSE(ParseBytes("0.5").ok());
  EXPECT_FALSE(ParseBytes("-1Mi").ok());
  EXPECT_FALSE(ParseBytes("64MB").ok());
  EXPECT_FALSE(ParseBytes("9000000Ti").ok());
}

TEST(FormatQuantity, ShortestExactForm) {
  EXPECT_EQ(FormatMilli(1500), "1.5");
  EXPECT_EQ(FormatMilli(570), "0.57");
  EXPECT_EQ(FormatMilli(2000), "2");
  EXPECT_EQ(FormatMilli(5), "0.005");
  EXPECT_EQ(FormatMemMib(MemMib(20480)), "20Gi");
  EXPECT_EQ(FormatMemMib(MemMib(1536)), "1536Mi");
}

TEST(FormatQuantity, RoundTripsThroughParse) {
  for (int64_t v : {0, 1, 10, 99, 570, 1000, 1001, 123456}) {
    EXPECT_EQ(ParseGpuMilli(FormatMilli(v))->units(), v) << v;
  }
}

}  // namespace
}  // namespace carve
