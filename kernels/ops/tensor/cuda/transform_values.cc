// CUDA kernels of the data-movement ops that read or convert values (host side):
// Gather, GatherElements, ScatterElements and Scatter (indices on the device), Trilu,
// EyeLike, Pad, Where, Cast and CastLike. Semantics, dtypes and the
// differences from the CPU kernels: the comment at the top of transform.cc.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/tensor/cuda/transform_common.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// Gather: data, indices (both on the device).

class GatherKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op(), attrs(), "axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), a, rank));
    GatherPlan plan;
    plan.outer = 1;
    plan.inner = 1;
    for (int64_t d = 0; d < axis; ++d) plan.outer *= s[d];
    for (int64_t d = axis + 1; d < rank; ++d) plan.inner *= s[d];
    plan.axis_extent = s[axis];
    plan.num_indices = *NumElements(in[1].shape);
    // Non-empty output: every extent is positive, except an empty axis, whose every
    // index is out of range.
    if (plan.axis_extent == 0) {
      return internal::OpError(op(), "indices into axis " + Str(axis) + " of extent 0 are out of range");
    }
    // Rows of whole elements: move them in the widest unit that divides them.
    for (int unit = 16; unit > es; unit /= 2) {
      const int64_t f = unit / es;
      if (plan.inner % f == 0 && reinterpret_cast<uintptr_t>(in[0].data) % unit == 0 &&
          reinterpret_cast<uintptr_t>(out[0].data) % unit == 0) {
        plan.inner /= f;
        es = unit;
        break;
      }
    }
    return Check("kernel launch", LaunchGather(es, in[0].data, in[1].data, in[1].dtype == DType::kInt64,
                                               out[0].data, plan, stream()));
  }
};

// ---------------------------------------------------------------------------
// GatherElements: data, indices (both on the device).

class GatherElementsKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    if (rank > kMaxCopyRank) return TooManyDims(op(), static_cast<size_t>(rank));
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op(), attrs(), "axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), a, rank));
    if (s[axis] == 0) {
      return internal::OpError(op(), "indices into axis " + Str(axis) + " of extent 0 are out of range");
    }
    GatherElementsPlan plan;
    plan.rank = static_cast<int>(rank);
    plan.axis = static_cast<int>(axis);
    plan.axis_extent = s[axis];
    const std::vector<int64_t> strides = internal::RowMajorStrides(s);
    for (int64_t d = 0; d < rank; ++d) {
      plan.dims[d] = in[1].shape[d];
      plan.data_strides[d] = strides[d];
    }
    return Check("kernel launch", LaunchGatherElements(es, in[0].data, in[1].data, in[1].dtype == DType::kInt64,
                                                       out[0].data, *NumElements(in[1].shape), plan, stream()));
  }
};

// ---------------------------------------------------------------------------
// Trilu: input (device), [k] (host); EyeLike: input's shape only.

class TriluKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(internal::TriluView v, internal::TriluViewOf(attrs(), internal::ToShapeArgs(in)));
    return Check("kernel launch",
                 LaunchTrilu(es, in[0].data, out[0].data, v.batch, v.rows, v.cols, v.k, v.upper, stream()));
  }
};

class EyeLikeKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::EyeLikeAttrs a, internal::EyeLikeAttrsOf(attrs(), in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), a.dtype));
    uint64_t one = 0;  // The dtype's 1, as the CPU kernel stores it.
    REMEX_RETURN_IF_ERROR(internal::DispatchAllTypes(op(), a.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T v = internal::Store<T>(internal::ComputeType<T>(1));
      std::memcpy(&one, &v, sizeof(T));
      return OkStatus();
    }));
    return Check("kernel launch",
                 LaunchEyeLike(es, out[0].data, out[0].shape[0], out[0].shape[1], a.k, one, stream()));
  }
};

// ---------------------------------------------------------------------------
// Pad: data, pads (host), [constant_value (device)]; attributes pads and value before
// opset 11.

