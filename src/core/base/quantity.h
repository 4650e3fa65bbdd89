#ifndef CARVE_CORE_BASE_QUANTITY_H_
#define CARVE_CORE_BASE_QUANTITY_H_

#include <compare>
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace carve {

// Fixed-point resource quantities: an int64 count of the smallest unit Carve schedules.
// Parsing is exact: a string that cannot be represented in the unit is an error, never rounded.
template <typename Unit>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t units) : units_(units) {}

  constexpr int64_t units() const { return units_; }

  constexpr Quantity& operator+=(Quantity o) {
    units_ += o.units_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    units_ -= o.units_;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity(a.units_ + b.units_);
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity(a.units_ - b.units_);
  }
  friend constexpr Quantity operator*(Quantity a, int64_t k) { return Quantity(a.units_ * k); }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  int64_t units_ = 0;
};

struct GpuMilliUnit {};  // 1000 = one whole GPU (compute share).
struct CpuMilliUnit {};  // 1000 = one core.
struct MemMibUnit {};    // Mebibytes: memory, GPU memory and storage.
struct NetMbpsUnit {};   // Megabits per second.

using GpuMilli = Quantity<GpuMilliUnit>;
using CpuMilli = Quantity<CpuMilliUnit>;
using MemMib = Quantity<MemMibUnit>;
using NetMbps = Quantity<NetMbpsUnit>;

inline constexpr GpuMilli kWholeGpu{1000};

// "0.57" -> 570, "500m" -> 500, "1.5" -> 1500, "30%" -> 300. Sub-milli precision is an error.
absl::StatusOr<GpuMilli> ParseGpuMilli(absl::string_view text);
// "500m" -> 500, "1.5" -> 1500, "16" -> 16000.
absl::StatusOr<CpuMilli> ParseCpuMilli(absl::string_view text);
// Binary suffixes Ki, Mi, Gi, Ti, Pi and decimal k, M, G, T, P (Kubernetes conventions); a bare
// number is bytes. The result must be a whole number of MiB: "20Gi" -> 20480, "1.5Gi" -> 1536.
absl::StatusOr<MemMib> ParseMemMib(absl::string_view text);
// Sizes in bytes, same suffixes as ParseMemMib: "64Mi" -> 67108864, "64Ki" -> 65536, "100" -> 100.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);
// Bit rates: bare numbers and "M" are Mbit/s, "G" Gbit/s, "T" Tbit/s; "1.5G" -> 1500.
absl::StatusOr<NetMbps> ParseNetMbps(absl::string_view text);

// Inverse formatting, shortest exact form: 1500 milli -> "1.5", 500 -> "0.5", 20480 MiB -> "20Gi".
std::string FormatMilli(int64_t milli);
std::string FormatMemMib(MemMib mib);

}  // namespace carve

#endif  // CARVE_CORE_BASE_QUANTITY_H_
