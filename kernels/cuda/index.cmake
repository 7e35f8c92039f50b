# CUDA kernels: BitShift, GatherND, ScatterND, NonZero, Compress (index.cc, device code
# in index_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/index.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/index_impl.cu)

# Differential tests of the index kernels against the CPU kernels (skip without a GPU).
add_executable(index_cuda_test ${CMAKE_CURRENT_LIST_DIR}/index_cuda_test.cc)
target_link_libraries(index_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(index_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
