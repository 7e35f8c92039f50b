# CUDA kernels: data movement (transform.cc and transform_values.cc sharing
# transform_common.h, device code in transform_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/transform.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/transform_values.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/transform_impl.cu)

# Differential tests of the transform kernels against the CPU kernels (skip without a GPU).
add_executable(transform_cuda_test ${CMAKE_CURRENT_LIST_DIR}/transform_cuda_test.cc)
target_link_libraries(transform_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main
                                                  CUDA::cudart_static)
gtest_discover_tests(transform_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
