# src/core must stay pure: it may include only the C++ standard library headers listed in
# cmake/check_core_includes.cmake, abseil ("absl/...") and other core headers ("core/...").
# carve_core depends on this check, so a forbidden include fails the build before anything compiles.
function(carve_check_core_purity target)
  get_target_property(sources ${target} SOURCES)
  file(GLOB_RECURSE core_headers CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/core/*.h")
  set(files)
  foreach(src IN LISTS sources core_headers)
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND files "${abs}")
  endforeach()
  list(REMOVE_DUPLICATES files)
  set(stamp "${CMAKE_CURRENT_BINARY_DIR}/${target}_purity.stamp")
  add_custom_command(
    OUTPUT "${stamp}"
    COMMAND ${CMAKE_COMMAND} "-DFILES=${files}" "-DSTAMP=${stamp}"
            -P "${CMAKE_SOURCE_DIR}/cmake/check_core_includes.cmake"
    DEPENDS ${files} "${CMAKE_SOURCE_DIR}/cmake/check_core_includes.cmake"
    COMMENT "Checking that src/core includes only the standard library, abseil and core"
    VERBATIM)
  add_custom_target(${target}_purity DEPENDS "${stamp}")
  add_dependencies(${target} ${target}_purity)
endfunction()
