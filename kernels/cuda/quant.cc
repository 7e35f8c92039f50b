// CUDA kernels of the quantization ops (host side): QuantizeLinear-10/13,
// DequantizeLinear-10/13, DynamicQuantizeLinear-11, MatMulInteger-10,
// QLinearMatMul-10, ConvInteger-10 and QLinearConv-10. Device code in quant_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/quantize.cc,
// kernels/qlinear.cc): the same views (kernels/quantize_view.h) check the inputs, and
// the device code evaluates the same functions (kernels/quantize_ops.h) per element,
// so outputs are bit for bit the CPU's. Scales, zero points and biases stay in device
// memory; DynamicQuantizeLinear computes its scale and zero point on the device (no
// copy to the host). DequantizeLinear of int32 x with a non-zero zero point, which
// the CPU refuses after reading it, reads it on the CPU only: on CUDA its zero point
// is used as given (ONNX defines it as 0).

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/quant_impl.h"
#include "kernels/internal.h"
#include "kernels/quantize_view.h"

namespace remex::kernels::cuda {
namespace {

std::optional<QType> QTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kUint8: return QType::kUint8;
    case DType::kInt8: return QType::kInt8;
    case DType::kInt32: return QType::kInt32;
    default: return std::nullopt;
  }
}

// A parameter input `t` (absent: null data) holding 1 value or `channels`.
QParam ParamOf(const TensorRef* t) {
  QParam p;
  if (t == nullptr || !t->present()) return p;
  p.data = t->data;
  p.type = QTypeOf(t->dtype).value_or(QType::kUint8);
  p.per_channel = NumElements(t->shape).value_or(1) != 1;
  return p;
}

const TensorRef* Input(std::span<const TensorRef> in, size_t i) { return i < in.size() ? &in[i] : nullptr; }

class QuantizeKernel final : public CudaKernel {
 public:
  QuantizeKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip), since_(def.since_version) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const bool quantize = op() == "QuantizeLinear";
    REMEX_ASSIGN_OR_RETURN(internal::QuantizeView v,
                           internal::QuantizeViewOf(op(), since_, attrs(), internal::ToShapeArgs(in)));
    const QParam scale = ParamOf(&in[1]);
    const QParam zero_point = ParamOf(Input(in, 2));
    return Launch([&] {
      if (quantize) {
        return LaunchQuantize(v.x == DType::kInt32, in[0].data, scale, zero_point, *QTypeOf(v.q), out[0].data, v.outer,
                              v.channels, v.inner, stream());
      }
      return LaunchDequantize(*QTypeOf(v.q), in[0].data, scale, zero_point, static_cast<float*>(out[0].data),
                              v.outer, v.channels, v.inner, stream());
    });
  }

 private:
  const int since_;  // The entry (10 or 13): opset 13 adds per-axis parameters.
};

class DynamicQuantizeKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (out.size() < 3) {
      return InvalidArgument(op() + " on cuda: y_scale and y_zero_point are required outputs (ONNX "
                             "DynamicQuantizeLinear-11); the scale is computed into them on the device");
    }
    const int64_t n = NumElements(in[0].shape).value_or(0);
    return Launch([&] {
      return LaunchDynamicQuantize(static_cast<const float*>(in[0].data), n, static_cast<uint8_t*>(out[0].data),
                                   static_cast<float*>(out[1].data), static_cast<uint8_t*>(out[2].data), stream());
    });
  }
};

// The integer (a, b, a_zp, b_zp) and QLinear (a, a_scale, a_zp, b, b_scale, b_zp,
// y_scale, y_zp, [B]) input positions.
QLinearParams ParamsOf(std::string_view op, std::span<const TensorRef> in, DType y) {
  const bool qlinear = op.rfind("QLinear", 0) == 0;
  QLinearParams p;
  p.qlinear = qlinear;
  const size_t a = 0, b = qlinear ? 3 : 1, a_zp = 2, b_zp = qlinear ? 5 : 3;
  p.a = *QTypeOf(in[a].dtype);
  p.b = *QTypeOf(in[b].dtype);
  p.a_zero_point = ParamOf(Input(in, a_zp));
  p.b_zero_point = ParamOf(Input(in, b_zp));
  p.y = *QTypeOf(y);
  if (qlinear) {
    p.a_scale = ParamOf(&in[1]);
    p.b_scale = ParamOf(&in[4]);
    p.y_scale = ParamOf(&in[6]);
    p.y_zero_point = ParamOf(&in[7]);
    p.bias = ParamOf(Input(in, 8));
  }
  return p;
}

class QMatMulKernel final : public CudaKernel {
 public:
  QMatMulKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::QMatMulView v, internal::QMatMulViewOf(op(), internal::ToShapeArgs(in)));
    const QLinearParams p = ParamsOf(op(), in, out[0].dtype);
    const size_t b = p.qlinear ? 3 : 1;
    return Launch([&] { return LaunchQMatMul(v.g, in[0].data, in[b].data, p, out[0].data, stream()); });
  }
};

class QConvKernel final : public CudaKernel {
 public:
  // The attributes are checked here and read again per call, with the inputs' shapes.
  static StatusOr<std::unique_ptr<QConvKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                       CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(internal::CheckQConvAttrs(def.name, attrs));
    return std::make_unique<QConvKernel>(def, attrs, context);
  }
  QConvKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : CudaKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::QConvView v, internal::QConvViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    const QLinearParams p = ParamsOf(op(), in, out[0].dtype);
    const size_t w = p.qlinear ? 3 : 1;
    return Launch([&] { return LaunchQConv(v.g, in[0].data, in[w].data, p, out[0].data, stream()); });
  }
};

}  // namespace

Status AddQuantCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const char* name : {"QuantizeLinear", "DequantizeLinear"}) {
    for (int since : {10, 13}) {
      REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, since, MakeCudaKernel<QuantizeKernel>(context)));
    }
  }
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "DynamicQuantizeLinear", MakeCudaKernel<DynamicQuantizeKernel>(context)));
  for (const char* name : {"MatMulInteger", "QLinearMatMul"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<QMatMulKernel>(context)));
  }
  for (const char* name : {"ConvInteger", "QLinearConv"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<QConvKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
