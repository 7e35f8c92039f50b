# The training family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(training) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_test.cc
)
# The optimizers' updates (optimizer_ops.h) round as in the CUDA kernels.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
