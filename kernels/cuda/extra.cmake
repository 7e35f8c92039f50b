# CUDA kernels: HannWindow, HammingWindow, BlackmanWindow, MeanVarianceNormalization,
# ReverseSequence, Det, Einsum (extra.cc, device code in extra_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/extra.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/extra_impl.cu)
# No contraction into fused multiply-adds: the formulas round as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/extra_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of the extra group's kernels against the CPU kernels (skip without a GPU).
add_executable(extra_cuda_test ${CMAKE_CURRENT_LIST_DIR}/extra_cuda_test.cc)
target_link_libraries(extra_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(extra_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
