# CUDA kernels: FusedElementwise through NVRTC.
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fused.cc)
