// Device code of the TfIdfVectorizer CUDA kernel (text_impl.h). Includes only CUDA and
// plain headers. The counts are integers and each output element is one conversion (and
// at most one product) of kernels/ops/text/tfidf_ops.h: the CPU's bits whatever the order of the
// atomic additions.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/ops/text/cuda/tfidf_impl.h"
#include "kernels/ops/text/tfidf_ops.h"

namespace remex::kernels::cuda {
namespace {

// One thread per (row, start position): the n-grams starting there.
template <typename T>
__global__ void TfIdfCountKernel(tfidf::Params p, const tfidf::Node* nodes, const T* x, int64_t rows,
                                 int64_t cols, int64_t output_size, unsigned long long* counts) {
  const int64_t total = rows * cols;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t r = i / cols, start = i % cols;
    unsigned long long* row_counts = counts + r * output_size;
    auto count = [&](int64_t j) { atomicAdd(row_counts + j, 1ULL); };
    tfidf::CountFrom(nodes, p, x + r * cols, cols, start, count);
  }
}

// One thread per output element.
__global__ void TfIdfWeighKernel(tfidf::Mode mode, const float* weights, const unsigned long long* counts,
                                 int64_t output_size, float* y, int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    y[i] = tfidf::Weigh(counts[i], mode, weights, i % output_size);
  }
}

}  // namespace

cudaError_t LaunchTfIdf(const tfidf::Params& params, const tfidf::Node* nodes, const float* weights,
                        const void* x, bool x_is_int64, int64_t rows, int64_t cols, int64_t output_size,
                        unsigned long long* counts, float* y, cudaStream_t stream) {
  if (rows <= 0 || cols < 0 || output_size <= 0) return cudaErrorInvalidValue;
  const int64_t total = rows * output_size;
  cudaError_t error =
      cudaMemsetAsync(counts, 0, static_cast<size_t>(total) * sizeof(unsigned long long), stream);
  if (error != cudaSuccess) return error;
  if (cols > 0) {
    const unsigned blocks = Blocks(rows * cols);
    if (x_is_int64) {
      LaunchKernel<TfIdfCountKernel<int64_t>>(blocks, kThreads, 0, stream, params, nodes,
                                              static_cast<const int64_t*>(x), rows, cols, output_size,
                                              counts);
    } else {
      LaunchKernel<TfIdfCountKernel<int32_t>>(blocks, kThreads, 0, stream, params, nodes,
                                              static_cast<const int32_t*>(x), rows, cols, output_size,
                                              counts);
    }
    error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  LaunchKernel<TfIdfWeighKernel>(Blocks(total), kThreads, 0, stream, params.mode, weights,
                                 static_cast<const unsigned long long*>(counts), output_size, y, total);
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
