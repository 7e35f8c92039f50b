# CUDA kernels: DFT, STFT, MelWeightMatrix (spectral.cc, device code in
# spectral_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/spectral.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/spectral_impl.cu)
# No contraction into fused multiply-adds: the sums and twiddle polynomials round as on
# the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/spectral_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of these kernels against the CPU kernels (skip without a GPU).
add_executable(spectral_cuda_test ${CMAKE_CURRENT_LIST_DIR}/spectral_cuda_test.cc)
target_link_libraries(spectral_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(spectral_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
