// Host shim for the CUDA C source of FusedElementwise (GenerateFusedKernelSource,
// kernels/ops/fused/cuda/fused_codegen.h). Included before that source, it lets a host C++
// compiler (C++17) build the very same text into a function that runs on the CPU, so
// that a test can check the source's semantics against the CPU kernel
// (kernels/ops/fused/cuda/fused_host_test.cc). Tests only: NVRTC never sees this file.
//
// What the source needs from CUDA, on the host:
//   - __global__, __device__, __forceinline__: plain inline functions.
//   - blockIdx and threadIdx are 0, blockDim and gridDim 1 (.x; .y and .z too): the
//     kernel's grid-stride loop is one thread walking every output element in order.
//   - __int_as_float (immediates as bit patterns): memcpy.
//   - float16 loads and stores: the source's host branch (it guards its PTX cvt with
//     __CUDACC_RTC__ / __CUDA_ARCH__) calls remex_host_half_to_float and
//     remex_host_float_to_half_rn, here kernels/float16.h's conversions (exact, and
//     round to nearest even), the ones the CPU kernel uses.
//   - Math functions (tanhf, powf, tanh, ...): the C library's, which the CPU kernel
//     calls too, except float expf and erff: remex_host::expf and remex_host::erff call
//     the functions set with remex_host_set_float_exp and remex_host_set_float_erf (the
//     test sets the CPU kernel's exp and erf, which are not the C library's), so that
//     the two sides compute the same float expressions.
//
// The includer wraps each generated source in a namespace of its own inside
// remex_host, e.g. `namespace remex_host { namespace k0 { <source> } }`, with
// remex_fused_elementwise #defined to a name unique to that source (an extern "C"
// name is one function whatever its namespace): one translation unit then holds many
// kernels, and the source's unqualified calls to expf find remex_host::expf before
// the C library's (erff likewise).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstring>

#include "kernels/float16.h"

#define __global__
#define __device__
#define __forceinline__ inline

struct remex_host_dim3 {
  unsigned int x, y, z;
};
inline constexpr remex_host_dim3 blockIdx = {0, 0, 0};
inline constexpr remex_host_dim3 threadIdx = {0, 0, 0};
inline constexpr remex_host_dim3 blockDim = {1, 1, 1};
inline constexpr remex_host_dim3 gridDim = {1, 1, 1};

inline float __int_as_float(int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float remex_host_half_to_float(unsigned short h) { return remex::kernels::HalfToFloat(remex::kernels::Half{h}); }
inline unsigned short remex_host_float_to_half_rn(float f) { return remex::kernels::FloatToHalf(f).bits; }

namespace remex_host {

inline float (*float_exp)(float) = nullptr;

// expf of the generated float sources (float32, and float16 computed in float).
inline float expf(float x) { return float_exp(x); }

inline float (*float_erf)(float) = nullptr;

// erff of the generated float sources.
inline float erff(float x) { return float_erf(x); }

}  // namespace remex_host

extern "C" void remex_host_set_float_exp(float (*f)(float)) { remex_host::float_exp = f; }
extern "C" void remex_host_set_float_erf(float (*f)(float)) { remex_host::float_erf = f; }
