// CUDA kernels of the data-movement ops (host side): checks against the op's shape
// function, the index plans and the launches (transform_impl.cu). Semantics are those
// of the CPU kernels in kernels/ops/tensor/transform.cc, transpose.cc, pad.cc, depth_space.cc,
// tensor.cc and elementwise.cc (Where), which follow the ONNX operators of opsets 7-17.
// Gather, GatherElements, Trilu, EyeLike, Pad, Where and Cast are in transform_values.cc:
//
//   Identity-16, Reshape-14, Flatten-13 (negative axis from 11), Squeeze-13 and
//     Unsqueeze-13 (axes as attribute or input): one device-to-device copy.
//   Transpose-13 (perm, default reversed), Slice-13 (starts/ends/axes/steps inputs,
//     negative steps), Concat-13 (negative axis), Split-13 (split attribute or input,
//     or num_outputs), Expand-13, Tile-13, DepthToSpace-13 (DCR, CRD) and
//     SpaceToDepth-13, both with Remex's `layout` attribute NCHW or NHWC: one strided
//     copy each (per input for Concat, per output for Split).
//   Gather-13 (axis, int32 / int64 indices, negative indices), GatherElements-13
//     (likewise, indices of data's rank; at most kMaxCopyRank dims).
//   ScatterElements-11/13/16 and Scatter-9 (reduction none, add, mul; an index out of
//     range is skipped; "add"/"mul" run the updates in order in one thread, float16,
//     float32, float64, int32, int64).
//   Trilu-14 (upper, k on the host), EyeLike-9 (dtype, k): kernels/ops/tensor/diagonal_ops.h's rules.
//   Pad-13 (constant, reflect, edge; pads and constant_value as attributes before 11,
//     as inputs from 11).
//   Where-16 (bool condition, multidirectional broadcasting).
//   Cast-13 between float16/32/64, int8-64, uint8-64 and bool, with the CPU kernel's
//     rounding: float16 results rounded to nearest even, float to integer truncated
//     toward zero and saturated with NaN -> 0, integer narrowing wrapping.
//
// Every op but Cast moves raw elements, so it handles every dtype (element sizes 1, 2,
// 4 and 8 bytes). Index plans hold at most kMaxCopyRank (8) dims after dropping
// extent-1 dims and merging dims walked contiguously; more is UNIMPLEMENTED.
//
// Differences from the CPU kernels: a Gather or GatherElements index out of range
// writes zeros instead of failing (the indices live on the GPU and are not read back).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops/tensor/cuda/transform_common.h"

