# The fused family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(fused) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/fused.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/fused_test.cc
)
# As elementwise.cc: the loops vectorise with no-trapping-math and no-math-errno; no
# fused multiply-adds in the AVX2 and AVX-512 clones (fused.cc ExecClones), so that they
# round as the baseline and the CUDA kernels do.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/fused.cc PROPERTIES COMPILE_OPTIONS
                            "-fno-trapping-math;-fno-math-errno;-ffp-contract=off")
