# The tensor family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(tensor) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/transform.cc
  ${CMAKE_CURRENT_LIST_DIR}/transpose.cc
  ${CMAKE_CURRENT_LIST_DIR}/pad.cc
  ${CMAKE_CURRENT_LIST_DIR}/depth_space.cc
  ${CMAKE_CURRENT_LIST_DIR}/scatter.cc
  ${CMAKE_CURRENT_LIST_DIR}/gather_nd.cc
  ${CMAKE_CURRENT_LIST_DIR}/nonzero.cc
  ${CMAKE_CURRENT_LIST_DIR}/unique.cc
  ${CMAKE_CURRENT_LIST_DIR}/diagonal.cc
  ${CMAKE_CURRENT_LIST_DIR}/reverse_sequence.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tensor_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/transform_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/scatter_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gather_nd_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gather_elements_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/nonzero_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/unique_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/diagonal_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reverse_sequence_test.cc
)
