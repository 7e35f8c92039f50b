# CUDA kernels: cuDNN and cuBLASLt.
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/libraries.cc)
