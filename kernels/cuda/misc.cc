// CUDA kernels of the misc group (host side): the shape-arithmetic ops, Dropout,
// TopK, LRN, CumSum and OneHot. Device code in misc_impl.cu.
//
// Semantics are the CPU kernels' (kernels/tensor.cc, kernels/generate.cc,
// kernels/unary.cc, kernels/reduce.cc, kernels/pool.cc), which follow ONNX:
//   - Shape, opsets 1-15: opset 15's start/end (clamped to [0, rank]). Size, opsets
//     1-13. Both read the input's shape only and write int64 values to device memory.
//   - ConstantOfShape, opset 9-20: the shape input in host memory (ShapeDep::kData);
//     the `value` attribute as the frontend encodes it (float, int64, or {ONNX dtype,
//     bits}); any dtype. Default: float32 zero.
//   - Range, opset 11: start, limit and delta are scalars in host memory
//     (ShapeDep::kData); every numeric dtype. Integers wrap modulo 2^64 as on the CPU;
//     float16 is computed in float32 and rounded to nearest even.
//   - Dropout-7 and Dropout-10+ (one kernel for both entries): at inference output =
//     input and the optional mask all true (all ones of the input's dtype for
//     Dropout-7); ratio and training_mode are read on the host. Training mode
//     (Dropout-12+, ratio in (0, 1)): the CPU kernel's mask, drawn on the host and
//     copied to the device, and its scaling, for float16, float32 and float64
//     (training_impl.cu).
//   - TopK, opsets 1-11: axis, largest, sorted; k as the attribute (opset 1) or as input
//     1 (host memory, ShapeDep::kData). float32, float16, float64, int32, int64 values,
//     int64 indices. The output is always sorted (the wanted end first, NaN above
//     every number, equal values by ascending index), as the CPU kernel does.
//   - LRN, opsets 1-13: size, alpha, beta, bias; float32, float16 (computed in
//     float32) and float64.
//   - OneHot, opsets 9-11: depth on the host, values on the device; float32, float16,
//     float64, int32, int64 indices; any element size of values.
//   - CumSum, opsets 11-14 (kernels/cumsum.cc): axis on the host, exclusive, reverse;
//     float32, float16, float64, int32, int64 (uint32 and uint64 are the CPU's only).
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/libraries_internal.h"
#include "kernels/cuda/misc_impl.h"
#include "kernels/cuda/training_impl.h"
#include "kernels/dropout_mask.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::cuda {
namespace {

using internal::CheckTopKAttrs;
using internal::FillValue;
using internal::FillValueOf;
using internal::LrnAttrs;
using internal::ParseLrnAttrs;
using internal::ShapeRange;
using internal::ShapeRangeOf;

int64_t Count(const Shape& shape) { return NumElements(shape).value_or(0); }

// ---------------------------------------------------------------------------
// Shape and Size.

class ShapeKernel final : public CudaKernel {
 public:
  // start and end are clamped per call, to the input's rank.
  static StatusOr<std::unique_ptr<ShapeKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                       CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(ShapeRangeOf(attrs, 0).status());
    return std::make_unique<ShapeKernel>(def, attrs, context);
  }
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    REMEX_ASSIGN_OR_RETURN(ShapeRange r, ShapeRangeOf(attrs(), static_cast<int64_t>(shape.size())));
    if (r.end == r.start) return OkStatus();
    return Launch([&] {
      return LaunchWriteInt64s(static_cast<int64_t*>(out[0].data), shape.data() + r.start, r.end - r.start,
                               stream());
    });
  }
};

class SizeKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t size = Count(in[0].shape);
    return Launch([&] { return LaunchWriteInt64s(static_cast<int64_t*>(out[0].data), &size, 1, stream()); });
  }
};

// ---------------------------------------------------------------------------
// ConstantOfShape.

class ConstantOfShapeKernel final : public CudaKernel {
 public:
  static StatusOr<std::unique_ptr<ConstantOfShapeKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                                 CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(FillValue value, FillValueOf(attrs));
    return std::make_unique<ConstantOfShapeKernel>(def, attrs, context, value);
  }
  ConstantOfShapeKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, FillValue value)
      : CudaKernel(def, std::move(attrs), context), value_(value) {}

 protected:
  Status Run(std::span<const TensorRef>, std::span<const TensorRef> out) override {
    const int64_t n = Count(out[0].shape);
    if (n == 0) return OkStatus();
    const int size = static_cast<int>(DTypeSize(out[0].dtype));
    return Launch([&] { return LaunchFill(out[0].data, n, size, value_.bits, stream()); });
  }

 private:
  const FillValue value_;
};

// ---------------------------------------------------------------------------
// Range.

template <typename T>
T HostScalar(const TensorRef& t) {
  T v;
  std::memcpy(&v, t.data, sizeof(T));
  return v;
}

class RangeKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  // start, limit and delta are ShapeDep::kData: host memory.
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = out[0].shape[0];
    if (n == 0) return OkStatus();
    return LaunchFor<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, uint32_t, uint64_t, Half, float,
                     double>(in[0].dtype, "the integer and float dtypes are", [&](auto tag) {
      using T = decltype(tag);
      RangeArgs args;
      if constexpr (std::is_integral_v<T>) {
        args.int_start = static_cast<uint64_t>(HostScalar<T>(in[0]));
        args.int_delta = static_cast<uint64_t>(HostScalar<T>(in[2]));
      } else {
        args.float_start = static_cast<double>(internal::Load(HostScalar<T>(in[0])));
        args.float_delta = static_cast<double>(internal::Load(HostScalar<T>(in[2])));
      }
      return LaunchRange<T>(args, static_cast<T*>(out[0].data), n, stream());
    });
  }
};

// ---------------------------------------------------------------------------
// Dropout.

// The bytes of 1 in `dtype` (true for bool).
std::optional<uint64_t> OneBits(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return uint64_t{0x3f800000};
    case DType::kFloat16:
      return uint64_t{0x3c00};
    case DType::kFloat64:
      return uint64_t{0x3ff0000000000000};
    case DType::kBool:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
    case DType::kUint64:
      return uint64_t{1};
    default:
      break;
  }
  return std::nullopt;
}

// ratio and training_mode are in host memory (ShapeDep::kData). In training mode the
// mask is drawn on the host (kernels/dropout_mask.h: the CPU kernel's draw, so the same
// elements are dropped), copied to the mask output (or to workspace scratch without
// one), and the kept elements are scaled on the device (LaunchDropoutTrain).
class DropoutKernel final : public CudaKernel {
 public:
  DropoutKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, attrs, context), seeds_(internal::DropoutSeedOf(attrs)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const int64_t n = Count(in[0].shape);
    if (n == 0) return OkStatus();
    REMEX_ASSIGN_OR_RETURN(std::optional<double> ratio, internal::DropoutTrainingRatio(internal::ToShapeArgs(in)));
    if (ratio) return RunTraining(*ratio, n, in, out);
    std::optional<uint64_t> one;
    if (out.size() > 1) {
      one = OneBits(out[1].dtype);
      if (!one) return Unsupported(out[1].dtype, "the mask takes bool and the numeric dtypes");
    }
    const size_t bytes = static_cast<size_t>(n) * DTypeSize(in[0].dtype);
    REMEX_RETURN_IF_ERROR(UseDevice());
    if (out[0].data != in[0].data) {
      REMEX_RETURN_IF_ERROR(
          CudaCheck(op(), "cudaMemcpyAsync",
                    cudaMemcpyAsync(out[0].data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream())));
    }
    if (!one) return OkStatus();
    const int size = static_cast<int>(DTypeSize(out[1].dtype));
    return CudaCheck(op(), "kernel launch", LaunchFill(out[1].data, n, size, *one, stream()));
  }

 private:
  Status RunTraining(double ratio, int64_t n, std::span<const TensorRef> in, std::span<const TensorRef> out) {
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat16 && in[0].dtype != DType::kFloat64) {
      return Unsupported(in[0].dtype, "training mode takes float16, float32 and float64");
    }
    std::vector<uint8_t> keep(static_cast<size_t>(n));
    internal::DrawDropoutMask(seeds_.Next(), ratio, keep.data(), n);
    REMEX_RETURN_IF_ERROR(UseDevice());
    StreamWorkspace workspace(op(), stream(), &context().workspace);
    void* mask = nullptr;
    if (out.size() > 1) {
      mask = out[1].data;
    } else {
      REMEX_ASSIGN_OR_RETURN(mask, workspace.Allocate(keep.size()));
    }
    // `keep` is pageable: cudaMemcpyAsync returns once it has been staged.
    REMEX_RETURN_IF_ERROR(CudaCheck(
        op(), "cudaMemcpyAsync", cudaMemcpyAsync(mask, keep.data(), keep.size(), cudaMemcpyHostToDevice, stream())));
    REMEX_RETURN_IF_ERROR((LaunchFor<float, Half, double>(
        in[0].dtype, "training mode takes float16, float32 and float64", [&](auto tag) {
          using T = decltype(tag);
          return LaunchDropoutTrain<T>(static_cast<const T*>(in[0].data), static_cast<const uint8_t*>(mask),
                                       1.0 / (1.0 - ratio), static_cast<T*>(out[0].data), n, stream());
        })));
    return workspace.Release();
  }

  internal::DropoutSeeds seeds_;
};

// ---------------------------------------------------------------------------
// TopK.


