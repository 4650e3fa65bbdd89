#include "runtime/version.h"

#include <sys/utsname.h>

#include "version_stamp.h"  // generated at build time (cmake/version.cmake)

namespace carve {

std::string CarveVersion() {
#ifdef CARVE_VERSION
  return CARVE_VERSION;
#else
  return "dev";
#endif
}

std::string CarveBuild() {
#if defined(CARVE_COMMIT) && defined(CARVE_BUILD_TYPE)
  std::string out = std::string("commit ") + CARVE_COMMIT + ", " + CARVE_BUILD_TYPE;
#else
  std::string out = "commit unknown";
#endif
#if defined(__clang__)
  out += ", clang " __clang_version__;
#elif defined(__GNUC__)
  out += ", g++ " __VERSION__;
#endif
  return out;
}

std::string KernelVersion() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release;
}

}  // namespace carve
