# CUDA kernels: TfIdfVectorizer (text.cc, device code in text_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/text.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/text_impl.cu)

# Differential tests of these kernels against the CPU kernels (skip without a GPU).
add_executable(text_cuda_test ${CMAKE_CURRENT_LIST_DIR}/text_cuda_test.cc)
target_link_libraries(text_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(text_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
