# The generator family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(generator) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/generate.cc
  ${CMAKE_CURRENT_LIST_DIR}/generate_impl.cu
)
# No contraction into fused multiply-adds: Range rounds as the CPU kernel does (generate_impl.cu
# also holds LaunchFill and LaunchWriteInt64s, which Dropout, Shape and NonMaxSuppression call).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/generate_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of Shape, Size, ConstantOfShape, Range, Dropout, TopK, LRN, OneHot and CumSum
# against the CPU kernels (skip without a GPU).
add_executable(misc_cuda_test ${CMAKE_CURRENT_LIST_DIR}/misc_cuda_test.cc)
target_link_libraries(misc_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(misc_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
