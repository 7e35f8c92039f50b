# CUDA kernels: GridSample (grid.cc, device code in grid_impl.cu).
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/grid.cc
                                          ${CMAKE_CURRENT_LIST_DIR}/grid_impl.cu)
# No contraction into fused multiply-adds: the interpolation rounds as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/grid_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of this kernel against the CPU kernel (skip without a GPU).
add_executable(grid_cuda_test ${CMAKE_CURRENT_LIST_DIR}/grid_cuda_test.cc)
target_link_libraries(grid_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(grid_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
