// CUDA kernels of DFT-17, STFT-17 and MelWeightMatrix-17 (host side). Device code in
// spectral_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/ops/signal/spectral.cc): the same
// views (kernels/ops/signal/spectral_view.h) check the inputs.
//   - DFT and STFT: float16, float32, float64; the lengths (dft_length, frame_step,
//     frame_length) in host memory (ShapeDep::kData). A thread per output bin
//     evaluating kernels/ops/signal/spectral_ops.h's functions in double, as the CPU does: the
//     same bits (naive O(n) sums per bin, twiddles from spectral::UnitRoot).
//   - MelWeightMatrix: every input in host memory, so the matrix is computed on the host
//     by the CPU's code (internal::WriteMelWeightMatrix) and uploaded.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/signal/cuda/spectral_impl.h"
#include "kernels/internal.h"
#include "kernels/ops/signal/spectral_view.h"

namespace remex::kernels::cuda {
namespace {

class DftKernel final : public CudaKernel {
 public:
  DftKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::DftView v, internal::DftViewOf(attrs(), internal::ToShapeArgs(in)));
    return LaunchFor<float, Half, double>(v.dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchDft<T>(v.plan, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), stream());
    });
  }
};

class StftKernel final : public CudaKernel {
 public:
  StftKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::StftView v, internal::StftViewOf(attrs(), internal::ToShapeArgs(in)));
    const void* window = v.plan.has_window ? in[2].data : nullptr;
    return LaunchFor<float, Half, double>(v.dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      return LaunchStft<T>(v.plan, static_cast<const T*>(in[0].data), static_cast<const T*>(window),
                           static_cast<T*>(out[0].data), stream());
    });
  }
};

class MelWeightMatrixKernel final : public CudaKernel {
 public:
  MelWeightMatrixKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::MelWeightMatrixView v,
                           internal::MelWeightMatrixViewOf(attrs(), internal::ToShapeArgs(in)));
    const size_t bytes = static_cast<size_t>(v.spectrogram_bins * v.num_mel_bins) * DTypeSize(v.dtype);
    std::vector<uint8_t> host(bytes);
    internal::WriteMelWeightMatrix(v, host.data());
    REMEX_RETURN_IF_ERROR(UseDevice());
    // `host` is pageable: cudaMemcpyAsync returns once it has been staged, so it may be
    // released as soon as this returns.
    return CudaCheck(op(), "cudaMemcpyAsync",
                     cudaMemcpyAsync(out[0].data, host.data(), bytes, cudaMemcpyHostToDevice, stream()));
  }
};

}  // namespace

Status AddSpectralCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "DFT", 17, MakeCudaKernel<DftKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "STFT", 17, MakeCudaKernel<StftKernel>(context)));
  return AddCudaKernel(registry, "MelWeightMatrix", 17, MakeCudaKernel<MelWeightMatrixKernel>(context));
}

}  // namespace remex::kernels::cuda
