// Device code of FusedAttention (attention_impl.h). Includes only CUDA and plain headers.
//
// One block per (batch, query row), in a grid-stride loop. The block holds Q's row, the
// running output row and a chunk of kChunk scores in shared memory; for each chunk of
// keys its threads compute the scores (thread j: key j of the chunk), the block reduces
// their maximum, each score becomes exp(score - m) with m the running maximum, and the
// output row and the running sum are rescaled by exp(m_before - m) and take the chunk's
// weighted rows of V (thread t: output element t). At the end Y's row is the running
// output over the running sum. Sums accumulate in float32 in another order than the CPU
// kernel's sgemm, so the two agree to rounding.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/ops/math/cuda/attention_impl.h"

namespace remex::kernels::cuda {
namespace {

constexpr int kAttentionThreads = 128;
constexpr int64_t kChunk = 256;  // keys per chunk of scores

// kMaxHead: the most D and Dv it takes (its shared arrays' size; static, as the
// emulation of CUDA has no dynamic shared memory).
template <int kMaxHead>
__global__ void FusedAttentionKernel(AttentionPlan p) {
  __shared__ float q_row[kMaxHead];   // Q's row
  __shared__ float y_row[kMaxHead];   // the running output row
  __shared__ float scores[kChunk];
  __shared__ float scratch[32];
  const int64_t rows = p.batch[0] * p.batch[1] * p.sq;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % p.sq;
    const int64_t b = row / p.sq;
    const int64_t b0 = b / p.batch[1], b1 = b % p.batch[1];
    const float* q = p.q + b0 * p.q_stride[0] + b1 * p.q_stride[1] + i * p.q_stride[2];
    const float* k = p.k + b0 * p.k_stride[0] + b1 * p.k_stride[1];
    const float* v = p.v + b0 * p.v_stride[0] + b1 * p.v_stride[1];
    const float* mask =
        p.mask ? p.mask + b0 * p.mask_stride[0] + b1 * p.mask_stride[1] + i * p.mask_stride[2] : nullptr;
    float* y = p.y + b0 * p.y_stride[0] + b1 * p.y_stride[1] + i * p.y_stride[2];
    for (int64_t t = threadIdx.x; t < p.d; t += blockDim.x) q_row[t] = q[t * p.q_stride[3]];
    for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x) y_row[t] = 0.0f;
    __syncthreads();
    float m = -INFINITY;  // the running maximum
    float sum = 0.0f;     // the running sum of exp(score - m)
    for (int64_t c0 = 0; c0 < p.sk; c0 += kChunk) {
      const int64_t n = p.sk - c0 < kChunk ? p.sk - c0 : kChunk;
      float chunk_max = -INFINITY;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float* kj = k + (c0 + j) * p.k_stride[2];
        float dot = 0.0f;
        for (int64_t t = 0; t < p.d; ++t) dot += q_row[t] * kj[t * p.k_stride[3]];
        float s = dot * p.scale;
        if (mask) s += mask[(c0 + j) * p.mask_stride[3]];
        scores[j] = s;
        chunk_max = MaxSkipNan(chunk_max, s);
      }
      chunk_max = BlockReduce(chunk_max, MaxSkipNan, scratch);  // its barriers publish `scores`
      const float m_new = MaxSkipNan(m, chunk_max);
      float chunk_sum = 0.0f;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const float e = expf(scores[j] - m_new);
        scores[j] = e;
        chunk_sum += e;
      }
      chunk_sum = BlockReduce(chunk_sum, Add, scratch);
      // The first chunk has nothing to rescale (m is -inf: exp would give NaN or 0).
      const float rescale = c0 == 0 ? 0.0f : expf(m - m_new);
      sum = sum * rescale + chunk_sum;
      for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x) {
        float acc = y_row[t] * rescale;
        const float* vt = v + c0 * p.v_stride[2] + t * p.v_stride[3];
        for (int64_t j = 0; j < n; ++j) acc += scores[j] * vt[j * p.v_stride[2]];
        y_row[t] = acc;
      }
      m = m_new;
      __syncthreads();  // every thread is done with `scores` before the next chunk
    }
    // Softmax over no keys: the empty sum, 0 (as the CPU kernel).
    for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x) {
      y[t * p.y_stride[3]] = p.sk == 0 ? 0.0f : y_row[t] / sum;
    }
    __syncthreads();  // before the next row overwrites q_row and y_row
  }
}

}  // namespace

cudaError_t LaunchFusedAttention(const AttentionPlan& plan, cudaStream_t stream) {
  if (plan.batch[0] < 0 || plan.batch[1] < 0 || plan.sq < 0 || plan.sk < 0 || plan.d < 0 || plan.dv < 0 ||
      plan.d > kAttentionMaxHead || plan.dv > kAttentionMaxHead) {
    return cudaErrorInvalidValue;
  }
  const int64_t rows = plan.batch[0] * plan.batch[1] * plan.sq;
  if (rows == 0 || plan.dv == 0) return cudaSuccess;
  const int64_t head = plan.d > plan.dv ? plan.d : plan.dv;
  // The smallest shared arrays that hold the rows: more blocks fit on a multiprocessor.
  if (head <= 128) {
    LaunchKernel<FusedAttentionKernel<128>>(Blocks(rows, 1), kAttentionThreads, 0, stream, plan);
  } else if (head <= 512) {
    LaunchKernel<FusedAttentionKernel<512>>(Blocks(rows, 1), kAttentionThreads, 0, stream, plan);
  } else {
    LaunchKernel<FusedAttentionKernel<kAttentionMaxHead>>(Blocks(rows, 1), kAttentionThreads, 0, stream, plan);
  }
  return cudaGetLastError();
}

}  // namespace remex::kernels::cuda