namespace remex::kernels::cuda {

StatusOr<CopyPlan> MakeCopyPlan(std::string_view op, std::span<const int64_t> dims, std::vector<int64_t> src_strides,
                                std::vector<int64_t> dst_strides, int64_t src_base, int64_t dst_base) {
  const Walk<2> w = Coalesce<2>(dims, {std::move(src_strides), std::move(dst_strides)});
  if (w.dims.size() > static_cast<size_t>(kMaxCopyRank)) return TooManyDims(op, w.dims.size());
  CopyPlan plan;
  plan.rank = static_cast<int>(w.dims.size());
  for (int d = 0; d < plan.rank; ++d) {
    plan.dims[d] = w.dims[d];
    plan.src_strides[d] = w.strides[0][d];
    plan.dst_strides[d] = w.strides[1][d];
  }
  plan.src_base = src_base;
  plan.dst_base = dst_base;
  return plan;
}

namespace {

// Views the copy in the widest unit (up to 16 bytes) that divides its contiguous
// innermost run, every stride and base, and the pointers' alignment.
void Widen(CopyPlan& plan, int& elem_size, const void* src, const void* dst) {
  const int last = plan.rank - 1;
  if (plan.src_strides[last] != 1 || plan.dst_strides[last] != 1) return;
  for (int unit = 16; unit > elem_size; unit /= 2) {
    const int64_t f = unit / elem_size;
    bool ok = plan.dims[last] % f == 0 && plan.src_base % f == 0 && plan.dst_base % f == 0 &&
              reinterpret_cast<uintptr_t>(src) % unit == 0 && reinterpret_cast<uintptr_t>(dst) % unit == 0;
    for (int d = 0; d < last && ok; ++d) ok = plan.src_strides[d] % f == 0 && plan.dst_strides[d] % f == 0;
    if (!ok) continue;
    plan.dims[last] /= f;
    for (int d = 0; d < last; ++d) {
      plan.src_strides[d] /= f;
      plan.dst_strides[d] /= f;
    }
    plan.src_base /= f;
    plan.dst_base /= f;
    elem_size = unit;
    return;
  }
}

int64_t PlanSize(const CopyPlan& plan) {
  int64_t n = 1;
  for (int d = 0; d < plan.rank; ++d) n *= plan.dims[d];
  return n;
}

}  // namespace

// Runs `plan` from src to dst: one cudaMemcpyAsync when both sides are contiguous,
// the strided-copy kernel otherwise.
Status RunCopy(std::string_view op, int elem_size, const void* src, void* dst, CopyPlan plan, cudaStream_t stream) {
  const int64_t n = PlanSize(plan);
  if (n == 0) return OkStatus();
  if (plan.rank == 1 && plan.src_strides[0] == 1 && plan.dst_strides[0] == 1) {
    const char* s = static_cast<const char*>(src) + plan.src_base * elem_size;
    char* d = static_cast<char*>(dst) + plan.dst_base * elem_size;
    return CudaCheck(op, "cudaMemcpyAsync",
                     cudaMemcpyAsync(d, s, static_cast<size_t>(n) * elem_size, cudaMemcpyDeviceToDevice, stream));
  }
  Widen(plan, elem_size, src, dst);
  return CudaCheck(op, "kernel launch", LaunchStridedCopy(elem_size, src, dst, PlanSize(plan), plan, stream));
}

namespace {

// Writes the contiguous output dst = view permuted by `perm` (dst dim i is view dim
// perm[i]), for a contiguous input seen as `view`.
Status RunPermuted(std::string_view op, int elem_size, const void* src, void* dst, std::span<const int64_t> view,
                   std::span<const int64_t> perm, cudaStream_t stream) {
  const std::vector<int64_t> view_strides = internal::RowMajorStrides(view);
  std::vector<int64_t> dims(perm.size());
  std::vector<int64_t> src_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    dims[i] = view[perm[i]];
    src_strides[i] = view_strides[perm[i]];
  }
  std::vector<int64_t> dst_strides = internal::RowMajorStrides(dims);
  REMEX_ASSIGN_OR_RETURN(CopyPlan plan, MakeCopyPlan(op, dims, std::move(src_strides), std::move(dst_strides), 0, 0));
  return RunCopy(op, elem_size, src, dst, plan, stream);
}

// ---------------------------------------------------------------------------
// Identity, Reshape, Flatten, Squeeze, Unsqueeze: the same bytes under a new shape.

class CopyKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const size_t bytes = static_cast<size_t>(*NumElements(in[0].shape)) * DTypeSize(in[0].dtype);
    if (in[0].data == out[0].data) return OkStatus();
    return Check("cudaMemcpyAsync",
                 cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
};

// ---------------------------------------------------------------------------
// Transpose.

class TransposeKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    std::vector<int64_t> perm;
    if (attrs().Has("perm")) {
      REMEX_ASSIGN_OR_RETURN(perm, attrs().Ints("perm"));  // Checked by the shape function.
    } else {
      for (size_t i = s.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    return RunPermuted(op(), es, in[0].data, out[0].data, s, perm, stream());
  }
};

// ---------------------------------------------------------------------------
// Slice: data, starts, ends, [axes], [steps] (host inputs); as ComputeSlice in
// kernels/ops/tensor/tensor.cc, whose checks the shape function has already applied.

struct SliceDim {
  int64_t start = 0;
  int64_t step = 1;
};

StatusOr<std::vector<SliceDim>> SliceDims(std::span<const TensorRef> in) {
  constexpr std::string_view op = "Slice";
  const Shape& shape = in[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto read = [&](size_t i, std::string_view what) {
    return internal::ReadIndexTensor(op, what, in[i].dtype, in[i].shape, in[i].data);
  };
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> starts, read(1, "starts"));
  REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> ends, read(2, "ends"));
  std::vector<int64_t> axes;
  std::vector<int64_t> steps(starts.size(), 1);
  if (in.size() > 3 && in[3].present()) {
    REMEX_ASSIGN_OR_RETURN(axes, read(3, "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (in.size() > 4 && in[4].present()) {
    REMEX_ASSIGN_OR_RETURN(steps, read(4, "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return internal::OpError(op, "starts, ends, axes and steps have different lengths");
  }
  std::vector<SliceDim> dims(static_cast<size_t>(rank));
  for (size_t i = 0; i < starts.size(); ++i) {
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op, axes[i], rank, "axes value"));
    const int64_t dim = shape[axis];
    const int64_t step = steps[i];
    if (step == 0) return internal::OpError(op, "steps must be non-zero");
    int64_t start = starts[i];
    if (start < 0) start += dim;
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    dims[axis] = {start, step};
  }
  return dims;
}

class SliceKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    REMEX_ASSIGN_OR_RETURN(std::vector<SliceDim> dims, SliceDims(in));
    // The output extents come from the shape function; an axis with a non-empty
    // output has a valid start. An axis that keeps at most one element walks with
    // step 1 (as kernels/ops/tensor/tensor.cc does): its step is never taken and may be huge.
    const Shape& o = out[0].shape;
    const std::vector<int64_t> in_strides = internal::RowMajorStrides(in[0].shape);
    std::vector<int64_t> src_strides(o.size());
    int64_t base = 0;
    for (size_t d = 0; d < o.size(); ++d) {
      const int64_t step = o[d] > 1 ? dims[d].step : 1;
      src_strides[d] = step * in_strides[d];
      base += dims[d].start * in_strides[d];
    }
    return StridedCopy(es, in[0].data, out[0].data, o, std::move(src_strides), internal::RowMajorStrides(o), base, 0);
  }
};

