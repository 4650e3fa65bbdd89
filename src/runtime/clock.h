#ifndef CARVE_RUNTIME_CLOCK_H_
#define CARVE_RUNTIME_CLOCK_H_

// The process's clocks as whole numbers, for the code around the core (the core takes time as
// input): the wall clock for records, the steady clock for periods and deadlines.

#include <chrono>
#include <cstdint>

namespace carve {

template <typename Unit, typename Clock>
int64_t ClockCount() {
  return std::chrono::duration_cast<Unit>(Clock::now().time_since_epoch()).count();
}

// Microseconds since the epoch.
inline int64_t WallUs() {
  return ClockCount<std::chrono::microseconds, std::chrono::system_clock>();
}
inline int64_t SteadyUs() {
  return ClockCount<std::chrono::microseconds, std::chrono::steady_clock>();
}
inline int64_t SteadyMs() {
  return ClockCount<std::chrono::milliseconds, std::chrono::steady_clock>();
}
inline int64_t SteadyNs() {
  return ClockCount<std::chrono::nanoseconds, std::chrono::steady_clock>();
}

}  // namespace carve

#endif  // CARVE_RUNTIME_CLOCK_H_
