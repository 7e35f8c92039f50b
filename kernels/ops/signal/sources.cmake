# The signal family's CPU sources and tests (kernels/ops/families.def; included by
# kernels/CMakeLists.txt for the table's REMEX_OP_FAMILY(signal) row).
target_sources(remex_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/spectral.cc
  ${CMAKE_CURRENT_LIST_DIR}/window.cc
)
list(APPEND REMEX_KERNELS_TEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/spectral_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/window_test.cc
)
# DFT's and STFT's sums and twiddle polynomials round as in the CUDA kernels (compiled
# with -fmad=false): no contraction into fused multiply-adds.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/spectral.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
