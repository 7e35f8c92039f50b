# The math family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(math) row in a CUDA build).
# MatMul, FusedMatMul and Gemm on cuBLASLt (part of the toolkit; the emulation's under
# REMEX_CUDA_EMULATION, emulation/cublaslt.cc).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/cumsum.cc
  ${CMAKE_CURRENT_LIST_DIR}/determinant.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum.cc
  ${CMAKE_CURRENT_LIST_DIR}/math_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/attention.cc
  ${CMAKE_CURRENT_LIST_DIR}/attention_impl.cu
)
target_link_libraries(remex_kernels_cuda PRIVATE CUDA::cublasLt)
# No contraction into fused multiply-adds: the formulas round as on the CPU.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/math_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Differential tests of Det, Einsum, FusedAttention, the window ops, MeanVarianceNormalization and ReverseSequence
# against the CPU kernels (skip without a GPU).
add_executable(extra_cuda_test ${CMAKE_CURRENT_LIST_DIR}/extra_cuda_test.cc)
target_link_libraries(extra_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(extra_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
