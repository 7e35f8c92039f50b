# The elementwise family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(elementwise) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/unary.cc
  ${CMAKE_CURRENT_LIST_DIR}/bitshift.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/logic_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/unary_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bitshift_test.cc
)
# Values are unchanged, but the loops vectorise: chained float selects (clamps) need
# no-trapping-math (GCC 12 otherwise keeps them as branches) and sqrt needs no-math-errno.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/elementwise.cc ${CMAKE_CURRENT_LIST_DIR}/unary.cc
                            PROPERTIES COMPILE_OPTIONS "-fno-trapping-math;-fno-math-errno")
