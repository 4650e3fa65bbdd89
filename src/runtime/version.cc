#include "runtime/version.h"

#include <sys/utsname.h>

namespace carve {

std::string CarveVersion() {
#ifdef CARVE_VERSION
  return CARVE_VERSION;
#else
  return "dev";
#endif
}

std::string KernelVersion() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release;
}

}  // namespace carve
