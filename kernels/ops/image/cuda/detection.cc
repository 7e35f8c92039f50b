// CUDA kernels of NonMaxSuppression-10/11 and RoiAlign-10/16 (host side). Device code
// in detection_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/ops/image/detection.cc): the
// same views (kernels/ops/image/det_view.h) check the inputs.
//   - NonMaxSuppression: every input is in host memory (ShapeDep::kData: the output
//     count depends on the boxes and scores), so the selection runs on the host, as
//     on the CPU (internal::NonMaxSuppressionOf), and the int64 triples are written to
//     the device output as launch arguments (LaunchWriteInt64s, as Shape does).
//   - RoiAlign: float32; a thread per output element evaluating
//     kernels/ops/image/det_ops.h's functions, as the CPU does: the same bits. A batch
//     index out of range, or a roi whose sampling grid is out of range, gives zeros
//     instead of the CPU's error (rois and batch indices stay on the device).

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/image/cuda/detection_impl.h"
#include "kernels/cuda/workspace.h"
#include "kernels/ops/generator/cuda/generate_impl.h"
#include "kernels/ops/image/det_view.h"
#include "kernels/internal.h"

namespace remex::kernels::cuda {
namespace {

class NonMaxSuppressionKernel final : public CudaKernel {
 public:
  NonMaxSuppressionKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> selected,
                           internal::NonMaxSuppressionOf(attrs(), internal::ToShapeArgs(in)));
    if (selected.empty()) return OkStatus();
    return Launch([&] {
      return LaunchWriteInt64s(static_cast<int64_t*>(out[0].data), selected.data(),
                               static_cast<int64_t>(selected.size()), stream());
    });
  }
};

class RoiAlignKernel final : public CudaKernel {
 public:
  RoiAlignKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip), since_(def.since_version) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::RoiAlignView v,
                           internal::RoiAlignViewOf(since_, attrs(), internal::ToShapeArgs(in)));
    return Launch([&] {
      return LaunchRoiAlign(v.g, static_cast<const float*>(in[0].data), v.batch,
                            static_cast<const float*>(in[1].data), static_cast<const int64_t*>(in[2].data),
                            v.num_rois, static_cast<float*>(out[0].data), stream());
    });
  }

 private:
  const int since_;
};

}  // namespace

Status AddDetectionCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (int since : {10, 11}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "NonMaxSuppression", since,
                                        MakeCudaKernel<NonMaxSuppressionKernel>(context)));
  }
  for (int since : {10, 16}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "RoiAlign", since, MakeCudaKernel<RoiAlignKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
