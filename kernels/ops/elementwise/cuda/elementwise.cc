// CUDA kernels of the elementwise ops (host side): checks against the op's shape
// function, the broadcast plan, dtype dispatch and the launch (elementwise_impl.cu).
// Semantics are ONNX's (Add-14, Sub-14, Mul-14, Div-14 with multidirectional
// broadcasting; Relu-14, Sigmoid-13), as in kernels/ops/elementwise/elementwise.cc.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/ops/elementwise/cuda/elementwise_impl.h"
#include "kernels/internal.h"

namespace remex::kernels::cuda {
namespace {

class BinaryKernel final : public CudaKernel {
 public:
  BinaryKernel(const OpDef& def, Attributes attrs, BinaryOp op, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context), op_(op) {}

 protected:
  Status Run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) override {
    const TensorRef& out = outputs[0];
    const int64_t n = *NumElements(out.shape);
    if (n == 0) return OkStatus();
    auto plan = ComputeBroadcastPlan(inputs[0].shape, inputs[1].shape, out.shape);
    if (!plan.ok()) return plan.status().WithContext(op());
    return LaunchFor<float, Half>(out.dtype, "float32 and float16 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchBinary<T>(op_, static_cast<const T*>(inputs[0].data),
                             static_cast<const T*>(inputs[1].data), static_cast<T*>(out.data), n, *plan,
                             stream());
    });
  }

 private:
  const BinaryOp op_;
};

class UnaryKernel final : public CudaKernel {
 public:
  UnaryKernel(const OpDef& def, Attributes attrs, UnaryOp op, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context), op_(op) {}

 protected:
  Status Run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) override {
    const TensorRef& out = outputs[0];
    const int64_t n = *NumElements(out.shape);
    if (n == 0) return OkStatus();
    return LaunchFor<float, Half>(out.dtype, "float32 and float16 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchUnary<T>(op_, static_cast<const T*>(inputs[0].data), static_cast<T*>(out.data), n,
                            stream());
    });
  }

 private:
  const UnaryOp op_;
};

}  // namespace

Status AddElementwiseCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Add", MakeCudaKernel<BinaryKernel>(BinaryOp::kAdd, context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Sub", MakeCudaKernel<BinaryKernel>(BinaryOp::kSub, context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Mul", MakeCudaKernel<BinaryKernel>(BinaryOp::kMul, context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Div", MakeCudaKernel<BinaryKernel>(BinaryOp::kDiv, context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Relu", MakeCudaKernel<UnaryKernel>(UnaryOp::kRelu, context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Sigmoid", MakeCudaKernel<UnaryKernel>(UnaryOp::kSigmoid, context)));
  return OkStatus();
}

}  // namespace remex::kernels::cuda
