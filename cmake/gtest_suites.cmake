# Run by remex_discover_tests (cmake/RemexGTest.cmake) after each link of a GoogleTest
# program: lists its suites (`EXECUTABLE --gtest_list_tests`) and writes OUTPUT, the
# CTest file with one test per suite that has an enabled test, and EXECUTABLE_suite_tests.txt
# beside the program, the GoogleTest names of those tests ("Suite.Test/0" a line, as
# --gtest_filter takes them; scripts/tests_passed.py reads it).
# -D EXECUTABLE, PROGRAM (its target, the tests' names start with it), WORKING_DIRECTORY,
# PREFIX, PROPERTIES_FILE (set_tests_properties lines naming the test @SUITE@),
# PER_TEST_TIMEOUT (may be empty), SUITE_TIMEOUT, DISCOVERY_TIMEOUT, OUTPUT.
execute_process(COMMAND "${EXECUTABLE}" --gtest_list_tests WORKING_DIRECTORY "${WORKING_DIRECTORY}"
                TIMEOUT ${DISCOVERY_TIMEOUT} OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXECUTABLE} --gtest_list_tests failed (${rc}):\n${listing}\n${errors}")
endif()
file(READ "${PROPERTIES_FILE}" property_lines)
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(suite "")
set(names "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.( .*)?$")
    set(suite ${CMAKE_MATCH_1})
    if(suite MATCHES "(^|/)DISABLED_")
      set(suite "")
    endif()
  elseif(suite AND line MATCHES "^  ([A-Za-z0-9_/]+)( .*)?$")
    set(test ${CMAKE_MATCH_1})
    if(NOT test MATCHES "^DISABLED_")
      if(NOT DEFINED count_${suite})
        list(APPEND suites ${suite})
        set(count_${suite} 0)
      endif()
      math(EXPR count_${suite} "${count_${suite}} + 1")
      string(APPEND names "${suite}.${test}\n")
    endif()
  endif()
endforeach()
set(script "")
foreach(suite IN LISTS suites)
  set(name "${PROGRAM}:${PREFIX}${suite}.*")
  set(n ${count_${suite}})
  string(APPEND script
         "add_test([==[${name}]==] [==[${EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n"
         "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==] COST ${n})\n")
  string(REPLACE "@SUITE@" "${name}" lines_for_suite "${property_lines}")
  string(APPEND script "${lines_for_suite}")
  if(PER_TEST_TIMEOUT)
    math(EXPR timeout "${PER_TEST_TIMEOUT} * ${n}")
    if(timeout GREATER SUITE_TIMEOUT)
      set(timeout ${SUITE_TIMEOUT})
    endif()
    if(timeout LESS PER_TEST_TIMEOUT)
      set(timeout ${PER_TEST_TIMEOUT})
    endif()
    string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES TIMEOUT ${timeout})\n")
  endif()
endforeach()
file(WRITE "${OUTPUT}" "${script}")
file(WRITE "${EXECUTABLE}_suite_tests.txt" "${names}")
