#ifndef CARVE_RUNTIME_VERSION_H_
#define CARVE_RUNTIME_VERSION_H_

#include <string>

namespace carve {

// This build's version: the CMake project version and, when built from a git checkout, its
// `git describe` at configure time ("0.1.0+4a632a2-dirty"); "dev" when neither is known.
std::string CarveVersion();
// The commit this build was configured at ("unknown" outside a git checkout), and how it was
// built: "commit 7fcab4b..., RelWithDebInfo, g++ 12.2.0".
std::string CarveBuild();
// The running kernel ("Linux 6.8.0-45-generic"), from uname(2).
std::string KernelVersion();

}  // namespace carve

#endif  // CARVE_RUNTIME_VERSION_H_
