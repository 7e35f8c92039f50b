# The training family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(training) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_impl.cu
)
# No contraction into fused multiply-adds: the optimizers' rules (and Dropout's training-mode
# scaling, LaunchDropoutTrain) round as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/optimizer_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests against the CPU kernels (skip without a GPU).
add_executable(training_cuda_test ${CMAKE_CURRENT_LIST_DIR}/training_cuda_test.cc)
target_link_libraries(training_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(training_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
