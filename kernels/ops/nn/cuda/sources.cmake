# The nn family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(nn) row in a CUDA build).
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/conv.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool.cc
  ${CMAKE_CURRENT_LIST_DIR}/lrn.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm.cc
  ${CMAKE_CURRENT_LIST_DIR}/mvn.cc
  ${CMAKE_CURRENT_LIST_DIR}/unpool.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss.cc
  ${CMAKE_CURRENT_LIST_DIR}/pool_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/norm_impl.cu
  ${CMAKE_CURRENT_LIST_DIR}/loss_impl.cu
)
# No contraction into fused multiply-adds: the pools and the normalisations (LRN and
# MeanVarianceNormalization too) then round as the CPU kernels do (MaxUnpool, in
# pool_impl.cu, only moves elements).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/pool_impl.cu ${CMAKE_CURRENT_LIST_DIR}/norm_impl.cu PROPERTIES COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>")

# Conv, FusedConv and ConvTranspose on cuDNN when cuDNN is found (headers and library,
# looked for next to the toolkit first; the emulation's under REMEX_CUDA_EMULATION,
# emulation/cudnn.cc). conv.cc is always built; without cuDNN it registers no kernel.
if(REMEX_CUDA_EMULATION)
  message(STATUS "Remex cuDNN: emulated")
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/conv.cc APPEND PROPERTY COMPILE_DEFINITIONS REMEX_HAVE_CUDNN=1)
else()
  find_path(REMEX_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(REMEX_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(REMEX_CUDNN_INCLUDE_DIR AND REMEX_CUDNN_LIBRARY)
    message(STATUS "Remex cuDNN: ${REMEX_CUDNN_LIBRARY}")
    target_include_directories(remex_kernels_cuda PRIVATE ${REMEX_CUDNN_INCLUDE_DIR})
    target_link_libraries(remex_kernels_cuda PRIVATE ${REMEX_CUDNN_LIBRARY})
    set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/conv.cc APPEND PROPERTY COMPILE_DEFINITIONS REMEX_HAVE_CUDNN=1)
  else()
    message(STATUS "Remex cuDNN: not found, Conv and ConvTranspose have no CUDA kernel")
  endif()
endif()

# Differential tests of this family's pooling, normalisation and loss kernels and of the reductions
# (reduction/cuda/reduce_impl.h), Softmax (math/cuda/softmax_impl.h), Resize
# (image/cuda/resize_impl.h) and the elementwise ops of elementwise/cuda/elementwise_ops_impl.h
# against the CPU kernels (skip without a GPU).
add_executable(nn_cuda_test ${CMAKE_CURRENT_LIST_DIR}/nn_cuda_test.cc ${CMAKE_CURRENT_LIST_DIR}/nn_loss_cuda_test.cc)
target_link_libraries(nn_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(nn_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})

# Differential tests of the cuDNN convolutions and the cuBLASLt products (math/cuda/matmul.cc)
# against the CPU kernels (skip without a GPU).
add_executable(libraries_cuda_test ${CMAKE_CURRENT_LIST_DIR}/libraries_cuda_test.cc)
target_link_libraries(libraries_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(libraries_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
