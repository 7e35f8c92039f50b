# CUDA kernels: reductions, the Softmax family, losses, pooling, Resize, normalisation, more
# elementwise.
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/nn.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/nn_reduce_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/nn_loss_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/nn_pool_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/nn_elementwise_impl.cu)
# No contraction into fused multiply-adds: Resize's coordinates (double), the
# normalisations and the elementwise formulas then round as the CPU kernels do.
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/nn_pool_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/nn_elementwise_impl.cu
  PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of the nn kernels against the CPU kernels; they skip without a GPU.
add_executable(nn_cuda_test ${CMAKE_CURRENT_LIST_DIR}/nn_cuda_test.cc ${CMAKE_CURRENT_LIST_DIR}/nn_loss_cuda_test.cc)
target_link_libraries(nn_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(nn_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
