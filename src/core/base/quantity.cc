#include "core/base/quantity.h"

#include <cstdint>
#include <limits>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace carve {
namespace {

// One accepted suffix: the parsed decimal is multiplied by num/den to give target units.
struct Suffix {
  absl::string_view text;
  absl::int128 num;
  absl::int128 den;
};

const absl::int128 kMib = absl::int128{1} << 20;

absl::StatusOr<int64_t> ParseScaled(absl::string_view what, absl::string_view input,
                                    std::initializer_list<Suffix> suffixes,
                                    absl::string_view hint) {
  absl::string_view text = absl::StripAsciiWhitespace(input);
  auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", what, " \"", input, "\": ", why, " (", hint, ")"));
  };
  if (text.empty()) return error("empty");
  size_t pos = 0;
  absl::int128 mantissa = 0;
  absl::int128 scale = 1;
  int digits = 0;
  bool seen_point = false;
  for (; pos < text.size(); ++pos) {
    char c = text[pos];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (++digits > 30) return error("too many digits");
    mantissa = mantissa * 10 + (c - '0');
    if (seen_point) scale *= 10;
  }
  if (digits == 0) {
    return error(text[0] == '-' ? "must not be negative" : "expected a number");
  }
  absl::string_view suffix = text.substr(pos);
  for (const Suffix& s : suffixes) {
    if (s.text != suffix) continue;
    absl::int128 numerator = mantissa * s.num;
    absl::int128 denominator = scale * s.den;
    if (numerator % denominator != 0) return error("not a whole number of the smallest unit");
    absl::int128 value = numerator / denominator;
    if (value > std::numeric_limits<int64_t>::max()) return error("too large");
    return static_cast<int64_t>(value);
  }
  return error(absl::StrCat("unknown suffix \"", suffix, "\""));
}

}  // namespace

absl::StatusOr<GpuMilli> ParseGpuMilli(absl::string_view text) {
  auto v = ParseScaled("GPU quantity", text, {{"", 1000, 1}, {"m", 1, 1}, {"%", 10, 1}},
                       "write GPUs as 0.5, 500m or 50%; the smallest unit is 1m = 0.001 GPU");
  if (!v.ok()) return v.status();
  return GpuMilli(*v);
}

absl::StatusOr<CpuMilli> ParseCpuMilli(absl::string_view text) {
  auto v = ParseScaled("CPU quantity", text, {{"", 1000, 1}, {"m", 1, 1}},
                       "write cores as 2, 1.5 or 500m; the smallest unit is 1m = 0.001 core");
  if (!v.ok()) return v.status();
  return CpuMilli(*v);
}

absl::StatusOr<MemMib> ParseMemMib(absl::string_view text) {
  const absl::int128 k = 1000;
  auto v = ParseScaled("memory quantity", text,
                       {{"", 1, kMib},
                        {"k", k, kMib},
                        {"Ki", 1024, kMib},
                        {"M", k * k, kMib},
                        {"Mi", 1, 1},
                        {"G", k * k * k, kMib},
                        {"Gi", 1024, 1},
                        {"T", k * k * k * k, kMib},
                        {"Ti", 1024 * 1024, 1},
                        {"P", k * k * k * k * k, kMib},
                        {"Pi", 1024 * 1024 * 1024, 1}},
                       "write memory as 512Mi, 20Gi or 1.5Ti; it must be a whole number of MiB");
  if (!v.ok()) return v.status();
  return MemMib(*v);
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  const absl::int128 k = 1000;
  return ParseScaled(
      "size", text,
      {{"", 1, 1},
       {"k", k, 1},
       {"Ki", 1024, 1},
       {"M", k * k, 1},
       {"Mi", kMib, 1},
       {"G", k * k * k, 1},
       {"Gi", kMib * 1024, 1},
       {"T", k * k * k * k, 1},
       {"Ti", kMib * 1024 * 1024, 1}},
      "write a size as 65536, 64Ki, 64Mi or 1Gi; it must be a whole number of bytes");
}

absl::StatusOr<NetMbps> ParseNetMbps(absl::string_view text) {
  auto v = ParseScaled("network bandwidth", text,
                       {{"", 1, 1}, {"M", 1, 1}, {"G", 1000, 1}, {"T", 1000 * 1000, 1}},
                       "write bandwidth in bit/s as 100M, 25G or 1.5G; the smallest unit is 1M");
  if (!v.ok()) return v.status();
  return NetMbps(*v);
}

std::string FormatMilli(int64_t milli) {
  std::string sign = milli < 0 ? "-" : "";
  uint64_t v = milli < 0 ? -static_cast<uint64_t>(milli) : milli;
  std::string out = absl::StrCat(sign, v / 1000);
  uint64_t frac = v % 1000;
  if (frac == 0) return out;
  std::string digits = absl::StrCat(frac + 1000).substr(1);
  while (digits.back() == '0') digits.pop_back();
  return absl::StrCat(out, ".", digits);
}

std::string FormatMemMib(MemMib mib) {
  int64_t v = mib.units();
  if (v != 0 && v % (1024 * 1024) == 0) return absl::StrCat(v / (1024 * 1024), "Ti");
  if (v != 0 && v % 1024 == 0) return absl::StrCat(v / 1024, "Gi");
  return absl::StrCat(v, "Mi");
}

}  // namespace carve