// ---------------------------------------------------------------------------
// Concat and Split: per input (output), a [outer, rows] block of the output (input).

class ConcatKernel final : public TransformKernel {
 public:
  // INVALID_ARGUMENT "Concat: ..." without an int `axis`.
  static StatusOr<std::unique_ptr<ConcatKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                        CudaKernelContext context) {
    StatusOr<int64_t> axis = attrs.Int("axis");
    if (!axis.ok()) return internal::OpError("Concat", "attribute 'axis' is required and must be an int");
    return std::make_unique<ConcatKernel>(def, attrs, context, *axis);
  }
  ConcatKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, int64_t axis)
      : TransformKernel(def, std::move(attrs), context), axis_(axis) {}

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), out[0].dtype));
    const Shape& shape = out[0].shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), axis_, rank));
    const auto [outer, inner] = OuterInner(shape, axis);
    const int64_t out_row = shape[axis] * inner;
    int64_t col = 0;
    for (const TensorRef& t : in) {
      const int64_t row = t.shape[axis] * inner;
      REMEX_RETURN_IF_ERROR(CopyRows(es, t.data, row, 0, out[0].data, out_row, col, outer, row));
      col += row;
    }
    return OkStatus();
  }

 private:
  const int64_t axis_;
};

class SplitKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(int64_t a, IntAttr(op(), attrs(), "axis", 0));
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), a, static_cast<int64_t>(s.size())));
    const auto [outer, inner] = OuterInner(s, axis);
    const int64_t in_row = s[axis] * inner;
    int64_t col = 0;
    for (const TensorRef& t : out) {  // Each output's extent along axis is its part.
      const int64_t row = t.shape[axis] * inner;
      REMEX_RETURN_IF_ERROR(CopyRows(es, in[0].data, in_row, col, t.data, row, 0, outer, row));
      col += row;
    }
    return OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Expand and Tile: broadcast copies (stride 0 along the repeated dims).

class ExpandKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    const Shape& o = out[0].shape;
    const size_t lead = o.size() - s.size();
    const std::vector<int64_t> in_strides = internal::RowMajorStrides(s);
    std::vector<int64_t> src_strides(o.size(), 0);
    for (size_t i = lead; i < o.size(); ++i) src_strides[i] = s[i - lead] == 1 ? 0 : in_strides[i - lead];
    return StridedCopy(es, in[0].data, out[0].data, o, std::move(src_strides), internal::RowMajorStrides(o), 0, 0);
  }
};

