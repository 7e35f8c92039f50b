// CUDA kernel of LRN (host side; device code: LaunchLrn, nn/cuda/norm_impl.cu).
// LRN, opsets 1-13, as the CPU kernel (kernels/ops/nn/pool.cc): size, alpha, beta, bias;
// float32, float16 (computed in float32) and float64. Other dtypes are UNIMPLEMENTED naming
// the op and dtype.

#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/cuda/norm_impl.h"

namespace remex::kernels::cuda {
namespace {

using internal::LrnAttrs;
using internal::ParseLrnAttrs;

// ---------------------------------------------------------------------------
// LRN.

class LrnKernel final : public CudaKernel {
 public:
  static StatusOr<std::unique_ptr<LrnKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                     CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(LrnAttrs lrn, ParseLrnAttrs(attrs));
    return std::make_unique<LrnKernel>(def, attrs, context, lrn);
  }
  LrnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, LrnAttrs lrn)
      : CudaKernel(def, std::move(attrs), context), lrn_(lrn) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    LrnArgs args;
    args.batch = shape[0];
    args.channels = shape[1];
    args.inner = 1;
    for (size_t d = 2; d < shape.size(); ++d) args.inner *= shape[d];
    if (args.batch * args.channels * args.inner == 0) return OkStatus();
    args.lo = (lrn_.size - 1) / 2;
    args.hi = lrn_.size - 1 - args.lo;
    args.bias = lrn_.bias;
    args.beta = lrn_.beta;
    return LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      // As the CPU kernel: alpha / size in the compute type (float for float16).
      if constexpr (std::is_same_v<T, double>) {
        args.alpha_over_size = static_cast<double>(lrn_.alpha) / static_cast<double>(lrn_.size);
      } else {
        args.alpha_over_size = static_cast<double>(lrn_.alpha / static_cast<float>(lrn_.size));
      }
      return LaunchLrn<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), args, stream());
    });
  }

 private:
  const LrnAttrs lrn_;
};

}  // namespace

Status AddLrnCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  return AddCudaKernel(registry, "LRN", MakeCudaKernel<LrnKernel>(context));
}

}  // namespace remex::kernels::cuda
