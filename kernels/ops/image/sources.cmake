# The image family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(image) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/resize.cc
  ${CMAKE_CURRENT_LIST_DIR}/grid_sample.cc
  ${CMAKE_CURRENT_LIST_DIR}/detection.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/resize_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/grid_sample_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/detection_test.cc
)
