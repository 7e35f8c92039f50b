# CUDA kernels: NonMaxSuppression, RoiAlign, MaxUnpool (det.cc, device code in
# det_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/det.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/det_impl.cu)
# No contraction into fused multiply-adds: RoiAlign's interpolation rounds as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/det_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of these kernels against the CPU kernels (skip without a GPU).
add_executable(det_cuda_test ${CMAKE_CURRENT_LIST_DIR}/det_cuda_test.cc)
target_link_libraries(det_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(det_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