class TileKernel final : public TransformKernel {
 public:
  using TransformKernel::TransformKernel;

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const Shape& s = in[0].shape;
    // The output seen as [r0, s0, r1, s1, ...] with r_d = out_d / s_d (s_d > 0 here:
    // the output is not empty).
    const std::vector<int64_t> in_strides = internal::RowMajorStrides(s);
    std::vector<int64_t> dims;
    std::vector<int64_t> src_strides;
    for (size_t d = 0; d < s.size(); ++d) {
      dims.insert(dims.end(), {out[0].shape[d] / s[d], s[d]});
      src_strides.insert(src_strides.end(), {0, in_strides[d]});
    }
    std::vector<int64_t> dst_strides = internal::RowMajorStrides(dims);
    REMEX_ASSIGN_OR_RETURN(CopyPlan plan,
                           MakeCopyPlan(op(), dims, std::move(src_strides), std::move(dst_strides), 0, 0));
    return RunCopy(op(), es, in[0].data, out[0].data, plan, stream());
  }
};

// ---------------------------------------------------------------------------
// DepthToSpace and SpaceToDepth: a 6-D transpose of the input.

template <bool kDepthToSpace>
class BlockKernel final : public TransformKernel {
 public:
  static StatusOr<std::unique_ptr<BlockKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                       CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(internal::BlockAttrs b, internal::BlockAttrsOf(def.name, attrs));
    return std::make_unique<BlockKernel>(def, attrs, context, b);
  }
  BlockKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::BlockAttrs b)
      : TransformKernel(def, std::move(attrs), context), b_(b) {}

 protected:
  Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int es, ElemSize(op(), in[0].dtype));
    const internal::BlockAttrs& b = b_;
    const int64_t bs = b.blocksize;
    const Shape& x = in[0].shape;
    std::array<int64_t, 6> view;
    std::array<int64_t, 6> perm;
    if (kDepthToSpace) {
      // Output [N, c, H, b1, W, b2] (NCHW) or [N, H, b1, W, b2, c] (NHWC).
      if (!b.channels_last) {
        const int64_t n = x[0], c = x[1] / (bs * bs), h = x[2], w = x[3];
        if (b.crd) {
          view = {n, c, bs, bs, h, w};  // Channel c * b^2 + i * b + j.
          perm = {0, 1, 4, 2, 5, 3};
        } else {
          view = {n, bs, bs, c, h, w};  // Channel (i * b + j) * c' + c.
          perm = {0, 3, 4, 1, 5, 2};
        }
      } else {
        const int64_t n = x[0], h = x[1], w = x[2], c = x[3] / (bs * bs);
        if (b.crd) {
          view = {n, h, w, c, bs, bs};
          perm = {0, 1, 4, 2, 5, 3};
        } else {
          view = {n, h, w, bs, bs, c};
          perm = {0, 1, 3, 2, 4, 5};
        }
      }
    } else if (!b.channels_last) {
      // [N, C, H, b1, W, b2] -> [N, b1, b2, C, H, W].
      view = {x[0], x[1], x[2] / bs, bs, x[3] / bs, bs};
      perm = {0, 3, 5, 1, 2, 4};
    } else {
      // [N, H, b1, W, b2, C] -> [N, H, W, b1, b2, C].
      view = {x[0], x[1] / bs, bs, x[2] / bs, bs, x[3]};
      perm = {0, 1, 3, 2, 4, 5};
    }
    return RunPermuted(op(), es, in[0].data, out[0].data, view, perm, stream());
  }

 private:
  const internal::BlockAttrs b_;
};

}  // namespace

Status AddTransformCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (std::string_view name : {"Identity", "Reshape", "Squeeze", "Unsqueeze"}) {
    REMEX_RETURN_IF_ERROR(AddKernel<CopyKernel>(registry, name, context));
  }
  // Flatten-1 and Flatten-11 differ in the axes their shape functions accept only.
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Flatten", 1, MakeCudaKernel<CopyKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Flatten", 11, MakeCudaKernel<CopyKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddKernel<TransposeKernel>(registry, "Transpose", context));
  REMEX_RETURN_IF_ERROR(AddKernel<SliceKernel>(registry, "Slice", context));
  REMEX_RETURN_IF_ERROR(AddKernel<ConcatKernel>(registry, "Concat", context));
  REMEX_RETURN_IF_ERROR(AddKernel<SplitKernel>(registry, "Split", context));
  REMEX_RETURN_IF_ERROR(AddKernel<ExpandKernel>(registry, "Expand", context));
  REMEX_RETURN_IF_ERROR(AddKernel<TileKernel>(registry, "Tile", context));
  REMEX_RETURN_IF_ERROR(AddKernel<BlockKernel<true>>(registry, "DepthToSpace", context));
  return AddKernel<BlockKernel<false>>(registry, "SpaceToDepth", context);
}

}  // namespace remex::kernels::cuda
