# CUDA kernels: data movement.
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/transform.cc)