class TopKKernel final : public CudaKernel {
 public:
  static StatusOr<std::unique_ptr<TopKKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                      CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(CheckTopKAttrs(attrs));
    return std::make_unique<TopKKernel>(def, attrs, context);
  }
  using CudaKernel::CudaKernel;

 protected:
  // The shape function has accepted axis and k (attribute or input 1): k is the
  // outputs' extent along the axis.
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    REMEX_ASSIGN_OR_RETURN(int64_t axis, internal::NormalizeAxis(op(), *attrs().Int("axis", -1), rank));
    const bool largest = *attrs().Int("largest", 1) == 1;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
    const int64_t n = shape[axis];
    const int64_t k = out[0].shape[axis];
    if (outer * inner * k == 0) return OkStatus();
    int64_t* indices = out.size() > 1 ? static_cast<int64_t*>(out[1].data) : nullptr;
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchTopK<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), indices,
                               outer, n, inner, k, largest, stream());
        });
  }
};

// ---------------------------------------------------------------------------
// OneHot: indices (device), depth (host), values (device); the view is the CPU's.

class OneHotKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::OneHotView v, internal::OneHotViewOf(attrs(), internal::ToShapeArgs(in)));
    if (v.outer * v.depth * v.inner == 0) return OkStatus();
    const int es = static_cast<int>(DTypeSize(out[0].dtype));
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 indices are", [&](auto tag) {
          using I = decltype(tag);
          return LaunchOneHot<I>(es, static_cast<const I*>(in[0].data), in[2].data, out[0].data, v.outer,
                                 v.depth, v.inner, stream());
        });
  }
};

// ---------------------------------------------------------------------------
// CumSum: x (device), axis (host); the view and flags are the CPU kernel's.

class CumSumKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::CumSumView v, internal::CumSumViewOf(attrs(), internal::ToShapeArgs(in)));
    if (v.outer * v.n * v.inner == 0) return OkStatus();
    return LaunchFor<float, Half, double, int32_t, int64_t>(
        in[0].dtype, "float32, float16, float64, int32 and int64 are", [&](auto tag) {
          using T = decltype(tag);
          return LaunchCumSum<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), v.outer,
                                 v.n, v.inner, v.exclusive, v.reverse, stream());
        });
  }
};

// ---------------------------------------------------------------------------
// LRN.

class LrnKernel final : public CudaKernel {
 public:
  static StatusOr<std::unique_ptr<LrnKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                     CudaKernelContext context) {
    REMEX_ASSIGN_OR_RETURN(LrnAttrs lrn, ParseLrnAttrs(attrs));
    return std::make_unique<LrnKernel>(def, attrs, context, lrn);
  }
  LrnKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, LrnAttrs lrn)
      : CudaKernel(def, std::move(attrs), context), lrn_(lrn) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const Shape& shape = in[0].shape;
    LrnArgs args;
    args.batch = shape[0];
    args.channels = shape[1];
    args.inner = 1;
    for (size_t d = 2; d < shape.size(); ++d) args.inner *= shape[d];
    if (args.batch * args.channels * args.inner == 0) return OkStatus();
    args.lo = (lrn_.size - 1) / 2;
    args.hi = lrn_.size - 1 - args.lo;
    args.bias = lrn_.bias;
    args.beta = lrn_.beta;
    return LaunchFor<float, Half, double>(in[0].dtype, "float32, float16 and float64 are", [&](auto tag) {
      using T = decltype(tag);
      // As the CPU kernel: alpha / size in the compute type (float for float16).
      if constexpr (std::is_same_v<T, double>) {
        args.alpha_over_size = static_cast<double>(lrn_.alpha) / static_cast<double>(lrn_.size);
      } else {
        args.alpha_over_size = static_cast<double>(lrn_.alpha / static_cast<float>(lrn_.size));
      }
      return LaunchLrn<T>(static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data), args, stream());
    });
  }

 private:
  const LrnAttrs lrn_;
};

// ---------------------------------------------------------------------------
// Registration.

template <typename K>
Status AddMiscKernel(KernelRegistry& registry, std::string_view name, CudaKernelContext context) {
  return AddCudaKernel(registry, name, MakeCudaKernel<K>(context));
}

}  // namespace

Status AddMiscCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddMiscKernel<ShapeKernel>(registry, "Shape", context));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<SizeKernel>(registry, "Size", context));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<ConstantOfShapeKernel>(registry, "ConstantOfShape", context));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<RangeKernel>(registry, "Range", context));
  // Dropout-7 and Dropout-10+ differ in the mask's dtype only, which the output brings.
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Dropout", 7, MakeCudaKernel<DropoutKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Dropout", 10, MakeCudaKernel<DropoutKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<TopKKernel>(registry, "TopK", context));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<CumSumKernel>(registry, "CumSum", context));
  REMEX_RETURN_IF_ERROR(AddMiscKernel<OneHotKernel>(registry, "OneHot", context));
  return AddMiscKernel<LrnKernel>(registry, "LRN", context);
}

}  // namespace remex::kernels::cuda
