# remex_discover_tests(TARGET [DISCOVERY_TIMEOUT S] [TEST_PREFIX P] [PROPERTIES K V ...]):
# the CTest tests of one GoogleTest executable, every GoogleTest program of the tree.
#
# By default one CTest test per GoogleTest test (CMake's gtest_discover_tests, with the
# same arguments): `ctest -R` picks single tests, and each runs in its own process.
#
# With REMEX_GTEST_PER_SUITE=ON, one CTest test per test suite instead, named
# `TARGET:<prefix><suite>.*` and running `TARGET --gtest_filter=<suite>.*` (for a
# parameterized suite the name GoogleTest lists, `Prefix/Suite.*`). The program's name
# keeps the names unique: two programs have suites of the same name (AuthTest, ServerTest),
# and CTest's set_tests_properties would give both the properties of the last. The sanitized tree of CI uses it
# (scripts/sanitized-tree.sh): a program built with ASan and UBSan takes 0.1-0.2 s of CPU
# to start and exit, about 200 s over its 1100 tests in one process each, against about
# 250 suites. The suites are listed after each link (`TARGET --gtest_list_tests`, as
# gtest_discover_tests does); each gets the PROPERTIES given, then:
#   - TIMEOUT: the given per-test TIMEOUT times the suite's test count, at most
#     REMEX_GTEST_SUITE_TIMEOUT seconds (default 900) and never less than the per-test one
#     (no TIMEOUT given: CTest's default, as for the single tests);
#   - COST: the suite's test count, so that `ctest -j` starts the larger suites first in a
#     tree with no timings of its own yet;
#   - a suite passes when none of its tests failed: one whose tests all skipped
#     (GTEST_SKIP: the `cuda` tests without a GPU) shows as passed, not skipped (a pattern
#     on the output that marks it skipped would also hide a failure beside a skip).
# The names of each suite's tests go to <program file>_suite_tests.txt beside the
# program, where scripts/tests_passed.py reads what a suite's test covered.
option(REMEX_GTEST_PER_SUITE "One CTest test per GoogleTest suite instead of per test" OFF)
set(REMEX_GTEST_SUITE_TIMEOUT 900 CACHE STRING "Most seconds a per-suite CTest test may run (REMEX_GTEST_PER_SUITE)")

function(remex_discover_tests target)
  if(NOT REMEX_GTEST_PER_SUITE)
    gtest_discover_tests(${target} ${ARGN})
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DISCOVERY_TIMEOUT;TEST_PREFIX" "PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "remex_discover_tests(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 5)
  endif()
  # The per-test TIMEOUT, and the other properties as `set_tests_properties` lines with
  # the name left as @SUITE@ (bracket arguments: values are written as given).
  set(per_test_timeout "")
  set(property_lines "")
  list(LENGTH arg_PROPERTIES n)
  math(EXPR odd "${n} % 2")
  if(odd)
    message(FATAL_ERROR "remex_discover_tests(${target}): PROPERTIES needs name/value pairs: ${arg_PROPERTIES}")
  endif()
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE 0 ${last} 2)
      math(EXPR j "${i} + 1")
      list(GET arg_PROPERTIES ${i} key)
      list(GET arg_PROPERTIES ${j} value)
      if(key STREQUAL "TIMEOUT")
        set(per_test_timeout ${value})
      else()
        string(APPEND property_lines "set_tests_properties([==[@SUITE@]==] PROPERTIES ${key} [==[${value}]==])\n")
      endif()
    endforeach()
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR})
  set(properties_file ${dir}/${target}_suite_properties.txt)
  set(suites_file ${dir}/${target}_suites.cmake)
  set(include_file ${dir}/${target}_suites_include.cmake)
  # Written only when it changes (configure_file), and a link dependency of the program,
  # as is the listing script: turning REMEX_GTEST_PER_SUITE on in a built tree, or a
  # change to the properties or the script, relinks it, so that the listing runs again.
  file(WRITE ${properties_file}.in "${property_lines}")
  configure_file(${properties_file}.in ${properties_file} COPYONLY)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${properties_file}
                                                            ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gtest_suites.cmake)
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "EXECUTABLE=$<TARGET_FILE:${target}>" -D "WORKING_DIRECTORY=${dir}"
            -D "PREFIX=${arg_TEST_PREFIX}" -D "PROPERTIES_FILE=${properties_file}"
            -D "PER_TEST_TIMEOUT=${per_test_timeout}" -D "SUITE_TIMEOUT=${REMEX_GTEST_SUITE_TIMEOUT}"
            -D "DISCOVERY_TIMEOUT=${arg_DISCOVERY_TIMEOUT}" -D "OUTPUT=${suites_file}"
            -D "PROGRAM=${target}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gtest_suites.cmake
    BYPRODUCTS ${suites_file}
    VERBATIM)
  # As gtest_discover_tests does: a placeholder test that fails when the program was not
  # built (scripts/tests_passed.py knows the name).
  file(WRITE ${include_file}
       "if(EXISTS [==[${suites_file}]==])\n"
       "  include([==[${suites_file}]==])\n"
       "else()\n"
       "  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
