// Whether this build runs under a sanitizer (scripts/sanitize). A job's monitor (`carve
// internal-run`, this build's binary) then needs about 230 MiB of memory (measured with ASan),
// more than the smallest limits the tests give jobs.
#ifndef CARVE_TESTS_INTEGRATION_SANITIZED_H_
#define CARVE_TESTS_INTEGRATION_SANITIZED_H_

namespace carve::it {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace carve::it

#endif  // CARVE_TESTS_INTEGRATION_SANITIZED_H_
