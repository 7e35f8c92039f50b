// CUDA kernels of GatherND, ScatterND, NonZero, Unique and Compress (host side). Device
// code in index_impl.cu.
//
// Semantics are the CPU kernels' (kernels/ops/tensor/gather_nd.cc, nonzero.cc, unique.cc),
// which follow ONNX; views and attribute parsers are theirs (kernels/op_attrs.h):
//   - GatherND-11 (batch_dims) and ScatterND-11 (reduction none, add, mul): int64
//     indices on the device, at most kMaxNdIndex (8) per tuple; any dtype (add and mul:
//     every numeric dtype, accumulated in the CPU's order and type: the same bits).
//     ScatterND "none" writes its updates in parallel: among duplicate tuples (which
//     ONNX leaves undefined) any one wins, where the CPU keeps the last.
//   - NonZero-9: X in host memory (ShapeDep::kData); the coordinates are computed on
//     the host as the CPU kernel computes them and copied to the output.
//   - Unique-11: X in host memory (ShapeDep::kData); Y, indices, inverse_indices and
//     counts are computed on the host (kernels/ops/tensor/unique.cc) and copied to the outputs.
//   - Compress-9 and Compress-11: input on the device, condition in host memory
//     (ShapeDep::kData); the kept positions go to device scratch, then one gather.
// Differences from the CPU kernels: an index of GatherND or ScatterND out of range is
// not read back to the host, so it does not fail: GatherND writes zeros for its slice
// and ScatterND skips its update (the CPU kernels return INVALID_ARGUMENT "... out of
// range ..."). NonZero's and Compress's host inputs are checked exactly as on the CPU.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/tensor/cuda/index_impl.h"
#include "kernels/cuda/workspace.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

using internal::GatherNdView;

int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

// The kernels of this group return early when every output is empty.
class IndexKernel : public CudaKernel {
 public:
  IndexKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  // The element size of a dtype moved as raw bits (1, 2, 4 or 8 bytes).
  StatusOr<int> ElemSize(DType dtype) const {
    const size_t size = DTypeSize(dtype);
    if (size == 1 || size == 2 || size == 4 || size == 8) return static_cast<int>(size);
    return Unsupported(dtype, "elements of 1, 2, 4 or 8 bytes are");
  }
  // Copies `bytes` of host memory to device memory `dst` on stream(). `src` is pageable
  // (a std::vector): cudaMemcpyAsync returns once it has been staged, so the caller may
  // release it as soon as this returns.
  Status Upload(void* dst, const void* src, size_t bytes) const {
    if (bytes == 0) return OkStatus();
    REMEX_RETURN_IF_ERROR(UseDevice());
    return CudaCheck(op(), "cudaMemcpyAsync",
                     cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
  }
};

// ---------------------------------------------------------------------------
// GatherND and ScatterND: data, indices (and updates), all on the device.

StatusOr<NdPlan> MakeNdPlan(std::string_view op, const GatherNdView& v) {
  if (v.k > kMaxNdIndex) {
    return Unimplemented(std::string(op) + " on cuda: index tuples of " + std::to_string(v.k) +
                         " values, at most " + std::to_string(kMaxNdIndex) + " are implemented");
  }
  NdPlan plan;
  plan.k = v.k;
  for (int t = 0; t < v.k; ++t) {
    plan.extents[t] = v.extents[t];
    plan.strides[t] = v.strides[t];
  }
  plan.tuples = v.tuples;
  plan.slice = v.slice;
  plan.batch_stride = v.batch_stride;
  return plan;
}

class GatherNdKernel final : public IndexKernel {
 public:
  using IndexKernel::IndexKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(in[0].dtype));
    StatusOr<int64_t> batch_dims = attrs().Int("batch_dims", 0);
    if (!batch_dims.ok()) return internal::OpError(op(), batch_dims.status().message());
    const std::vector<ShapeFnArg> args = internal::ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(GatherNdView v, internal::GatherNdViewOf(op(), *batch_dims, args[0], args[1]));
    REMEX_ASSIGN_OR_RETURN(NdPlan plan, MakeNdPlan(op(), v));
    return Launch([&] {
      return LaunchGatherNd(es, in[0].data, static_cast<const int64_t*>(in[1].data), out[0].data,
                            Count(out[0].shape), plan, stream());
    });
  }
};

// Calls f(T{}) for the element type of ScatterND's add and mul that is `dtype`'s
// (VisitDType): the numeric dtypes.
template <typename F>
auto VisitScatterNdReduceType(DType dtype, F&& f) {
  return VisitDType<Half, float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                    uint64_t>(dtype, std::forward<F>(f));
}

