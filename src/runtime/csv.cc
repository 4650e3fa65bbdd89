#include "runtime/csv.h"

#include <string_view>

#include "absl/strings/str_join.h"

namespace carve {

namespace {

std::string CsvField(const nlohmann::json& v) {
  std::string s = v.is_string() ? v.get<std::string>()
                  : v.is_null() ? ""
                                : v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // A text cell a spreadsheet would run as a formula is kept as text (OWASP's CSV injection).
  if (v.is_string() && !s.empty() && std::string_view("=+-@\t\r").find(s[0]) != std::string::npos) {
    s = std::string("'") + s;
  }
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string CsvRow(const nlohmann::json& record, const std::vector<std::string>& columns) {
  std::vector<std::string> fields;
  for (const std::string& c : columns) {
    fields.push_back(CsvField(record.contains(c) ? record[c] : nlohmann::json(nullptr)));
  }
  return absl::StrJoin(fields, ",") + "\n";
}

}  // namespace carve
