// Host-side helpers of the data-movement CUDA kernels (transform.cc,
// transform_values.cc): attribute reads, the strided-copy index plans, the kernel base
// class and registration. Semantics and limits: the comment at the top of transform.cc.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ops/tensor/cuda/transform_impl.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {

inline std::string Str(int64_t v) { return std::to_string(v); }

// attrs.Int with errors naming the op.
inline StatusOr<int64_t> IntAttr(std::string_view op, const Attributes& attrs, std::string_view name,
                          int64_t default_value) {
  StatusOr<int64_t> v = attrs.Int(name, default_value);
  if (!v.ok()) return internal::OpError(op, v.status().message());
  return *v;
}

// The element size of a dtype the kernels move as raw bits.
inline StatusOr<int> ElemSize(std::string_view op, DType dtype) {
  const size_t size = DTypeSize(dtype);
  if (size == 1 || size == 2 || size == 4 || size == 8) return static_cast<int>(size);
  return Unimplemented(std::string(op) + " on cuda: dtype " + std::string(DTypeName(dtype)) + " is not implemented");
}

// ---------------------------------------------------------------------------
// Index plans.

// A walk over `dims` with K stride sets, extent-1 dims dropped and neighbours merged
// where every stride set walks them as one dim (outer stride = inner stride * extent).
template <size_t K>
struct Walk {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, K> strides;
};

template <size_t K>
Walk<K> Coalesce(std::span<const int64_t> dims, const std::array<std::vector<int64_t>, K>& strides) {
  Walk<K> w;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !w.dims.empty();
    for (size_t k = 0; k < K && merge; ++k) merge = w.strides[k].back() == strides[k][i] * dims[i];
    if (merge) {
      w.dims.back() *= dims[i];
      for (size_t k = 0; k < K; ++k) w.strides[k].back() = strides[k][i];
    } else {
      w.dims.push_back(dims[i]);
      for (size_t k = 0; k < K; ++k) w.strides[k].push_back(strides[k][i]);
    }
  }
  if (w.dims.empty()) {  // One element.
    w.dims.push_back(1);
    for (size_t k = 0; k < K; ++k) w.strides[k].push_back(0);
  }
  return w;
}

inline Status TooManyDims(std::string_view op, size_t rank) {
  return Unimplemented(std::string(op) + " on cuda: the index mapping needs " + Str(static_cast<int64_t>(rank)) +
                       " dims after merging, at most " + Str(kMaxCopyRank) + " are implemented");
}

// The copy of `dims` elements from src (strides src_strides, offset src_base elements)
// to dst (dst_strides, dst_base), dims merged; UNIMPLEMENTED past kMaxCopyRank dims.
StatusOr<CopyPlan> MakeCopyPlan(std::string_view op, std::span<const int64_t> dims, std::vector<int64_t> src_strides,
                                std::vector<int64_t> dst_strides, int64_t src_base, int64_t dst_base);

// Runs `plan` from src to dst on `stream`: one cudaMemcpyAsync when both sides are
// contiguous, the strided-copy kernel otherwise.
Status RunCopy(std::string_view op, int elem_size, const void* src, void* dst, CopyPlan plan, cudaStream_t stream);

// ---------------------------------------------------------------------------
// ---------------------------------------------------------------------------
// The kernel base: validation against the op's shape function, then RunOnDevice on
// the kernel's device when there is anything to write.

class TransformKernel : public CudaKernel {
 public:
  TransformKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  // Inputs and outputs match the shape function; at least one output is non-empty;
  // the kernel's device is selected.
  virtual Status RunOnDevice(std::span<const TensorRef> in, std::span<const TensorRef> out) = 0;

  Status Check(std::string_view call, cudaError_t error) const { return CudaCheck(op(), call, error); }
  // Copies `dims` elements of `elem_size` bytes from src (strides src_strides, offset
  // src_base elements) to dst (dst_strides, dst_base) on stream().
  Status StridedCopy(int elem_size, const void* src, void* dst, std::span<const int64_t> dims,
                     std::vector<int64_t> src_strides, std::vector<int64_t> dst_strides, int64_t src_base,
                     int64_t dst_base) const {
    REMEX_ASSIGN_OR_RETURN(CopyPlan plan, MakeCopyPlan(op(), dims, std::move(src_strides), std::move(dst_strides),
                                                       src_base, dst_base));
    return RunCopy(op(), elem_size, src, dst, plan, stream());
  }

  // Concat's and Split's block copy: `outer` rows of `row` elements from src (rows
  // `src_row` elements apart, starting at column src_col) to dst (rows dst_row apart,
  // from column dst_col); nothing for an empty block.
  Status CopyRows(int elem_size, const void* src, int64_t src_row, int64_t src_col, void* dst, int64_t dst_row,
                  int64_t dst_col, int64_t outer, int64_t row) const {
    if (row <= 0 || outer <= 0) return OkStatus();
    const int64_t dims[2] = {outer, row};
    return StridedCopy(elem_size, src, dst, dims, {src_row, 1}, {dst_row, 1}, src_col, dst_col);
  }

 private:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) final {
    REMEX_RETURN_IF_ERROR(UseDevice());
    return RunOnDevice(in, out);
  }
};

// The extents of `shape` before `axis` (outer) and after it (inner), multiplied out.
inline std::pair<int64_t, int64_t> OuterInner(const Shape& shape, int64_t axis) {
  int64_t outer = 1;
  int64_t inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  return {outer, inner};
}

// ---------------------------------------------------------------------------
// Registration.

// Registers K (K::Create or K(def, attrs, context): internal::MakeKernel) as the CUDA
// kernel of the op `name`, which has a single entry.
template <typename K>
Status AddKernel(KernelRegistry& registry, std::string_view name, CudaKernelContext context) {
  return AddCudaKernel(registry, name, MakeCudaKernel<K>(context));
}

}  // namespace remex::kernels::cuda
