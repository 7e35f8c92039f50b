// CUDA kernel of Dropout (host side; device code: LaunchFill, generator/cuda/generate_impl.cu,
// and LaunchDropoutTrain, training/cuda/optimizer_impl.cu).
// Dropout-7 and Dropout-10+ (one kernel for both entries), as the CPU kernel
// (kernels/ops/elementwise/unary.cc): at inference output = input and the optional mask all
// true (all ones of the input's dtype for Dropout-7); ratio and training_mode are read on
// the host. Training mode (Dropout-12+, ratio in (0, 1)): the CPU kernel's mask, drawn on
// the host and copied to the device, and its scaling, for float16, float32 and float64.

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
#include "kernels/ops/generator/cuda/generate_impl.h"
#include "kernels/ops/training/cuda/optimizer_impl.h"
#include "kernels/ops/elementwise/dropout_mask.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {


int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

// ---------------------------------------------------------------------------
// Dropout.

// The bytes of 1 in `dtype` (true for bool).
std::optional<uint64_t> OneBits(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return uint64_t{0x3f800000};
    case DType::kFloat16:
      return uint64_t{0x3c00};
    case DType::kFloat64:
      return uint64_t{0x3ff0000000000000};
    case DType::kBool:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
      return uint64_t{1};
    default:
      break;
  }
  return std::nullopt;
}

// ratio and training_mode are in host memory (ShapeDep::kData). In training mode the
// mask is drawn on the host (kernels/ops/elementwise/dropout_mask.h: the CPU kernel's draw, so the same
// elements are dropped), copied to the mask output (or to workspace scratch without
// one), and the kept elements are scaled on the device (LaunchDropoutTrain).
class DropoutKernel final : public CudaKernel {
 public:
  DropoutKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, attrs, context), seeds_(internal::DropoutSeedOf(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = Count(in[0].shape);
    if (n == 0) return OkStatus();
    REMEX_ASSIGN_OR_RETURN(std::optional<double> ratio, internal::DropoutTrainingRatio(internal::ToShapeArgs(in)));
    if (ratio) return RunTraining(*ratio, n, in, out);
    std::optional<uint64_t> one;
    if (out.size() > 1) {
      one = OneBits(out[1].dtype);
      if (!one) return Unsupported(out[1].dtype, "the mask takes bool and the numeric dtypes");
    }
    const size_t bytes = static_cast<size_t>(n) * DTypeSize(in[0].dtype);
    REMEX_RETURN_IF_ERROR(UseDevice());
    if (out[0].data != in[0].data) {
      REMEX_RETURN_IF_ERROR(
          CudaCheck(op(), "cudaMemcpyAsync",
                    cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream())));
    }
    if (!one) return OkStatus();
    const int size = static_cast<int>(DTypeSize(out[1].dtype));
    return CudaCheck(op(), "kernel launch", LaunchFill(out[1].data, n, size, *one, stream()));
  }

 private:
  Status RunTraining(double ratio, int64_t n, std::span<const TensorRef> in, std::span<const TensorRef> out) {
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat16 && in[0].dtype != DType::kFloat64) {
      return Unsupported(in[0].dtype, "training mode takes float16, float32 and float64");
    }
    std::vector<uint8_t> keep(static_cast<size_t>(n));
    internal::DrawDropoutMask(seeds_.Next(), ratio, keep.data(), n);
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    void* mask = nullptr;
    if (out.size() > 1) {
      mask = out[1].data;
    } else {
      REMEX_ASSIGN_OR_RETURN(mask, workspace.Allocate(keep.size()));
    }
    // `keep` is pageable: cudaMemcpyAsync returns once it has been staged.
    REMEX_RETURN_IF_ERROR(CudaCheck(
        op(), "cudaMemcpyAsync", cudaMemcpyAsync(mask, keep.data(), keep.size(), cudaMemcpyHostToDevice, stream())));
    REMEX_RETURN_IF_ERROR((LaunchFor<float, Half, double>(
        in[0].dtype, "training mode takes float16, float32 and float64", [&](auto tag) {
          using T = decltype(tag);
          return LaunchDropoutTrain<T>(static_cast<const T*>(in[0].data), static_cast<const uint8_t*>(mask),
                                       1.0 / (1.0 - ratio), static_cast<T*>(out[0].data), n, stream());
        })));
    return workspace.Release();
  }

  internal::DropoutSeeds seeds_;
};

}  // namespace

Status AddDropoutCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  // Dropout-7 and Dropout-10+ differ in the mask's dtype only, which the output brings.
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Dropout", 7, MakeCudaKernel<DropoutKernel>(context)));
  return AddCudaKernel(registry, "Dropout", 10, MakeCudaKernel<DropoutKernel>(context));
}

}  // namespace remex::kernels::cuda
