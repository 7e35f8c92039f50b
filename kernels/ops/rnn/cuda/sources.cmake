# The rnn family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(rnn) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/rnn.cc
  ${CMAKE_CURRENT_LIST_DIR}/rnn_impl.cu
)

# Differential tests against the CPU kernels (skip without a GPU).
add_executable(rnn_cuda_test ${CMAKE_CURRENT_LIST_DIR}/rnn_cuda_test.cc)
target_link_libraries(rnn_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(rnn_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
