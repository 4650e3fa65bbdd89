# Run as a script: cmake -DFILES=a;b -DSTAMP=out -P check_core_includes.cmake
# Fails when a core file includes anything but allowed standard headers, abseil or core headers.
set(allowed_std
  algorithm array bit bitset cassert cctype cinttypes climits cmath compare concepts cstddef cstdint
  cstdlib cstring deque functional initializer_list iterator limits map memory numeric optional
  queue random ranges set span string string_view tuple type_traits unordered_map unordered_set
  utility variant vector)
set(errors "")
foreach(file IN LISTS FILES)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    if(line MATCHES "#[ \t]*include[ \t]*<([^>]+)>")
      set(header "${CMAKE_MATCH_1}")
      list(FIND allowed_std "${header}" found)
      if(found EQUAL -1)
        string(APPEND errors "\n  ${file}: <${header}> is not allowed in src/core")
      endif()
    elseif(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
      set(header "${CMAKE_MATCH_1}")
      if(NOT header MATCHES "^(absl|core)/")
        string(APPEND errors "\n  ${file}: \"${header}\" is not allowed in src/core")
      endif()
    endif()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "src/core must stay pure (standard library, abseil and core only):${errors}")
endif()
file(WRITE "${STAMP}" "ok\n")
