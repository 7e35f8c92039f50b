# The nn family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(nn) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/conv.cc
  ${CMAKE_CURRENT_LIST_DIR}/conv_transpose.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm.cc
  ${CMAKE_CURRENT_LIST_DIR}/mvn.cc
  ${CMAKE_CURRENT_LIST_DIR}/unpool.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/conv_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/mvn_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_test.cc
)
# As elementwise.cc: the epilogue loops vectorise with no-trapping-math and no-math-errno;
# no fused multiply-adds in the AVX2 and AVX-512 clones of ActivateRange, so that they
# round as the unfused kernels and the CUDA kernels do.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/conv.cc PROPERTIES COMPILE_OPTIONS
                            "-fno-trapping-math;-fno-math-errno;-ffp-contract=off")
