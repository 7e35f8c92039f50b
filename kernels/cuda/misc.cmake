# CUDA kernels: Shape, Size, ConstantOfShape, Range, Dropout, TopK, LRN (misc.cc,
# device code in misc_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/misc.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/misc_impl.cu)
# No contraction into fused multiply-adds: LRN's sums and Range round as the CPU
# kernels do.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/misc_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of the misc kernels against the CPU kernels (skip without a GPU).
add_executable(misc_cuda_test ${CMAKE_CURRENT_LIST_DIR}/misc_cuda_test.cc)
target_link_libraries(misc_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(misc_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
