# The quantization family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(quantization) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/quantize.cc
  ${CMAKE_CURRENT_LIST_DIR}/qlinear.cc
  ${CMAKE_CURRENT_LIST_DIR}/int8_dnnl.cc
  ${CMAKE_CURRENT_LIST_DIR}/int_gemm.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/quantize_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/int_gemm_test.cc
)
# quantize.cc's range loop (RangeWithZero) is an OpenMP simd reduction: -fopenmp-simd
# honours the pragma without the OpenMP runtime.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/quantize.cc PROPERTIES COMPILE_OPTIONS -fopenmp-simd)
