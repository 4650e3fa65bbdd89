# Writes a C++ source defining `std::string NAME()` that returns the text of IN, for text that
# ships with Debian and is embedded at build time (Chart.js for the acceptance kit's report).
# Usage: cmake -DIN=file -DOUT=file.cc -DNAMESPACE=ns -DNAME=Fn -P embed_text.cmake
# The text is cut into raw-string pieces of at most 60,000 characters (-Woverlength-strings).
include("${CMAKE_CURRENT_LIST_DIR}/raw_string.cmake")
file(READ "${IN}" text)
set(out "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#include <string>\n\n")
string(APPEND out "namespace ${NAMESPACE} {\n\nstd::string ${NAME}() {\n  std::string s;\n")
carve_raw_string_pieces("${text}" out "${IN}")
string(APPEND out "  return s;\n}\n\n}  // namespace ${NAMESPACE}\n")
file(WRITE "${OUT}.tmp" "${out}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
