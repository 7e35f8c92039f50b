// Launcher of FusedAttention's CUDA kernel (attention_impl.cu): Y = softmax(scale Q K^T +
// mask) V, the op the compiler makes from an exporter's attention
// (host_client/compiler/passes/attention_fusion.h; semantics in
// kernels/ops/math/attention.cc, ONNX Attention-23 without its optional inputs).
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. The
// host side (attention.cc) has checked the geometry (internal::AttentionGeometryOf) and
// fills the plan; pointers are device pointers, float32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace remex::kernels::cuda {

// One call. Axes are logical: [batch0, batch1, S, D] for Q (S = Sq), K (S = Sk) and V
// (D = Dv), [batch0, batch1, Sq, Sk] for the mask, [batch0, batch1, Sq, Dv] for Y; a
// rank-3 call has batch0 = 1. Strides are in elements of the stored tensors (the
// mask's 0 where it broadcasts). `mask` may be null.
struct AttentionPlan {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* mask = nullptr;
  float* y = nullptr;
  int64_t batch[2] = {1, 1};
  int64_t sq = 0, sk = 0, d = 0, dv = 0;
  int64_t q_stride[4] = {}, k_stride[4] = {}, v_stride[4] = {}, y_stride[4] = {}, mask_stride[4] = {};
  float scale = 1.0f;
};

// The most D, and the most Dv, the kernel takes: a block keeps Q's row and Y's row in
// shared memory beside a chunk of scores, within the 48 KiB of static shared memory
// every CUDA GPU gives a block.
constexpr int kAttentionMaxHead = 4096;

// Queues Y on `stream`: one block per (batch, query row), the keys in chunks with the
// running maximum and sum of the online softmax (Milakov and Gimelshein, "Online
// normalizer calculation for softmax", 2018), so the scores never take more than a
// chunk. The softmax's maximum skips NaN, as the CPU kernel's; Sk = 0 gives Y = 0.
// cudaErrorInvalidValue when D or Dv exceeds kAttentionMaxHead or a dim is negative;
// cudaSuccess for an empty Y (nothing queued).
cudaError_t LaunchFusedAttention(const AttentionPlan& plan, cudaStream_t stream);

}  // namespace remex::kernels::cuda
