// CUDA kernels of NonMaxSuppression-10/11, RoiAlign-10/16 and MaxUnpool-9/11 (host
// side). Device code in det_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/detection.cc,
// kernels/unpool.cc): the same views (kernels/det_view.h) check the inputs.
//   - NonMaxSuppression: every input is in host memory (ShapeDep::kData: the output
//     count depends on the boxes and scores), so the selection runs on the host, as
//     on the CPU (internal::NonMaxSuppressionOf), and the int64 triples are written to
//     the device output as launch arguments (LaunchWriteInt64s, as Shape does).
//   - RoiAlign: float32; a thread per output element evaluating kernels/det_ops.h's
//     functions, as the CPU does: the same bits. A batch index out of range, or a roi
//     whose sampling grid is out of range, gives zeros instead of the CPU's error
//     (rois and batch indices stay on the device).
//   - MaxUnpool: float16, float32, float64; output_shape in host memory. The winning
//     (largest) position of each output element is found with atomicMax into a
//     scratch array, so repeated indices give the CPU's last write; an output_shape
//     that pads the unpooled tensor is handled up to rank 8. An index out of range is
//     skipped instead of failing.

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/det_impl.h"
#include "kernels/cuda/libraries_internal.h"
#include "kernels/cuda/misc_impl.h"
#include "kernels/det_view.h"
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

class MaxUnpoolKernel final : public CudaKernel {
 public:
  MaxUnpoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::MaxUnpoolView v,
                           internal::MaxUnpoolViewOf(attrs(), internal::ToShapeArgs(in)));
    UnpoolPadding padding;
    if (v.output != v.unpooled) {
      if (v.output.size() > static_cast<size_t>(kMaxUnpoolRank)) {
        return Unimplemented(op() +
                             " on cuda: an output_shape that pads the output is implemented up to rank " +
                             std::to_string(kMaxUnpoolRank) + ", got " + std::to_string(v.output.size()));
      }
      padding.rank = static_cast<int>(v.output.size());
      for (int d = 0; d < padding.rank; ++d) {
        padding.dims[d] = v.output[d];
        padding.unpooled[d] = v.unpooled[d];
      }
    }
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_ASSIGN_OR_RETURN(void* winner,
                           workspace.Allocate(static_cast<size_t>(v.unpooled_count) * sizeof(long long)));
    REMEX_RETURN_IF_ERROR(Launch([&] {
      return LaunchMaxUnpool(in[0].data, static_cast<const int64_t*>(in[1].data), v.x_count, v.unpooled_count,
                             padding, out[0].data, v.y_count, static_cast<int>(DTypeSize(in[0].dtype)),
                             static_cast<long long*>(winner), stream());
    }));
    return workspace.Release();
  }
};

}  // namespace

Status AddDetCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (int since : {10, 11}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "NonMaxSuppression", since,
                                        MakeCudaKernel<NonMaxSuppressionKernel>(context)));
  }
  for (int since : {10, 16}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "RoiAlign", since, MakeCudaKernel<RoiAlignKernel>(context)));
  }
  for (int since : {9, 11}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "MaxUnpool", since, MakeCudaKernel<MaxUnpoolKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
