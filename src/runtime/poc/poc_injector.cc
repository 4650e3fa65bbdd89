// The operator's fault command, run through the shell with each argument quoted.
#include "runtime/poc/poc_injector.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace carve::poc {

namespace {

std::string Quoted(const std::string& arg) {
  std::string out = "'";
  for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

Injector::~Injector() {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (void)Run(*it);
}

absl::Status Injector::Inject(const std::string& action, const std::string& undo,
                              const std::vector<std::string>& args) {
  absl::Status st = Run(Line(action, args));
  if (st.ok()) undo_.push_back(Line(undo, args));
  return st;
}

absl::Status Injector::Undo(const std::string& action, const std::vector<std::string>& args) {
  std::string line = Line(action, args);
  absl::Status st = Run(line);
  if (st.ok()) std::erase(undo_, line);  // a failed undo is tried again at the end
  return st;
}

std::string Injector::Line(const std::string& action, const std::vector<std::string>& args) const {
  std::string line = absl::StrCat(c_.options().fault_command, " ", action);
  for (const std::string& a : args) absl::StrAppend(&line, " ", Quoted(a));
  return line;
}

absl::Status Injector::Run(const std::string& line) {
  c_.progress() << "  fault command: " << line << "\n" << std::flush;
  r_.observed["fault_commands"].push_back(line);
  const int rc = std::system(line.c_str());
  if (rc == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the fault command `", line, "` failed (wait status ", rc, ")"));
}

bool HasFaultCommand(Cluster& c, Record& r, const std::string& what) {
  if (!c.options().fault_command.empty()) return true;
  r.verdict = Verdict::kNotRun;
  r.verdict_reason = absl::StrCat("no --fault-command: the kit cannot ", what,
                                  " through the API (carve dev: --fault-command "
                                  "scripts/poc-dev-faults)");
  return false;
}

}  // namespace carve::poc