class PadKernel final : public TransformKernel {
 public:
  static StatusOr<std::unique_ptr<PadKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                     CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(PadMode mode, internal::PadModeOf(attrs));
    return std::make_unique<PadKernel>(def, attrs, context, mode);
  }
  PadKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, PadMode mode)
      : TransformKernel(def, std::move(attrs), context), mode_(mode) {}

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    const Shape& o = out[0].shape;
    const size_t rank = s.size();
    if (rank == 0) {
      return Check("cudaMemcpyAsync",
                   cudaMemcpyAsync(out[0].data, in[0].data, es, cudaMemcpyDeviceToDevice, stream()));
    }
    if (rank > static_cast<size_t>(kMaxCopyRank)) return TooManyDims(op(), rank);
    const PadMode mode = mode_;
    std::vector<int64_t> pads;
    if (attrs().Has("pads")) {
      REMEX_ASSIGN_OR_RETURN(pads, attrs().Ints("pads"));
    } else {
      REMEX_ASSIGN_OR_RETURN(pads, internal::ReadIndexTensor(op(), "pads", in[1].dtype, in[1].shape, in[1].data));
    }
    StatusOr<float> value = attrs().Float("value", 0.f);
    if (!value.ok()) return internal::OpError(op(), value.status().message());
    PadPlan plan;
    plan.rank = static_cast<int>(rank);
    plan.mode = mode;
    const std::vector<int64_t> in_strides = internal::RowMajorStrides(s);
    for (size_t d = 0; d < rank; ++d) {
      plan.out_dims[d] = o[d];
      plan.in_dims[d] = s[d];
      plan.in_strides[d] = in_strides[d];
      plan.pads_begin[d] = pads[d];
    }
    REMEX_ASSIGN_OR_RETURN(plan.constant_bits, internal::PadValueBits(in[0].dtype, *value));
    const void* constant = in.size() > 2 && in[2].present() ? in[2].data : nullptr;
    return Check("kernel launch",
                 LaunchPad(es, in[0].data, constant, out[0].data, *NumElements(o), plan, stream()));
  }

 private:
  const PadMode mode_;
};

// ---------------------------------------------------------------------------
// Where: condition, X, Y broadcast to the output.

class WhereKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[1].dtype));
    const Shape& o = out[0].shape;
    // Per input, its element strides along the output dims (0 where it broadcasts).
    std::array<std::vector<int64_t>, 3> strides;
    for (size_t k = 0; k < 3; ++k) {
      const Shape& s = in[k].shape;
      const size_t lead = o.size() - s.size();
      const std::vector<int64_t> own = internal::RowMajorStrides(s);
      strides[k].assign(o.size(), 0);
      for (size_t i = lead; i < o.size(); ++i) strides[k][i] = s[i - lead] == 1 ? 0 : own[i - lead];
    }
    const Walk<3> w = Coalesce<3>(o, strides);
    if (w.dims.size() > static_cast<size_t>(kMaxCopyRank)) return TooManyDims(op(), w.dims.size());
    WherePlan plan;
    plan.rank = static_cast<int>(w.dims.size());
    for (int d = 0; d < plan.rank; ++d) {
      plan.dims[d] = w.dims[d];
      plan.cond_strides[d] = w.strides[0][d];
      plan.x_strides[d] = w.strides[1][d];
      plan.y_strides[d] = w.strides[2][d];
    }
    return Check("kernel launch", LaunchWhere(es, in[0].data, in[1].data, in[2].data, out[0].data,
                                              *NumElements(o), plan, stream()));
  }
};

// ---------------------------------------------------------------------------
// Cast.

// Calls f(T{}) for the Cast element type that is `dtype`'s (VisitDType): the 13 dtypes
// the CPU casts.
template <typename F>
auto VisitCastElement(DType dtype, F&& f) {
  return VisitDType<Half, float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                    uint64_t, bool, BFloat16>(dtype, std::forward<F>(f));
}

