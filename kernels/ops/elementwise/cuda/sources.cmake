# The elementwise family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(elementwise) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_ops_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/bitshift.cc
  ${CMAKE_CURRENT_LIST_DIR}/dropout.cc
)
# No contraction into fused multiply-adds: the elementwise formulas round as the CPU kernels do.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/elementwise_ops_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")
