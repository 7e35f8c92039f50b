# CUDA kernels: reductions, Softmax, pooling, Resize, normalisation, more elementwise.
target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/nn.cc)
