# The math family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(math) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cc
  ${CMAKE_CURRENT_LIST_DIR}/cumsum.cc
  ${CMAKE_CURRENT_LIST_DIR}/determinant.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum.cc
  ${CMAKE_CURRENT_LIST_DIR}/attention.cc
)
# softmax.cc's float32 row loops vectorise with no-trapping-math and no-math-errno; no
# fused multiply-adds in their AVX2 and AVX-512 clones, so that every clone rounds alike.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/softmax.cc PROPERTIES COMPILE_OPTIONS
                            "-fno-trapping-math;-fno-math-errno;-ffp-contract=off")
# attention.cc's one-query-row dot products are OpenMP simd reductions (-fopenmp-simd:
# the pragma without the OpenMP runtime).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/attention.cc PROPERTIES COMPILE_OPTIONS -fopenmp-simd)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/matmul_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gemm_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cumsum_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/determinant_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/attention_test.cc
)
