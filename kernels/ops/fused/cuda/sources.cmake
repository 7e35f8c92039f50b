# The fused family's CUDA kernels and tests (kernels/ops/families.def; included by
# kernels/cuda/CMakeLists.txt for the table's REMEX_OP_FAMILY(fused) row in a CUDA build).
# CUDA kernels: FusedElementwise through NVRTC. The code generator (fused_codegen.cc)
# is plain C++; fused_nvrtc.cc compiles its source with NVRTC; fused.cc loads and
# launches the PTX with the driver API, whose entry points it looks up through the
# runtime (cudaGetDriverEntryPointByVersion) instead of linking CUDA::cuda_driver: the
# driver library is then needed only when a GPU is used.
# Under emulation there is no NVRTC: fused.cc computes with the CPU kernel after its
# CUDA-side checks, and fused_cuda_test leaves out its NVRTC tests.
# The generator embeds kernels/scalar_ops.h's text (the functors every FusedElementwise
# instruction calls) as a string literal, made at build time.
set(REMEX_SCALAR_OPS_INC ${CMAKE_CURRENT_BINARY_DIR}/generated/kernels/scalar_ops_source.inc)
add_custom_command(
  OUTPUT ${REMEX_SCALAR_OPS_INC}
  COMMAND ${CMAKE_COMMAND} -DINPUT=${PROJECT_SOURCE_DIR}/kernels/scalar_ops.h -DOUTPUT=${REMEX_SCALAR_OPS_INC}
          -P ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/kernels/scalar_ops.h ${PROJECT_SOURCE_DIR}/cmake/EmbedText.cmake
  COMMENT "Embedding kernels/scalar_ops.h"
  VERBATIM)
target_sources(remex_kernels_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/fused.cc
  ${CMAKE_CURRENT_LIST_DIR}/fused_codegen.cc
  ${REMEX_SCALAR_OPS_INC})
target_include_directories(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
if(NOT REMEX_CUDA_EMULATION)
  target_sources(remex_kernels_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fused_nvrtc.cc)
  target_link_libraries(remex_kernels_cuda PRIVATE CUDA::nvrtc)
endif()

# NVRTC compile tests run everywhere; the kernel tests skip without a GPU.
add_executable(fused_cuda_test ${CMAKE_CURRENT_LIST_DIR}/fused_cuda_test.cc)
target_link_libraries(fused_cuda_test PRIVATE remex_kernels_cuda remex_kernels GTest::gtest_main CUDA::cudart_static)
remex_discover_tests(fused_cuda_test DISCOVERY_TIMEOUT 60 PROPERTIES ${REMEX_CUDA_TEST_PROPERTIES})

# The generated source compiled with the host C++ compiler (the one building Remex) and
# run on the CPU against the CPU kernel (fused_host_shim.h adapts it): needs no GPU and
# no CUDA library, so it is not labelled `cuda` and runs in every ctest run.
add_executable(fused_host_test ${CMAKE_CURRENT_LIST_DIR}/fused_host_test.cc ${CMAKE_CURRENT_LIST_DIR}/fused_codegen.cc
                               ${REMEX_SCALAR_OPS_INC})
target_include_directories(fused_host_test PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
target_link_libraries(fused_host_test PRIVATE remex_kernels GTest::gtest_main ${CMAKE_DL_LIBS})
# The source tree relative to the test's folder (tests/built_path.h): no absolute path of
# the clone in a compile definition, so another clone hits the compiler cache.
file(RELATIVE_PATH remex_fused_host_include_built ${CMAKE_CURRENT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
target_compile_definitions(fused_host_test PRIVATE REMEX_HOST_CXX="${CMAKE_CXX_COMPILER}"
                           REMEX_HOST_INCLUDE_DIR_BUILT="${remex_fused_host_include_built}")
remex_discover_tests(fused_host_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
