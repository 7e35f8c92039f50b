// CUDA kernels of the extra group (host side): HannWindow-17, HammingWindow-17,
// BlackmanWindow-17, MeanVarianceNormalization-9/13, ReverseSequence-10, Det-11 and
// Einsum-12.
// Device code in extra_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/window.cc,
// kernels/sequence_norm.cc, kernels/determinant.cc, kernels/einsum.cc): the same views check the inputs and
// attributes, and the device code evaluates the same formulas and index plans
// (kernels/window_ops.h, kernels/sequence_norm_ops.h, kernels/determinant_ops.h,
// kernels/einsum_ops.h).
//   - The window ops: size in host memory (ShapeDep::kData); every numeric
//     output_datatype. cos runs in double on the device (within 2 ulp of the CPU's
//     before the output's rounding).
//   - MeanVarianceNormalization: float32, float16, float64; the sums run in double in
//     the CPU's order, one thread per normalised group.
//   - ReverseSequence: any dtype; sequence_lens stay in device memory, so an out-of-range
//     length, which the CPU kernel refuses ("out of range"), is clamped to [0, time
//     extent] here: no element outside the input is read and every output element is
//     written.
//   - Det: float32, float16, float64; one thread per matrix, LU in double in a scratch
//     copy (batch * M * M doubles from the context's workspace hook, or stream-ordered
//     cudaMallocAsync without one).
//   - Einsum: float32, float16, float64, int32, int64; the index plan is parsed on the
//     host (EinsumViewOf) and passed by value; one thread per output element, summing
//     in the CPU's order and type.

#include <cuda_runtime_api.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/extra_impl.h"
#include "kernels/cuda/libraries_internal.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

class WindowKernel final : public CudaKernel {
 public:
  WindowKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::WindowView v,
                           internal::WindowViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                     uint64_t>(v.dtype, "numeric dtypes are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchWindow<T>(v.kind, v.periodic, v.size, static_cast<T*>(out[0].data), stream());
    });
  }
};

class MvnKernel final : public CudaKernel {
 public:
  MvnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(seqnorm::MvnPlan p, internal::MvnPlanOf(attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchMvn<T>(p, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), stream());
    });
  }
};

class ReverseSequenceKernel final : public CudaKernel {
 public:
  ReverseSequenceKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::ReverseSequenceView v,
                           internal::ReverseSequenceViewOf(attrs(), internal::ToShapeArgs(in)));
    const int size = static_cast<int>(DTypeSize(in[0].dtype));
    if (size != 1 && size != 2 && size != 4 && size != 8)
      return Unsupported(in[0].dtype, "1, 2, 4 and 8-byte dtypes are");
    return Launch([&] {
      return LaunchReverseSequence(v.plan, v.total, v.time, size, in[0].data,
                                   static_cast<const int64_t*>(in[1].data), out[0].data, stream());
    });
  }
};

class DetKernel final : public CudaKernel {
 public:
  DetKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::DetView v, internal::DetViewOf(internal::ToShapeArgs(in)));
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat16 && in[0].dtype != DType::kFloat64) {
      return Unsupported(in[0].dtype, "float32, float16 and float64 are");
    }
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* scratch,
                           workspace.Allocate(static_cast<size_t>(v.batch * v.m * v.m) * sizeof(double)));
    REMEX_RETURN_IF_ERROR(
        (LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchDet<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), v.batch, v.m,
                              static_cast<double*>(scratch), stream());
        })));
    return workspace.Release();
  }
};

class EinsumKernel final : public CudaKernel {
 public:
  EinsumKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::EinsumView v,
                           internal::EinsumViewOf(attrs(), internal::ToShapeArgs(in)));
    EinsumInputs inputs;
    for (size_t k = 0; k < in.size(); ++k) inputs.data[k] = in[k].data;
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchEinsum<T>(v.plan, inputs, static_cast<T*>(out[0].data), stream());
        });
  }
};

}  // namespace

Status AddExtraCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const char* name : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<WindowKernel>(context)));
  }
  for (int since : {9, 13}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "MeanVarianceNormalization", since, MakeCudaKernel<MvnKernel>(context)));
  }
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "ReverseSequence", MakeCudaKernel<ReverseSequenceKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Det", MakeCudaKernel<DetKernel>(context)));
  return AddCudaKernel(registry, "Einsum", MakeCudaKernel<EinsumKernel>(context));
}

}  // namespace remex::kernels::cuda
