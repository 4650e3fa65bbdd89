// Limits on what clients send (docs/security.md, "Hardening"): JSON nesting checked before a tree
// is built, names that are printable and short, environment variable names, and text made safe
// for a terminal.
#ifndef CARVE_RUNTIME_INPUT_LIMITS_H_
#define CARVE_RUNTIME_INPUT_LIMITS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace carve {

// Deeper bodies are refused: every route's body, the agents' included.
inline constexpr int kMaxJsonDepth = 64;
// Names that are printed (job names, labels, reasons): bytes at most.
inline constexpr size_t kMaxNameBytes = 128;
// Free text that is printed (maintenance reasons, descriptions): bytes at most.
inline constexpr size_t kMaxReasonBytes = 1024;
// A replica's reclaim record as an agent sends it, serialized: bytes at most (kept in the job's
// record; a real one, eight devices with their processes, is a few KiB).
inline constexpr size_t kMaxReclaimBytes = 64 << 10;
// A job's command and environment together: bytes at most (stored with every record of the job).
inline constexpr size_t kMaxCommandEnvBytes = 256 << 10;

// One linear pass over `text`, without recursion and without building anything: InvalidArgument
// "the body nests deeper than 64 levels" when arrays/objects nest deeper than `max_depth`.
// Brackets inside strings do not count. Says nothing about whether the text is valid JSON.
absl::Status CheckJsonDepth(absl::string_view text, int max_depth = kMaxJsonDepth);
// CheckJsonDepth, then the parse: InvalidArgument "the body is not valid JSON" on a syntax error.
absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view text);

// `value` holds no control characters (C0, DEL, C1) and is valid UTF-8; `field` names it in the
// error. With max_bytes > 0, it is also at most that long.
absl::Status CheckPrintable(absl::string_view field, absl::string_view value, size_t max_bytes);
// Every string inside `j` (values, not keys) is at most `max_bytes`; otherwise InvalidArgument
// naming its path under `at` ("labels.zone: is 3145728 bytes; at most 1024").
absl::Status CheckStringBytes(const nlohmann::json& j, const std::string& at, size_t max_bytes);
// A POSIX environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most 256 bytes.
bool IsEnvName(absl::string_view name);

// `text` with control characters written as escapes (\n, \t, \x1b, \u009b), so that what a
// server returns cannot move the cursor, recolor or rewrite a terminal. Everything else as is.
std::string TerminalSafe(absl::string_view text);
// TerminalSafe applied to every string (keys too) inside `j`.
void MakeTerminalSafe(nlohmann::json& j);

}  // namespace carve

#endif  // CARVE_RUNTIME_INPUT_LIMITS_H_
