# CUDA kernels on NVIDIA's libraries: MatMul / Gemm on cuBLASLt (part of the toolkit),
# Conv / ConvTranspose on cuDNN when cuDNN is found (headers and library, looked for
# next to the toolkit first). Without cuDNN the two convolutions have no CUDA kernel.
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/libraries.cc
  ${CMAKE_CURRENT_LIST_DIR}/libraries_gemm.cc
  ${CMAKE_CURRENT_LIST_DIR}/libraries_impl.cu)
target_link_libraries(remex_kernels_cuda PRIVATE CUDA::cublasLt)

if(REMEX_CUDA_EMULATION)
  # cuBLASLt and cuDNN are the emulation's (emulation/cublaslt.cc, emulation/cudnn.cc).
  message(STATUS "Remex cuDNN: emulated")
  target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/libraries_conv.cc)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/libraries.cc APPEND PROPERTY COMPILE_DEFINITIONS REMEX_HAVE_CUDNN=1)
else()
  find_path(REMEX_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(REMEX_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
endif()
if(NOT REMEX_CUDA_EMULATION AND REMEX_CUDNN_INCLUDE_DIR AND REMEX_CUDNN_LIBRARY)
  message(STATUS "Remex cuDNN: ${REMEX_CUDNN_LIBRARY}")
  target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/libraries_conv.cc)
  target_include_directories(remex_kernels_cuda PRIVATE ${REMEX_CUDNN_INCLUDE_DIR})
  target_link_libraries(remex_kernels_cuda PRIVATE ${REMEX_CUDNN_LIBRARY})
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/libraries.cc APPEND PROPERTY COMPILE_DEFINITIONS REMEX_HAVE_CUDNN=1)
else()
  message(STATUS "Remex cuDNN: not found, Conv and ConvTranspose have no CUDA kernel")
endif()

# Differential tests against the CPU kernels; they skip without a GPU.
add_executable(libraries_cuda_test ${CMAKE_CURRENT_LIST_DIR}/libraries_cuda_test.cc)
target_link_libraries(libraries_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
gtest_discover_tests(libraries_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})
