# The tensor family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(tensor) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/transform.cc
  ${CMAKE_CURRENT_LIST_DIR}/transform_values.cc
  ${CMAKE_CURRENT_LIST_DIR}/transform_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/shape.cc
  ${CMAKE_CURRENT_LIST_DIR}/index.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/reverse_sequence.cc
)

# Differential tests against the CPU kernels (skip without a GPU).
add_executable(transform_cuda_test ${CMAKE_CURRENT_LIST_DIR}/transform_cuda_test.cc)
target_link_libraries(transform_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(transform_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})

# Differential tests of BitShift, GatherND, ScatterND, NonZero, Unique and Compress against the
# CPU kernels (skip without a GPU).
add_executable(index_cuda_test ${CMAKE_CURRENT_LIST_DIR}/index_cuda_test.cc)
target_link_libraries(index_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(index_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
