// CUDA kernels of the elementwise ops (host side): checks against the op's shape
// function, the broadcast plan, dtype dispatch and the launch (elementwise_impl.cu).
// Semantics are ONNX's (Add-14, Sub-14, Mul-14, Div-14 with multidirectional
// broadcasting; Relu-14, Sigmoid-13), as in kernels/elementwise.cc.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/elementwise_impl.h"
#include "kernels/internal.h"

namespace remex::kernels::cuda {
namespace {

StatusOr<ElemType> ToElemType(std::string_view op, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ElemType::kFloat32;
    case DType::kFloat16: return ElemType::kFloat16;
    default: break;
  }
  return Unimplemented(std::string(op) + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                       " is not implemented (float32 and float16 are)");
}

class BinaryKernel final : public OpKernel {
 public:
  BinaryKernel(OpDef def, Attributes attrs, BinaryOp op, CudaKernelContext context)
      : def_(std::move(def)), attrs_(std::move(attrs)), op_(op), context_(context) {}

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) override {
    REMEX_RETURN_IF_ERROR(internal::CheckAgainstShapeFn(def_, attrs_, inputs, outputs));
    const TensorRef& out = outputs[0];
    REMEX_ASSIGN_OR_RETURN(ElemType type, ToElemType(def_.name, out.dtype));
    const int64_t n = *NumElements(out.shape);
    if (n == 0) return OkStatus();
    auto plan = ComputeBroadcastPlan(inputs[0].shape, inputs[1].shape, out.shape);
    if (!plan.ok()) return plan.status().WithContext(def_.name);
    REMEX_RETURN_IF_ERROR(CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)));
    return CudaCheck(def_.name, "kernel launch",
                     LaunchBinary(op_, type, inputs[0].data, inputs[1].data, out.data, n, *plan,
                                  static_cast<cudaStream_t>(context_.stream)));
  }

 private:
  const OpDef def_;
  const Attributes attrs_;
  const BinaryOp op_;
  const CudaKernelContext context_;
};

class UnaryKernel final : public OpKernel {
 public:
  UnaryKernel(OpDef def, Attributes attrs, UnaryOp op, CudaKernelContext context)
      : def_(std::move(def)), attrs_(std::move(attrs)), op_(op), context_(context) {}

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) override {
    REMEX_RETURN_IF_ERROR(internal::CheckAgainstShapeFn(def_, attrs_, inputs, outputs));
    const TensorRef& out = outputs[0];
    REMEX_ASSIGN_OR_RETURN(ElemType type, ToElemType(def_.name, out.dtype));
    const int64_t n = *NumElements(out.shape);
    if (n == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)));
    return CudaCheck(def_.name, "kernel launch",
                     LaunchUnary(op_, type, inputs[0].data, out.data, n, static_cast<cudaStream_t>(context_.stream)));
  }

 private:
  const OpDef def_;
  const Attributes attrs_;
  const UnaryOp op_;
  const CudaKernelContext context_;
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
