# CUDA kernels: LSTM, GRU, RNN (rnn.cc, device code in rnn_impl.cu; the scratch memory
# uses StreamWorkspace from libraries.cc).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/rnn.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/rnn_impl.cu)

# Differential tests of the recurrent kernels against the CPU kernels (skip without a GPU).
add_executable(rnn_cuda_test ${CMAKE_CURRENT_LIST_DIR}/rnn_cuda_test.cc)
target_link_libraries(rnn_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(rnn_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
