// CUDA kernels of the generator family (host side): Size, ConstantOfShape, Range and
// OneHot. Device code in generate_impl.cu.
//
// Semantics are the CPU kernels' (kernels/ops/generator/generate.cc), which follow ONNX:
//   - Size, opsets 1-13: reads the input's shape only and writes an int64 to device memory.
//   - ConstantOfShape, opset 9-20: the shape input in host memory (ShapeDep::kData);
//     the `value` attribute as the frontend encodes it (float, int64, or {ONNX dtype,
//     bits}); any dtype. Default: float32 zero.
//   - Range, opset 11: start, limit and delta are scalars in host memory
//     (ShapeDep::kData); every numeric dtype. Integers wrap modulo 2^64 as on the CPU;
//     float16 is computed in float32 and rounded to nearest even.
//   - OneHot, opsets 9-11: depth on the host, values on the device; float32, float16,
//     float64, int32, int64 indices; any element size of values.
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
#include "kernels/cuda/workspace.h"
#include "kernels/ops/generator/cuda/generate_impl.h"
#include "kernels/ops/training/cuda/optimizer_impl.h"
#include "kernels/ops/elementwise/dropout_mask.h"
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

}  // namespace

Status AddGenerateCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Size", MakeCudaKernel<SizeKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "ConstantOfShape", MakeCudaKernel<ConstantOfShapeKernel>(context)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Range", MakeCudaKernel<RangeKernel>(context)));
  return AddCudaKernel(registry, "OneHot", MakeCudaKernel<OneHotKernel>(context));
}

}  // namespace remex::kernels::cuda
