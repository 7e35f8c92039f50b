// CUDA kernels of the nn group (host side): MaxPool, AveragePool, GlobalAveragePool and
// Resize. Device code in nn_pool_impl.cu.
//
// Semantics are the CPU kernels' (kernels/pool.cc, kernels/resize.cc), which follow ONNX:
//   - MaxPool (opsets 1-12: kernel_shape, strides, pads, auto_pad, dilations, ceil_mode,
//     storage_order; the optional Indices output) and AveragePool (opsets 7-19:
//     count_include_pad, ceil_mode, dilations), 1-D to 3-D over NCHW-ordered [N, C, ...]
//     (the CPU kernels take no layout attribute). float32 and float16.
//   - GlobalAveragePool and GlobalMaxPool (opset 1), float32 and float16.
//   - Resize-10, -11 and -13, any rank up to 8: nearest (every nearest_mode, any dtype
//     of 1, 2, 4 or 8 bytes), linear and cubic (cubic_coeff_a, exclude_outside;
//     float32 and float16); every coordinate_transformation_mode the CPU kernel takes,
//     tf_crop_and_resize with extrapolation_value. roi, scales and sizes are data inputs
//     of the shape function, in host memory.
// The attributes are read with the CPU kernels' parsers (kernels/op_attrs.h), so the
// same values are refused with the same errors.
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/nn_common.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

// ---------------------------------------------------------------------------
// Pooling.

StatusOr<PoolGeometry> MakePoolGeometry(std::string_view op, const internal::WindowAttrs& w, const Shape& x) {
  const size_t nsp = w.kernel_shape.size();
  if (x.size() != nsp + 2 || nsp < 1 || nsp > 3) {
    return internal::OpError(op, "X " + ShapeToString(x) + " does not fit kernel_shape of " +
                                     std::to_string(nsp) + " dims (1-D to 3-D pooling)");
  }
  std::span<const int64_t> spatial(x.data() + 2, nsp);
  REMEX_ASSIGN_OR_RETURN(internal::WindowGeometry wg,
                         internal::ComputeWindowGeometry(op, w, spatial, w.kernel_shape));
  PoolGeometry g;
  g.planes = x[0] * x[1];
  int64_t col = 1;
  for (size_t i = 0; i < nsp; ++i) {
    const size_t j = 3 - nsp + i;
    g.in[j] = x[2 + i];
    g.out[j] = wg.output[i];
    g.kernel[j] = wg.kernel[i];
    g.stride[j] = wg.strides[i];
    g.dilation[j] = wg.dilations[i];
    g.pad_begin[j] = wg.pad_begin[i];
    g.pad_end[j] = wg.pad_end[i];
    g.col_stride[j] = col;
    col *= x[2 + i];
  }
  return g;
}

class MaxPoolKernel final : public NnKernel {
 public:
  MaxPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::WindowAttrs window,
                bool column_major)
      : NnKernel(def, std::move(attrs), context), window_(std::move(window)), column_major_(column_major) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(op(), window_, in[0].shape));
    int64_t* indices = out.size() > 1 ? static_cast<int64_t*>(out[1].data) : nullptr;
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchMaxPool<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), indices,
                              column_major_, g, stream());
    });
  }

 private:
  const internal::WindowAttrs window_;
  const bool column_major_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeMaxPool(CudaKernelContext context, const OpDef& def,
                                                const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(internal::MaxPoolAttrs a, internal::ParseMaxPoolAttrs(attrs));
  return std::unique_ptr<OpKernel>(
      std::make_unique<MaxPoolKernel>(def, attrs, context, std::move(a.window), a.storage_order == 1));
}

class AveragePoolKernel final : public NnKernel {
 public:
  AveragePoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context,
                    internal::WindowAttrs window, bool count_include_pad)
      : NnKernel(def, std::move(attrs), context),
        window_(std::move(window)),
        count_include_pad_(count_include_pad) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(op(), window_, in[0].shape));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchAveragePool<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data),
                                  count_include_pad_, g, stream());
    });
  }

 private:
  const internal::WindowAttrs window_;
  const bool count_include_pad_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeAveragePool(CudaKernelContext context, const OpDef& def,
                                                    const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(internal::AveragePoolAttrs a, internal::ParseAveragePoolAttrs(attrs));
  return std::unique_ptr<OpKernel>(
      std::make_unique<AveragePoolKernel>(def, attrs, context, std::move(a.window), a.count_include_pad));
}

// GlobalAveragePool, or GlobalMaxPool with `max`.
class GlobalPoolKernel final : public NnKernel {
 public:
  GlobalPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool max)
      : NnKernel(def, std::move(attrs), context), max_(max) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t planes = in[0].shape[0] * in[0].shape[1];
    const int64_t size = Count(in[0].shape) / planes;  // planes > 0: the output is not empty.
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in[0].data);
      T* y = static_cast<T*>(out[0].data);
      return max_ ? LaunchGlobalMaxPool<T>(x, y, planes, size, stream())
                  : LaunchGlobalAveragePool<T>(x, y, planes, size, stream());
    });
  }

 private:
  const bool max_;
};

// GlobalLpPool-2.
class GlobalLpPoolKernel final : public NnKernel {
 public:
  GlobalLpPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, int p)
      : NnKernel(def, std::move(attrs), context), p_(p) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t planes = in[0].shape[0] * in[0].shape[1];
    const int64_t size = Count(in[0].shape) / planes;  // planes > 0: the output is not empty.
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchGlobalLpPool<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), planes,
                                   size, p_, stream());
    });
  }

 private:
  const int p_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeGlobalLpPool(CudaKernelContext context, const OpDef& def,
                                                     const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(int p, internal::ParseGlobalLpPoolP(attrs));
  return std::unique_ptr<OpKernel>(std::make_unique<GlobalLpPoolKernel>(def, attrs, context, p));
}

// LpNormalization-1.
class LpNormalizationKernel final : public NnKernel {
 public:
  using NnKernel::NnKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::LpNormParams g, internal::ParseLpNormalization(attrs(), in[0].shape));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchLpNormalization<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data),
                                      g.outer, g.n, g.inner, g.p, stream());
    });
  }
};

// ---------------------------------------------------------------------------
// Resize.

// The launchers' parameters from the attributes (kernels/resize.cc's
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
// (kernels/resize.cc's PlanResize).
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

class ResizeKernel final : public NnKernel {
 public:
  ResizeKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::ResizeAttrs resize)
      : NnKernel(def, std::move(attrs), context), resize_(resize) {}

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

Status AddNnPoolCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  using std::placeholders::_1;
  using std::placeholders::_2;
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "MaxPool", std::bind(MakeMaxPool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "AveragePool", std::bind(MakeAveragePool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "GlobalAveragePool", MakeCudaKernel<GlobalPoolKernel>(context, false)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "GlobalMaxPool", MakeCudaKernel<GlobalPoolKernel>(context, true)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "GlobalLpPool", std::bind(MakeGlobalLpPool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "LpNormalization", MakeCudaKernel<LpNormalizationKernel>(context)));
  for (int definition : {10, 11, 13}) {
    REMEX_RETURN_IF_ERROR(
        AddCudaKernel(registry, "Resize", definition, std::bind(MakeResize, context, definition, _1, _2)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
