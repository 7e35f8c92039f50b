// CUDA kernel of Resize (host side). Device code: the launchers of resize_impl.h (resize_impl.cu).
//
// Semantics are the CPU kernel's (kernels/ops/image/resize.cc), which follows ONNX:
// Resize-10, -11 and -13, any rank up to 8: nearest (every nearest_mode, any dtype of 1, 2,
// 4 or 8 bytes), linear and cubic (cubic_coeff_a, exclude_outside; float32 and float16);
// every coordinate_transformation_mode the CPU kernel takes, tf_crop_and_resize with
// extrapolation_value. roi, scales and sizes are data inputs of the shape function, in host
// memory. The attributes are read with the CPU kernel's parser (kernels/op_attrs.h), so the
// same values are refused with the same errors. Other dtypes are UNIMPLEMENTED naming the op
// and dtype.

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/image/cuda/resize_impl.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// Resize.

// The launchers' parameters from the attributes (kernels/ops/image/resize.cc's
// ParseResizeAttrs); the extents come later (PlanResize).
ResizeParams ParamsOf(const internal::ResizeAttrs& a) {
  ResizeParams p;
  p.mode = a.mode;
  p.coord = a.coord;
  p.nearest = a.nearest;
  p.exclude_outside = a.exclude_outside;
  p.cubic_a = a.cubic_a;
  return p;
}

bool Given(std::span<const TensorRef> in, size_t i) {
  return i < in.size() && in[i].present() && Count(in[i].shape) > 0;
}

// A float16/32/64 host tensor's values as double.
std::vector<double> HostDoubles(const TensorRef& t) {
  const int64_t n = Count(t.shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kFloat32:
        v[i] = static_cast<const float*>(t.data)[i];
        break;
      case DType::kFloat64:
        v[i] = static_cast<const double*>(t.data)[i];
        break;
      case DType::kFloat16:
        v[i] = HalfToFloat(static_cast<const Half*>(t.data)[i]);
        break;
      default:
        break;
    }
  }
  return v;
}

// The extents, scales and roi of a Resize whose inputs the shape function accepted
// (kernels/ops/image/resize.cc's PlanResize).
Status PlanResize(std::string_view op, int64_t version, std::span<const TensorRef> in, ResizeParams& p) {
  const Shape& x = in[0].shape;
  const size_t rank = x.size();
  if (rank > static_cast<size_t>(kMaxResizeRank)) {
    return Unimplemented(std::string(op) + " on cuda: rank " + std::to_string(rank) + " is above " +
                         std::to_string(kMaxResizeRank));
  }
  p.rank = static_cast<int>(rank);
  const size_t scales_at = version == 10 ? 1 : 2;
  if (Given(in, scales_at)) {
    const std::vector<double> s = HostDoubles(in[scales_at]);
    for (size_t i = 0; i < rank; ++i) {
      p.out[i] = static_cast<int64_t>(std::floor(s[i] * static_cast<double>(x[i])));
      p.scale[i] = s[i];
      p.length[i] = s[i] * static_cast<double>(x[i]);
    }
  } else {
    REMEX_ASSIGN_OR_RETURN(std::vector<int64_t> s,
                           internal::ReadIndexTensor(op, "sizes", in[3].dtype, in[3].shape, in[3].data));
    for (size_t i = 0; i < rank; ++i) {
      p.out[i] = s[i];
      p.length[i] = static_cast<double>(s[i]);
      p.scale[i] = x[i] == 0 ? 1.0 : static_cast<double>(s[i]) / static_cast<double>(x[i]);
    }
  }
  std::vector<double> roi;
  if (p.coord == ResizeCoord::kTfCropAndResize) roi = HostDoubles(in[1]);
  for (size_t i = 0; i < rank; ++i) {
    p.in[i] = x[i];
    p.roi_start[i] = roi.empty() ? 0.0 : roi[i];
    p.roi_end[i] = roi.empty() ? 1.0 : roi[i + rank];
  }
  return OkStatus();
}

class ResizeKernel final : public SkipEmptyKernel {
 public:
  ResizeKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::ResizeAttrs resize)
      : SkipEmptyKernel(def, std::move(attrs), context), resize_(resize) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    ResizeParams p = ParamsOf(resize_);
    REMEX_RETURN_IF_ERROR(PlanResize(op(), resize_.version, in, p));
    const int64_t n_out = Count(out[0].shape);
    if (p.mode == ResizeMode::kNearest) {
      const size_t size = DTypeSize(in[0].dtype);
      if (size != 1 && size != 2 && size != 4 && size != 8) {
        return Unimplemented(op() + " on cuda: dtype " + std::string(DTypeName(in[0].dtype)) +
                             " is not implemented");
      }
      const uint64_t extrapolation = internal::ResizeExtrapolationBits(in[0].dtype, resize_.extrapolation);
      return Launch([&] {
        return LaunchResizeNearest(static_cast<int>(size), in[0].data, out[0].data, n_out, p, extrapolation,
                                   stream());
      });
    }
    return LaunchFor<float, Half>(
        in[0].dtype, "linear and cubic modes take float32 and float16", [&](auto tag) {
          using T = decltype(tag);
          return LaunchResizeInterp<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), n_out,
                                       p, static_cast<float>(resize_.extrapolation), stream());
        });
  }

 private:
  const internal::ResizeAttrs resize_;
};

// The kernel of the Resize-`definition` entry (10, 11 or 13).
StatusOr<std::unique_ptr<OpKernel>> MakeResize(CudaKernelContext context, int definition, const OpDef& def,
                                               const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(internal::ResizeAttrs r, internal::ParseResizeAttrs(definition, attrs));
  return std::unique_ptr<OpKernel>(std::make_unique<ResizeKernel>(def, attrs, context, r));
}

}  // namespace

Status AddResizeCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  using std::placeholders::_1;
  using std::placeholders::_2;
  for (int definition : {10, 11, 13}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "Resize", definition, std::bind(MakeResize, context, definition, _1, _2)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
