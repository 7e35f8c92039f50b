# CUDA kernels: the training domain's optimizers Adagrad, Adam, Momentum (training.cc)
# and Dropout's training mode (its kernel in misc.cc); device code in training_impl.cu.
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/training.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/training_impl.cu)
# No contraction into fused multiply-adds: the optimizers' rules round as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/training_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of these kernels against the CPU kernels (skip without a GPU).
add_executable(training_cuda_test ${CMAKE_CURRENT_LIST_DIR}/training_cuda_test.cc)
target_link_libraries(training_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(training_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