class ScatterNdKernel final : public IndexKernel {
 public:
  // The reduction is parsed again per call, with the data's dtype.
  static StatusOr<std::unique_ptr<ScatterNdKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                           CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(internal::ScatterNdReductionOf(attrs, DType::kUndefined).status());
    return std::make_unique<ScatterNdKernel>(def, attrs, context);
  }
  using IndexKernel::IndexKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(in[0].dtype));
    const std::vector<ShapeFnArg> args = internal::ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(GatherNdView v, internal::GatherNdViewOf(op(), 0, args[0], args[1]));
    REMEX_ASSIGN_OR_RETURN(ScatterReduction reduction, internal::ScatterNdReductionOf(attrs(), in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(NdPlan plan, MakeNdPlan(op(), v));
    if (reduction != ScatterReduction::kNone &&
        !VisitScatterNdReduceType(in[0].dtype, [](auto) { return true; })) {
      return Unsupported(in[0].dtype, "add and mul take the numeric dtypes");
    }
    REMEX_RETURN_IF_ERROR(UseDevice());
    if (out[0].data != in[0].data) {
      const size_t bytes = static_cast<size_t>(Count(in[0].shape)) * static_cast<size_t>(es);
      REMEX_RETURN_IF_ERROR(
          CudaCheck(op(), "cudaMemcpyAsync",
                    cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream())));
    }
    if (v.tuples * v.slice == 0) return OkStatus();
    const int64_t* indices = static_cast<const int64_t*>(in[1].data);
    if (reduction == ScatterReduction::kNone) {
      return CudaCheck(op(), "kernel launch",
                       LaunchScatterNd(es, indices, in[2].data, out[0].data, v.tuples, plan, stream()));
    }
    const bool add = reduction == ScatterReduction::kAdd;
    return CudaCheck(op(), "kernel launch", *VisitScatterNdReduceType(in[0].dtype, [&](auto tag) {
                       using T = decltype(tag);
                       return LaunchScatterNdReduce<T>(add, indices, static_cast<const T*>(in[2].data),
                                                       static_cast<T*>(out[0].data), v.tuples, plan,
                                                       stream());
                     }));
  }
};

// ---------------------------------------------------------------------------
// NonZero: X in host memory.

class NonZeroKernel final : public IndexKernel {
 public:
  using IndexKernel::IndexKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> coords,
                           internal::NonZeroCoordinates(internal::ToShapeArgs(in)[0]));
    return Upload(out[0].data, coords.data(), coords.size() * sizeof(int64_t));
  }
};

// ---------------------------------------------------------------------------
// Unique: X in host memory; every output computed on the host as the CPU kernel does
// and copied up.

class UniqueKernel final : public IndexKernel {
 public:
  using IndexKernel::IndexKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::UniqueResult r, internal::UniqueOf(attrs(), internal::ToShapeArgs(in)[0]));
    REMEX_RETURN_IF_ERROR(Upload(out[0].data, r.y.data(), r.y.size()));
    const std::vector<int64_t>* ints[] = {&r.indices, &r.inverse, &r.counts};
    for (size_t i = 1; i < out.size() && i < 4; ++i) {
      REMEX_RETURN_IF_ERROR(Upload(out[i].data, ints[i - 1]->data(), ints[i - 1]->size() * sizeof(int64_t)));
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Compress: input (device), condition (host).

template <bool kNegativeAxis>
class CompressKernel final : public IndexKernel {
 public:
  using IndexKernel::IndexKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(internal::CompressView v,
                           internal::CompressViewOf(kNegativeAxis, attrs(), internal::ToShapeArgs(in)));
    const int64_t count = static_cast<int64_t>(v.kept.size());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    REMEX_RETURN_IF_ERROR(UseDevice());
    REMEX_ASSIGN_OR_RETURN(void* kept, workspace.Allocate(v.kept.size() * sizeof(int64_t)));
    REMEX_RETURN_IF_ERROR(Upload(kept, v.kept.data(), v.kept.size() * sizeof(int64_t)));
    REMEX_RETURN_IF_ERROR(Launch([&] {
      return LaunchCompress(es, in[0].data, static_cast<const int64_t*>(kept), out[0].data,
                            Count(out[0].shape), v.extent, count, v.inner, stream());
    }));
    return workspace.Release();
  }
};

}  // namespace

Status AddIndexCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "GatherND", MakeCudaKernel<GatherNdKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "ScatterND", MakeCudaKernel<ScatterNdKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "NonZero", MakeCudaKernel<NonZeroKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Unique", MakeCudaKernel<UniqueKernel>(context)));
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "Compress", 9, MakeCudaKernel<CompressKernel<false>>(context)));
  return AddCudaKernel(registry, "Compress", 11, MakeCudaKernel<CompressKernel<true>>(context));
}

}  // namespace remex::kernels::cuda