class CastKernel final : public TransformKernel {
 public:
  // Cast's target type `to` is checked by the shape function on a scalar float32 input
  // (CastLike has none: its second input brings it).
  static StatusOr<std::unique_ptr<CastKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                      CudaKernelContext context) {
    if (def.name == "Cast") {
      ShapeFnArg arg;
      arg.present = true;
      arg.dtype = DType::kFloat32;
      REMEX_RETURN_IF_ERROR(InferShapes(def, attrs, std::span<const ShapeFnArg>(&arg, 1)).status());
    }
    return std::make_unique<CastKernel>(def, attrs, context);
  }
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = *NumElements(in[0].shape);
    if (in[0].dtype == out[0].dtype) {
      return Check("cudaMemcpyAsync", cudaMemcpyAsync(out[0].data, in[0].data, n * DTypeSize(in[0].dtype),
                                                      cudaMemcpyDeviceToDevice, stream()));
    }
    std::optional<std::optional<cudaError_t>> error = VisitCastElement(in[0].dtype, [&](auto from_tag) {
      using From = decltype(from_tag);
      return VisitCastElement(out[0].dtype, [&](auto to_tag) {
        using To = decltype(to_tag);
        return LaunchCast(static_cast<const From*>(in[0].data), static_cast<To*>(out[0].data), n, stream());
      });
    });
    if (!error || !*error) {
      const DType dtype = error ? out[0].dtype : in[0].dtype;
      return Unimplemented("Cast on cuda: dtype " + std::string(DTypeName(dtype)) + " is not implemented");
    }
    return Check("kernel launch", **error);
  }
};

// ---------------------------------------------------------------------------
// ScatterElements and Scatter: data, indices, updates (all on the device).

class ScatterKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(internal::ScatterView v, internal::ScatterViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    const Shape& s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    if (rank > kMaxCopyRank) return TooManyDims(op(), static_cast<size_t>(rank));
    if (v.reduction != ScatterReduction::kNone &&
        !VisitDType<Half, float, double, int32_t, int64_t>(in[0].dtype, [](auto) { return true; })) {
      return Unimplemented(
          op() + " on cuda: dtype " + std::string(DTypeName(in[0].dtype)) +
          " is not implemented for reduction add and mul (float16, float32, float64, int32 and "
          "int64 are)");
    }
    if (out[0].data != in[0].data) {
      REMEX_RETURN_IF_ERROR(Check("cudaMemcpyAsync", cudaMemcpyAsync(out[0].data, in[0].data, *NumElements(s) * es,
                                                                     cudaMemcpyDeviceToDevice, stream())));
    }
    const int64_t n = *NumElements(in[1].shape);
    if (n == 0) return OkStatus();
    GatherElementsPlan plan;
    plan.rank = static_cast<int>(rank);
    plan.axis = static_cast<int>(v.axis);
    plan.axis_extent = s[v.axis];
    const std::vector<int64_t> strides = internal::RowMajorStrides(s);
    for (int64_t d = 0; d < rank; ++d) {
      plan.dims[d] = in[1].shape[d];
      plan.data_strides[d] = strides[d];
    }
    const bool indices_int64 = in[1].dtype == DType::kInt64;
    if (v.reduction == ScatterReduction::kNone) {
      return Check("kernel launch", LaunchScatterElements(es, in[1].data, indices_int64, in[2].data,
                                                          out[0].data, n, plan, stream()));
    }
    const bool add = v.reduction == ScatterReduction::kAdd;
    return Check("kernel launch",
                 *VisitDType<Half, float, double, int32_t, int64_t>(in[0].dtype, [&](auto tag) {
                   using T = decltype(tag);
                   return LaunchScatterElementsReduce(add, in[1].data, indices_int64,
                                                      static_cast<const T*>(in[2].data),
                                                      static_cast<T*>(out[0].data), n, plan, stream());
                 }));
  }
};

}  // namespace

Status AddTransformValueCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddKernel<GatherKernel>(registry, "Gather", context));
  REMEX_RETURN_IF_ERROR(AddKernel<GatherElementsKernel>(registry, "GatherElements", context));
  REMEX_RETURN_IF_ERROR(AddKernel<TriluKernel>(registry, "Trilu", context));
  REMEX_RETURN_IF_ERROR(AddKernel<ScatterKernel>(registry, "ScatterElements", context));
  REMEX_RETURN_IF_ERROR(AddKernel<ScatterKernel>(registry, "Scatter", context));
  REMEX_RETURN_IF_ERROR(AddKernel<EyeLikeKernel>(registry, "EyeLike", context));
  REMEX_RETURN_IF_ERROR(AddKernel<PadKernel>(registry, "Pad", context));
  REMEX_RETURN_IF_ERROR(AddKernel<WhereKernel>(registry, "Where", context));
  REMEX_RETURN_IF_ERROR(AddKernel<CastKernel>(registry, "CastLike", context));
  return AddKernel<CastKernel>(registry, "Cast", context);
}

}  // namespace remex::kernels::cuda
