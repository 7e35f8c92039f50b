// Device code of the training-mode CUDA kernels (optimizer_impl.h). Includes only CUDA
// and plain headers. Compiled with -fmad=false: the optimizers' rules
// (kernels/ops/training/optimizer_ops.h) round as on the CPU, so the outputs are the CPU's bits.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/ops/training/cuda/optimizer_impl.h"
#include "kernels/ops/training/optimizer_ops.h"

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

template <typename T>
cudaError_t LaunchOptimizerUpdate(const optimizer::Params& params, const void* r, bool r_is_double,
                                  const int64_t* t, const T* x, const T* g, const T* s1, const T* s2,
                                  T* x_new, T* s1_new, T* s2_new, int64_t n, cudaStream_t stream) {
  const bool adam = params.rule == optimizer::Rule::kAdam;
  if (n <= 0 || r == nullptr || t == nullptr || adam != (s2 != nullptr) || adam != (s2_new != nullptr)) {
    return cudaErrorInvalidValue;
  }
  LaunchOptimizerOf<T>(params, r_is_double, r, t, x, g, s1, s2, x_new, s1_new, s2_new, n, stream);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchDropoutTrain(const T* x, const uint8_t* keep, double scale, T* y, int64_t n,
                               cudaStream_t stream) {
  if (n <= 0) return cudaErrorInvalidValue;
  using D = DeviceType<T>;
  // The product's type: double for float64, float otherwise.
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  LaunchKernel<DropoutTrainKernel<D, C>>(Blocks(n), kThreads, 0, stream, reinterpret_cast<const D*>(x), keep,
                                         static_cast<C>(scale), reinterpret_cast<D*>(y), n);
  return cudaGetLastError();
}

#define REMEX_OPTIMIZER_INSTANTIATE(T)                                                                       \
  template cudaError_t LaunchOptimizerUpdate<T>(const optimizer::Params&, const void*, bool, const int64_t*, \
                                                const T*, const T*, const T*, const T*, T*, T*, T*, int64_t, \
                                                cudaStream_t);
#define REMEX_DROPOUT_INSTANTIATE(T) \
  template cudaError_t LaunchDropoutTrain<T>(const T*, const uint8_t*, double, T*, int64_t, cudaStream_t);
REMEX_OPTIMIZER_INSTANTIATE(float)
REMEX_OPTIMIZER_INSTANTIATE(double)
REMEX_DROPOUT_INSTANTIATE(float)
REMEX_DROPOUT_INSTANTIATE(Half)
REMEX_DROPOUT_INSTANTIATE(double)
#undef REMEX_OPTIMIZER_INSTANTIATE
#undef REMEX_DROPOUT_INSTANTIATE

}  // namespace remex::kernels::cuda
