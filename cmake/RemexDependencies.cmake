# The third-party libraries Remex builds against, found once for the build and for
# scripts/setup-deps.sh's check (cmake/deps-check). Each comes from a Debian 12 package
# that scripts/setup-deps.sh installs.
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS program_options context)  # libboost-program-options-dev, libboost-context-dev
find_package(CapnProto REQUIRED)                               # libcapnp-dev, capnproto
find_package(zstd REQUIRED)                                    # libzstd-dev
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto SSL)         # libssl-dev
find_package(dnnl REQUIRED)                                    # libdnnl-dev, ocl-icd-opencl-dev
find_package(OpenMP REQUIRED COMPONENTS CXX)                   # libgomp (gcc; oneDNN's CPU runtime)
find_package(ONNX REQUIRED)                                    # libonnx-dev
find_package(Protobuf REQUIRED)                                # libprotobuf-dev, protobuf-compiler
find_package(nlohmann_json REQUIRED)                           # nlohmann-json3-dev
find_package(CLI11 CONFIG REQUIRED)                            # libcli11-dev
find_package(GTest REQUIRED)                                   # libgtest-dev, libgmock-dev
find_package(spdlog REQUIRED)                                  # libspdlog-dev
find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)                   # libxxhash-dev (header-only use)
find_package(PkgConfig REQUIRED)                               # pkg-config
pkg_check_modules(hiredis REQUIRED IMPORTED_TARGET hiredis)    # libhiredis-dev (the device farm's Redis client)
pkg_check_modules(libedit REQUIRED IMPORTED_TARGET libedit)    # libedit-dev (remex shell's line editing)
find_package(tomlplusplus 3 REQUIRED)                          # libtomlplusplus-dev (remex suite's TOML)
# The results store (remex ... --record): SOCI over SQLite and PostgreSQL. Debian's
# libsoci-dev ships no CMake or pkg-config file: its headers and the core and two backend
# libraries are found here; the backends' headers include sqlite3.h and libpq-fe.h.
find_package(SQLite3 REQUIRED)                                 # libsqlite3-dev
find_package(PostgreSQL REQUIRED)                              # libpq-dev
find_path(SOCI_INCLUDE_DIR soci/soci.h REQUIRED)               # libsoci-dev
find_library(SOCI_CORE_LIBRARY soci_core REQUIRED)
find_library(SOCI_SQLITE3_LIBRARY soci_sqlite3 REQUIRED)
find_library(SOCI_POSTGRESQL_LIBRARY soci_postgresql REQUIRED)
if(NOT TARGET remex_soci)
  add_library(remex_soci INTERFACE IMPORTED)
  target_include_directories(remex_soci INTERFACE ${SOCI_INCLUDE_DIR})
  target_link_libraries(remex_soci INTERFACE ${SOCI_SQLITE3_LIBRARY} ${SOCI_POSTGRESQL_LIBRARY} ${SOCI_CORE_LIBRARY}
                        SQLite::SQLite3 PostgreSQL::PostgreSQL)
endif()
# Chart.js, inlined into the self-contained HTML bench reports (remex bench --html).
find_file(REMEX_CHARTJS chart.min.js PATHS /usr/share/javascript/chart.js NO_DEFAULT_PATH
          DOC "Chart.js's minified UMD build (Debian: libjs-chart.js)")
if(NOT REMEX_CHARTJS)
  message(FATAL_ERROR "Chart.js not found (/usr/share/javascript/chart.js/chart.min.js): install Debian's "
                      "libjs-chart.js (scripts/setup-deps.sh), or set REMEX_CHARTJS to a chart.min.js (Chart.js 3)")
endif()
