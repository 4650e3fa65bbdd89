# Writes a C++ source defining `std::string NAME()` that returns the text of IN, for text that
# ships with Debian and is embedded at build time (Chart.js for the acceptance kit's report).
# Usage: cmake -DIN=file -DOUT=file.cc -DNAMESPACE=ns -DNAME=Fn -P embed_text.cmake
# The text is cut into raw-string pieces of at most 60,000 characters (-Woverlength-strings).
file(READ "${IN}" text)
string(FIND "${text}" ")carve_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string's delimiter")
endif()
string(LENGTH "${text}" length)
set(out "// Generated from ${IN} by cmake/embed_text.cmake; do not edit.\n#include <string>\n\n")
string(APPEND out "namespace ${NAMESPACE} {\n\nstd::string ${NAME}() {\n  std::string s;\n")
set(at 0)
while(at LESS length)
  string(SUBSTRING "${text}" ${at} 60000 piece)
  string(APPEND out "  s += R\"carve_embed(${piece})carve_embed\";\n")
  math(EXPR at "${at} + 60000")
endwhile()
string(APPEND out "  return s;\n}\n\n}  // namespace ${NAMESPACE}\n")
file(WRITE "${OUT}.tmp" "${out}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
