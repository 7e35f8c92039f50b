// CUDA kernels of the training domain's optimizers Adagrad-1, Adam-1 and Momentum-1
// (ONNX ai.onnx.preview.training; host side). Device code in optimizer_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/ops/training/optimizer.cc): the same
// view (kernels/ops/training/optimizer_view.h) checks the attributes and inputs, and the device code
// evaluates the same rules (kernels/ops/training/optimizer_ops.h) in double, so the outputs are the
// CPU's bits. R and T stay in device memory (no shape depends on them): each thread
// reads them and derives the step's factors. One launch per optimised tensor.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/training/cuda/optimizer_impl.h"
#include "kernels/internal.h"
#include "kernels/ops/training/optimizer_view.h"

namespace remex::kernels::cuda {
namespace {

class OptimizerKernel final : public CudaKernel {
 public:
  OptimizerKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::OptimizerView v, internal::OptimizerViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    const size_t wanted = static_cast<size_t>((1 + v.states) * v.n);
    if (out.size() != wanted) {
      return InvalidArgument(op() + ": " + std::to_string(out.size()) + " outputs; expects " + std::to_string(wanted));
    }
    const bool adam = v.states > 1;
    for (int64_t i = 0; i < v.n; ++i) {
      if (v.counts[static_cast<size_t>(i)] == 0) continue;
      REMEX_RETURN_IF_ERROR((LaunchFor<float, double>(v.dtype, "float32 and float64 are", [&](auto tag) {
        using T = decltype(tag);
        auto at = [](const TensorRef& t) { return static_cast<T*>(t.data); };
        return LaunchOptimizerUpdate<T>(
            v.params, in[0].data, v.rate_dtype == DType::kFloat64, static_cast<const int64_t*>(in[1].data),
            at(in[v.X(i)]), at(in[v.G(i)]), at(in[v.State(0, i)]), adam ? at(in[v.State(1, i)]) : nullptr,
            at(out[v.NewX(i)]), at(out[v.NewState(0, i)]), adam ? at(out[v.NewState(1, i)]) : nullptr,
            v.counts[static_cast<size_t>(i)], stream());
      })));
    }
    return OkStatus();
  }
};

}  // namespace

Status AddOptimizerCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const char* name : {"Adagrad", "Adam", "Momentum"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(
        registry, name, 1,
        [context, name](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
          REMEX_RETURN_IF_ERROR(internal::OptimizerParamsOf(name, attrs).status());
          return std::unique_ptr<OpKernel>(std::make_unique<OptimizerKernel>(def, attrs, context));
        }));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
