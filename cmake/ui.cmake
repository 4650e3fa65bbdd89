# The dashboard (web/): built with npm at build time and embedded in the carve binary, which
# serves it under /ui/ (runtime/api_routes_ui.cc). `npm ci` runs when web/package-lock.json
# changes; `vite build` when a file of web/ does. CARVE_BUILD_UI=OFF builds carve without it (the
# sanitizer and fuzz builds): /ui/ then says so.
option(CARVE_BUILD_UI "Build the dashboard with npm (web/) and embed it in carve" ON)
set(CARVE_UI_CC "${CMAKE_CURRENT_BINARY_DIR}/generated/ui_assets.cc")
set(CARVE_WEB "${PROJECT_SOURCE_DIR}/web")
if(CARVE_BUILD_UI)
  find_program(CARVE_NPM npm)
  if(NOT CARVE_NPM)
    message(FATAL_ERROR "npm is missing (scripts/deps installs nodejs and npm), or configure with "
                        "-DCARVE_BUILD_UI=OFF to build carve without its dashboard")
  endif()
  # npm writes node_modules/.package-lock.json on every install: the stamp of the last `npm ci`.
  set(installed "${CARVE_WEB}/node_modules/.package-lock.json")
  add_custom_command(OUTPUT "${installed}"
    COMMAND "${CARVE_NPM}" ci --no-audit --no-fund --loglevel=error
    WORKING_DIRECTORY "${CARVE_WEB}"
    DEPENDS "${CARVE_WEB}/package.json" "${CARVE_WEB}/package-lock.json"
    COMMENT "Installing the dashboard's npm packages (npm ci)")
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${CARVE_WEB}/src/*")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/ui")
  add_custom_command(OUTPUT "${CARVE_UI_CC}"
    COMMAND "${CMAKE_COMMAND}" -E env "CARVE_UI_OUT=${out}" "${CARVE_NPM}" run --silent build
      -- --logLevel warn
    COMMAND "${CMAKE_COMMAND}" -DDIR=${out} -DOUT=${CARVE_UI_CC}
      -P "${PROJECT_SOURCE_DIR}/cmake/embed_dir.cmake"
    WORKING_DIRECTORY "${CARVE_WEB}"
    DEPENDS "${installed}" ${sources} "${CARVE_WEB}/index.html" "${CARVE_WEB}/vite.config.js"
      "${PROJECT_SOURCE_DIR}/cmake/embed_dir.cmake" "${PROJECT_SOURCE_DIR}/cmake/raw_string.cmake"
    COMMENT "Building the dashboard (vite) and embedding it")
else()
  add_custom_command(OUTPUT "${CARVE_UI_CC}"
    COMMAND "${CMAKE_COMMAND}" -DOUT=${CARVE_UI_CC} -P "${PROJECT_SOURCE_DIR}/cmake/embed_dir.cmake"
    DEPENDS "${PROJECT_SOURCE_DIR}/cmake/embed_dir.cmake"
    COMMENT "carve without its dashboard (CARVE_BUILD_UI=OFF)")
endif()
