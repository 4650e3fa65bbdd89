// Records as CSV (RFC 4180): a field with a comma, quote or line break is quoted, quotes doubled;
// strings as they are (one that starts with = + - @, a tab or a carriage return, which a
// spreadsheet would run as a formula, gets a leading '), other JSON values as JSON, null as
// empty.
#ifndef CARVE_RUNTIME_CSV_H_
#define CARVE_RUNTIME_CSV_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace carve {

// One line: `record`'s value for each of `columns` (empty when it has none).
std::string CsvRow(const nlohmann::json& record, const std::vector<std::string>& columns);

}  // namespace carve

#endif  // CARVE_RUNTIME_CSV_H_
