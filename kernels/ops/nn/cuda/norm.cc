// CUDA kernels of BatchNormalization, InstanceNormalization, LayerNormalization and
// LpNormalization (host side). Device code: the launchers of norm_impl.h (norm_impl.cu).
//
// Semantics are the CPU kernels' (kernels/ops/nn/norm.cc), which follow ONNX:
//   - BatchNormalization (opsets 7-15, inference and training mode: batch statistics
//     per channel in one block, running statistics written), InstanceNormalization (opset 6),
//     LayerNormalization (opset 17, stash_type 1 only; Mean and InvStdDev outputs).
//   - LpNormalization-1: one thread per vector, summed in order as the CPU kernel does
//     (kernels/ops/nn/lp_ops.h).
// float32 and float16; other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/cuda/norm_impl.h"

namespace remex::kernels::cuda {

namespace {

// ---------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LayerNormalization.

// [n, c, inner] view of a [N, C, ...] shape.
void ChannelView(const Shape& shape, int64_t& n, int64_t& c, int64_t& inner) {
  n = shape[0];
  c = shape[1];
  inner = 1;
  for (size_t i = 2; i < shape.size(); ++i) inner *= shape[i];
}

class BatchNormKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    int64_t n, c, inner;
    ChannelView(in[0].shape, n, c, inner);
    REMEX_ASSIGN_OR_RETURN(int64_t training, attrs().Int("training_mode", 0));
    float momentum = 0.0f;
    if (training == 1) {
      REMEX_ASSIGN_OR_RETURN(momentum, attrs().Float("momentum", 0.9f));
    }
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      auto input = [&](size_t i) { return static_cast<const T*>(in[i].data); };
      T* y = static_cast<T*>(out[0].data);
      if (training == 1) {
        return LaunchBatchNormTraining<T>(input(0), input(1), input(2), input(3), input(4), y,
                                          out.size() > 1 ? static_cast<T*>(out[1].data) : nullptr,
                                          out.size() > 2 ? static_cast<T*>(out[2].data) : nullptr, n, c,
                                          inner, epsilon, momentum, stream());
      }
      return LaunchBatchNorm<T>(input(0), input(1), input(2), input(3), input(4), y, n, c, inner, epsilon,
                                stream());
    });
  }
};

class InstanceNormKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    int64_t n, c, inner;
    ChannelView(in[0].shape, n, c, inner);
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchInstanceNorm<T>(static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                   static_cast<const T*>(in[2].data), static_cast<T*>(out[0].data), n, c,
                                   inner, epsilon, stream());
    });
  }
};

// Strides of a parameter of shape `s` broadcast (right-aligned) to `x`, 0 where it
// broadcasts; whether it is one row over the dims [axis, rank).
void ParamStrides(const Shape& x, const Shape& s, size_t axis, int64_t* strides, bool& is_row) {
  const size_t lead = x.size() - s.size();
  int64_t st = 1;
  is_row = true;
  for (size_t d = x.size(); d-- > 0;) {
    const int64_t extent = d < lead ? 1 : s[d - lead];
    strides[d] = extent == 1 ? 0 : st;
    st *= extent;
    if (d < axis ? extent != 1 : extent != x[d]) is_row = false;
  }
}

class LayerNormKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int64_t stash, attrs().Int("stash_type", 1));
    if (stash != 1) {
      return Unimplemented(op() + " on cuda: stash_type " + std::to_string(stash) +
                           " is not implemented (1 is)");
    }
    REMEX_ASSIGN_OR_RETURN(float epsilon, attrs().Float("epsilon", 1e-5f));
    REMEX_ASSIGN_OR_RETURN(int64_t axis_attr, attrs().Int("axis", -1));
    const Shape& xs = in[0].shape;
    const int64_t rank = static_cast<int64_t>(xs.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), axis_attr, rank));
    if (rank > kMaxLayerNormRank) {
      return Unimplemented(op() + " on cuda: rank " + std::to_string(rank) + " is above " +
                           std::to_string(kMaxLayerNormRank));
    }
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= xs[i];
    if (outer == 0) return OkStatus();
    ParamBroadcast pb;
    pb.rank = static_cast<int>(rank);
    for (int64_t i = 0; i < rank; ++i) pb.dims[i] = xs[i];
    ParamStrides(xs, in[1].shape, static_cast<size_t>(axis), pb.scale_strides, pb.scale_is_row);
    const bool has_bias = in.size() > 2 && in[2].present();
    if (has_bias) ParamStrides(xs, in[2].shape, static_cast<size_t>(axis), pb.bias_strides, pb.bias_is_row);
    float* mean_out = out.size() > 1 ? static_cast<float*>(out[1].data) : nullptr;
    float* inv_out = out.size() > 2 ? static_cast<float*>(out[2].data) : nullptr;
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchLayerNorm<T>(static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                has_bias ? static_cast<const T*>(in[2].data) : nullptr,
                                static_cast<T*>(out[0].data), mean_out, inv_out, outer, inner, pb, epsilon,
                                stream());
    });
  }
};

// LpNormalization-1.
class LpNormalizationKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::LpNormParams g, internal::ParseLpNormalization(attrs(), in[0].shape));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchLpNormalization<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data),
                                      g.outer, g.n, g.inner, g.p, stream());
    });
  }
};

}  // namespace

Status AddNormCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "BatchNormalization", MakeCudaKernel<BatchNormKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "InstanceNormalization", MakeCudaKernel<InstanceNormKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "LayerNormalization", MakeCudaKernel<LayerNormKernel>(context)));
  return AddCudaKernel(registry, "LpNormalization", MakeCudaKernel<LpNormalizationKernel>(context));
}

}  // namespace remex::kernels::cuda
