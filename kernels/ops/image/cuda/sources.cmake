# The image family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(image) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/resize.cc
  ${CMAKE_CURRENT_LIST_DIR}/resize_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/grid_sample.cc
  ${CMAKE_CURRENT_LIST_DIR}/grid_sample_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/detection.cc
  ${CMAKE_CURRENT_LIST_DIR}/detection_impl.cu
)
# No contraction into fused multiply-adds: the interpolations, Resize's coordinates (double) and
# RoiAlign's samples round as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/resize_impl.cu ${CMAKE_CURRENT_LIST_DIR}/grid_sample_impl.cu ${CMAKE_CURRENT_LIST_DIR}/detection_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of NonMaxSuppression, RoiAlign and MaxUnpool against the CPU kernels
# (skip without a GPU).
add_executable(det_cuda_test ${CMAKE_CURRENT_LIST_DIR}/det_cuda_test.cc)
target_link_libraries(det_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(det_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})

# Differential tests against the CPU kernels (skip without a GPU).
add_executable(grid_cuda_test ${CMAKE_CURRENT_LIST_DIR}/grid_cuda_test.cc)
target_link_libraries(grid_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(grid_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
