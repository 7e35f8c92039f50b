// The CUDA kernel of FusedAttention (host side): Y = softmax(scale Q K^T + mask) V with
// the head Transposes taken in as strides, as the CPU kernel (kernels/ops/math/attention.cc,
// which gives the semantics: ONNX Attention-23 without its optional inputs). Device code:
// the launcher of attention_impl.h (attention_impl.cu).
//
// float32 only, as the op; ranks 3 and 4. The geometry is the CPU kernel's
// (internal::AttentionGeometryOf); UNIMPLEMENTED naming the limit when D or Dv exceeds
// kAttentionMaxHead.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/math/cuda/attention_impl.h"

namespace remex::kernels::cuda {

namespace {

class FusedAttentionCudaKernel final : public SkipEmptyKernel {
 public:
  static StatusOr<std::unique_ptr<FusedAttentionCudaKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                                    CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(internal::AttentionAttrs parsed, internal::AttentionAttrsOf(attrs));
    return std::make_unique<FusedAttentionCudaKernel>(def, attrs, context, std::move(parsed));
  }
  FusedAttentionCudaKernel(const OpDef& def, Attributes attrs, CudaKernelContext context,
                           internal::AttentionAttrs parsed)
      : SkipEmptyKernel(def, std::move(attrs), context), parsed_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(const internal::AttentionGeometry g,
                           internal::AttentionGeometryOf(parsed_, internal::ToShapeArgs(in)));
    if (g.d > kAttentionMaxHead || g.dv > kAttentionMaxHead) {
      return Unimplemented(op() + " on cuda: D " + std::to_string(g.d) + " and Dv " + std::to_string(g.dv) +
                           " must each be at most " + std::to_string(kAttentionMaxHead));
    }
    AttentionPlan p;
    p.q = static_cast<const float*>(in[0].data);
    p.k = static_cast<const float*>(in[1].data);
    p.v = static_cast<const float*>(in[2].data);
    p.mask = g.has_mask ? static_cast<const float*>(in[3].data) : nullptr;
    p.y = static_cast<float*>(out[0].data);
    p.sq = g.sq;
    p.sk = g.sk;
    p.d = g.d;
    p.dv = g.dv;
    p.scale = g.attrs.scale;
    // The logical axes right-aligned into [batch0, batch1, S, D]: a rank-3 call's batch0 is 1.
    const size_t lead = 4 - g.rank;
    for (size_t i = 0; i < g.batch.size(); ++i) p.batch[lead + i] = g.batch[i];
    int64_t* strides[4] = {p.q_stride, p.k_stride, p.v_stride, p.y_stride};
    for (int t = 0; t < 4; ++t) {
      for (size_t i = 0; i < g.rank; ++i) strides[t][lead + i] = g.stride[t][i];
    }
    if (g.has_mask) {
      for (size_t i = 0; i < g.rank; ++i) p.mask_stride[lead + i] = g.mask_stride[i];
    }
    return Launch([&] { return LaunchFusedAttention(p, stream()); });
  }

 private:
  const internal::AttentionAttrs parsed_;
};

}  // namespace

Status AddAttentionCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "FusedAttention", MakeCudaKernel<FusedAttentionCudaKernel>(context));
}

}  // namespace remex::kernels::cuda
