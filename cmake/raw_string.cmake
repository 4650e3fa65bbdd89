# carve_raw_string_pieces(TEXT VAR NAME): appends to the variable VAR the statements
# `s += R"carve_embed(...)carve_embed";` that build TEXT in a std::string `s`, in pieces of at
# most 60,000 characters (-Woverlength-strings). Stops when TEXT (from file NAME) holds the raw
# string's delimiter. For embed_text.cmake and embed_dir.cmake.
function(carve_raw_string_pieces _crs_text _crs_var _crs_name)
  string(FIND "${_crs_text}" ")carve_embed\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${_crs_name} contains the raw string's delimiter")
  endif()
  string(LENGTH "${_crs_text}" length)
  set(code "${${_crs_var}}")
  set(at 0)
  while(at LESS length)
    string(SUBSTRING "${_crs_text}" ${at} 60000 piece)
    string(APPEND code "  s += R\"carve_embed(${piece})carve_embed\";\n")
    math(EXPR at "${at} + 60000")
  endwhile()
  set(${_crs_var} "${code}" PARENT_SCOPE)
endfunction()
