// Device code of the training-mode CUDA kernels (training_impl.h). Includes only CUDA
// and plain headers. Compiled with -fmad=false: the optimizers' rules
// (kernels/optimizer_ops.h) round as on the CPU, so the outputs are the CPU's bits.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/training_impl.h"
#include "kernels/optimizer_ops.h"

namespace remex::kernels::cuda {
namespace {

// One thread per element of a grid-stride loop; the factors once per thread.
template <typename T, typename R>
__global__ void OptimizerKernel(optimizer::Params p, const R* r, const int64_t* t, const T* x, const T* g,
                                const T* s1, const T* s2, T* x_new, T* s1_new, T* s2_new, int64_t n) {
  const optimizer::Factors f = optimizer::FactorsOf(p, static_cast<double>(*r), *t);
  for (int64_t e = GlobalThread(); e < n; e += GridThreads()) {
    double a = 0, b = 0;
    const double xe = optimizer::Update(p, f, static_cast<double>(x[e]), static_cast<double>(g[e]),
                                        static_cast<double>(s1[e]), s2 ? static_cast<double>(s2[e]) : 0.0, &a, &b);
    x_new[e] = static_cast<T>(xe);
    s1_new[e] = static_cast<T>(a);
    if (s2_new) s2_new[e] = static_cast<T>(b);
  }
}

template <typename T, typename R>
void LaunchOptimizer(const optimizer::Params& p, const void* r, const int64_t* t, const void* x, const void* g,
                     const void* s1, const void* s2, void* x_new, void* s1_new, void* s2_new, int64_t n,
                     cudaStream_t stream) {
  LaunchKernel<OptimizerKernel<T, R>>(Blocks(n), kThreads, 0, stream, p, static_cast<const R*>(r), t,
                                      static_cast<const T*>(x), static_cast<const T*>(g),
                                      static_cast<const T*>(s1), static_cast<const T*>(s2),
                                      static_cast<T*>(x_new), static_cast<T*>(s1_new), static_cast<T*>(s2_new), n);
}

template <typename T>
void LaunchOptimizerOf(const optimizer::Params& p, bool r_is_double, const void* r, const int64_t* t,
                       const void* x, const void* g, const void* s1, const void* s2, void* x_new, void* s1_new,
                       void* s2_new, int64_t n, cudaStream_t stream) {
  if (r_is_double) {
    LaunchOptimizer<T, double>(p, r, t, x, g, s1, s2, x_new, s1_new, s2_new, n, stream);
  } else {
    LaunchOptimizer<T, float>(p, r, t, x, g, s1, s2, x_new, s1_new, s2_new, n, stream);
  }
}

// float and float16 in float, double in double.
template <typename T, typename C>
__global__ void DropoutTrainKernel(const T* x, const uint8_t* keep, C scale, T* y, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    if constexpr (sizeof(T) == sizeof(C)) {
      y[i] = keep[i] ? x[i] * scale : T(0);
    } else {
      y[i] = keep[i] ? Store<T>(Load(x[i]) * scale) : Store<T>(0.0f);
    }
  }
}

}  // namespace

cudaError_t LaunchOptimizerUpdate(const optimizer::Params& params, MiscType type, const void* r,
                                  bool r_is_double, const int64_t* t, const void* x, const void* g,
                                  const void* s1, const void* s2, void* x_new, void* s1_new, void* s2_new,
                                  int64_t n, cudaStream_t stream) {
  const bool adam = params.rule == optimizer::Rule::kAdam;
  if (n <= 0 || r == nullptr || t == nullptr || adam != (s2 != nullptr) || adam != (s2_new != nullptr)) {
    return cudaErrorInvalidValue;
  }
  switch (type) {
    case MiscType::kFloat32:
      LaunchOptimizerOf<float>(params, r_is_double, r, t, x, g, s1, s2, x_new, s1_new, s2_new, n, stream);
      break;
    case MiscType::kFloat64:
      LaunchOptimizerOf<double>(params, r_is_double, r, t, x, g, s1, s2, x_new, s1_new, s2_new, n, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchDropoutTrain(MiscType type, const void* x, const uint8_t* keep, double scale, void* y,
                               int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  const unsigned blocks = Blocks(n);
  switch (type) {
    case MiscType::kFloat32:
      LaunchKernel<DropoutTrainKernel<float, float>>(blocks, kThreads, 0, stream, static_cast<const float*>(x), keep,
                                                     static_cast<float>(scale), static_cast<float*>(y), n);
      break;
    case MiscType::kFloat16:
      LaunchKernel<DropoutTrainKernel<__half, float>>(blocks, kThreads, 0, stream, static_cast<const __half*>(x),
                                                      keep, static_cast<float>(scale), static_cast<__half*>(y), n);
      break;
    case MiscType::kFloat64:
      LaunchKernel<DropoutTrainKernel<double, double>>(blocks, kThreads, 0, stream, static_cast<const double*>(x),
                                                       keep, scale, static_cast<double*>(y), n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
