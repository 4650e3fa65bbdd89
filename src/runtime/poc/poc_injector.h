// The operator's fault injector (--fault-command): the faults the kit cannot make through the
// API (a device fault, a node cut off, a driver upgrade), each undone when its test ends.
#ifndef CARVE_RUNTIME_POC_POC_INJECTOR_H_
#define CARVE_RUNTIME_POC_POC_INJECTOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/poc/poc.h"
#include "runtime/poc/poc_cluster.h"

namespace carve::poc {

// The operator's --fault-command, and the faults it injected that are not undone yet: each is
// undone when the injector goes, whatever the test's outcome (poc_injector.cc).
class Injector {
 public:
  Injector(Cluster& c, Record& r) : c_(c), r_(r) {}
  ~Injector();
  Injector(const Injector&) = delete;
  Injector& operator=(const Injector&) = delete;

  // Runs `CMD ACTION ARGS...`; `undo` (an action with the same ARGS) runs at the end unless the
  // test ran it itself.
  absl::Status Inject(const std::string& action, const std::string& undo,
                      const std::vector<std::string>& args);
  absl::Status Undo(const std::string& action, const std::vector<std::string>& args);

 private:
  std::string Line(const std::string& action, const std::vector<std::string>& args) const;
  absl::Status Run(const std::string& line);

  Cluster& c_;
  Record& r_;
  std::vector<std::string> undo_;
};

// Whether the kit has a --fault-command; without one the record is not run, saying that it cannot
// `what` through the API.
bool HasFaultCommand(Cluster& c, Record& r, const std::string& what);

}  // namespace carve::poc

#endif  // CARVE_RUNTIME_POC_POC_INJECTOR_H_
