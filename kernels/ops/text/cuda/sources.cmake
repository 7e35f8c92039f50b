# The text family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(text) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/tfidf.cc
  ${CMAKE_CURRENT_LIST_DIR}/tfidf_impl.cu
)

# Differential tests against the CPU kernels (skip without a GPU).
add_executable(text_cuda_test ${CMAKE_CURRENT_LIST_DIR}/text_cuda_test.cc)
target_link_libraries(text_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(text_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
