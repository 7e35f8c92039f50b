// CUDA kernels of MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool and GlobalLpPool
// (host side). Device code: the launchers of pool_impl.h (pool_impl.cu); LRN is in lrn.cc.
//
// Semantics are the CPU kernels' (kernels/ops/nn/pool.cc), which follow ONNX:
//   - MaxPool (opsets 1-12: kernel_shape, strides, pads, auto_pad, dilations, ceil_mode,
//     storage_order; the optional Indices output) and AveragePool (opsets 7-19:
//     count_include_pad, ceil_mode, dilations), 1-D to 3-D over NCHW-ordered [N, C, ...]
//     (the CPU kernels' `layout` "NHWC" is refused: RefuseChannelsLast). float32 and float16.
//   - LpPool (opsets 2-17: kernel_shape, strides, pads, auto_pad, p), as AveragePool's
//     window; GlobalAveragePool, GlobalMaxPool (opset 1) and GlobalLpPool-2. float32 and
//     float16.
// The attributes are read with the CPU kernels' parsers (kernels/op_attrs.h), so the
// same values are refused with the same errors.
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/nn/cuda/pool_impl.h"
#include "kernels/ops/nn/lp_pool_attrs.h"

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

class MaxPoolKernel final : public SkipEmptyKernel {
 public:
  MaxPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::WindowAttrs window,
                bool column_major)
      : SkipEmptyKernel(def, std::move(attrs), context),
        window_(std::move(window)),
        column_major_(column_major) {}

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

// The layout pass's `layout` "NHWC" (kernels/ops/nn/pool.cc) is the CPU kernels' alone:
// UNIMPLEMENTED here, so that a channels-last X is never read as NCHW.
Status RefuseChannelsLast(std::string_view op, const Attributes& attrs) {
  StatusOr<std::string> layout = attrs.String("layout", "NCHW");
  if (!layout.ok() || *layout != "NCHW") {
    return Unimplemented(std::string(op) + ": channels-last (layout NHWC) X on the CUDA device");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<OpKernel>> MakeMaxPool(CudaKernelContext context, const OpDef& def,
                                                const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(internal::MaxPoolAttrs a, internal::ParseMaxPoolAttrs(attrs));
  REMEX_RETURN_IF_ERROR(RefuseChannelsLast("MaxPool", attrs));
  return std::unique_ptr<OpKernel>(
      std::make_unique<MaxPoolKernel>(def, attrs, context, std::move(a.window), a.storage_order == 1));
}

class AveragePoolKernel final : public SkipEmptyKernel {
 public:
  AveragePoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context,
                    internal::WindowAttrs window, bool count_include_pad)
      : SkipEmptyKernel(def, std::move(attrs), context),
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
  REMEX_RETURN_IF_ERROR(RefuseChannelsLast("AveragePool", attrs));
  return std::unique_ptr<OpKernel>(
      std::make_unique<AveragePoolKernel>(def, attrs, context, std::move(a.window), a.count_include_pad));
}

class LpPoolKernel final : public SkipEmptyKernel {
 public:
  LpPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::LpPoolAttrs parsed)
      : SkipEmptyKernel(def, std::move(attrs), context), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(PoolGeometry g, MakePoolGeometry(op(), attrs_.window, in[0].shape));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchLpPool<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), attrs_.p, g,
                             stream());
    });
  }

 private:
  const internal::LpPoolAttrs attrs_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeLpPool(CudaKernelContext context, const OpDef& def,
                                               const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(internal::LpPoolAttrs a, internal::ParseLpPoolAttrs(attrs));
  return std::unique_ptr<OpKernel>(std::make_unique<LpPoolKernel>(def, attrs, context, std::move(a)));
}

// GlobalAveragePool, or GlobalMaxPool with `max`.
class GlobalPoolKernel final : public SkipEmptyKernel {
 public:
  GlobalPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool max)
      : SkipEmptyKernel(def, std::move(attrs), context), max_(max) {}

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
class GlobalLpPoolKernel final : public SkipEmptyKernel {
 public:
  GlobalLpPoolKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, int p)
      : SkipEmptyKernel(def, std::move(attrs), context), p_(p) {}

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

StatusOr<std::unique_ptr<OpKernel>> MakeGlobalAveragePool(CudaKernelContext context, const OpDef& def,
                                                          const Attributes& attrs) {
  REMEX_RETURN_IF_ERROR(RefuseChannelsLast("GlobalAveragePool", attrs));
  return std::unique_ptr<OpKernel>(std::make_unique<GlobalPoolKernel>(def, attrs, context, false));
}

StatusOr<std::unique_ptr<OpKernel>> MakeGlobalLpPool(CudaKernelContext context, const OpDef& def,
                                                     const Attributes& attrs) {
  REMEX_ASSIGN_OR_RETURN(int p, internal::ParseGlobalLpPoolP(attrs));
  return std::unique_ptr<OpKernel>(std::make_unique<GlobalLpPoolKernel>(def, attrs, context, p));
}

}  // namespace

Status AddPoolCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  using std::placeholders::_1;
  using std::placeholders::_2;
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "MaxPool", std::bind(MakeMaxPool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "AveragePool", std::bind(MakeAveragePool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "LpPool", std::bind(MakeLpPool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "GlobalAveragePool", std::bind(MakeGlobalAveragePool, context, _1, _2)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "GlobalMaxPool", MakeCudaKernel<GlobalPoolKernel>(context, true)));
  return AddCudaKernel(registry, "GlobalLpPool", std::bind(MakeGlobalLpPool, context, _1, _2));
}

}  // namespace remex::kernels::cuda
