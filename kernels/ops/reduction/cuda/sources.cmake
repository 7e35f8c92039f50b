# The reduction family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(reduction) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/reduce.cc
  ${CMAKE_CURRENT_LIST_DIR}/topk.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_impl.cu
)
# reduce_impl.cu keeps nvcc's default contraction into fused multiply-adds: its sums agree
# with the CPU's to rounding, and ArgMax, ArgMin and TopK only compare.
