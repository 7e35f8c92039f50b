// CUDA kernels of the quantization ops (host side): QuantizeLinear-10/13,
// DequantizeLinear-10/13, DynamicQuantizeLinear-11, MatMulInteger-10,
// QLinearMatMul-10, ConvInteger-10, QLinearConv-10 and the internal FusedMatMulInteger
// and FusedQLinearAdd.
// Device code in quant_impl.cu.
//
// Semantics, dtypes and checks are the CPU kernels' (kernels/ops/quantization/quantize.cc,
// qlinear.cc): the same views (kernels/ops/quantization/quantize_view.h) check the inputs, and
// the device code evaluates the same functions (quantize_ops.h) per element,
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
#include "kernels/ops/quantization/cuda/quant_impl.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/quantization/quantize_view.h"

namespace remex::kernels::cuda {
namespace {

// A parameter input `t` (absent: null data) holding 1 value or `channels`.
QParam ParamOf(const TensorRef* t) {
  QParam p;
  if (t == nullptr || !t->present()) return p;
  p.data = t->data;
  p.type = t->dtype;
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
    if (quantize) {
      // x float32 or int32 (the view checked it), y uint8 or int8.
      return LaunchFor<uint8_t, int8_t>(v.q, "uint8 and int8 are", [&](auto y_tag) {
        using Y = decltype(y_tag);
        Y* y = static_cast<Y*>(out[0].data);
        if (v.x == DType::kInt32) {
          return LaunchQuantize(static_cast<const int32_t*>(in[0].data), scale, zero_point, y, v.outer,
                                v.channels, v.inner, stream());
        }
        return LaunchQuantize(static_cast<const float*>(in[0].data), scale, zero_point, y, v.outer,
                              v.channels, v.inner, stream());
      });
    }
    return LaunchFor<uint8_t, int8_t, int32_t>(v.q, "uint8, int8 and int32 are", [&](auto x_tag) {
      using X = decltype(x_tag);
      return LaunchDequantize(static_cast<const X*>(in[0].data), scale, zero_point,
                              static_cast<float*>(out[0].data), v.outer, v.channels, v.inner, stream());
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
  const size_t a_zp = 2, b_zp = qlinear ? 5 : 3;
  p.a_zero_point = ParamOf(Input(in, a_zp));
  p.b_zero_point = ParamOf(Input(in, b_zp));
  p.y = y;
  if (op == "FusedMatMulInteger") {  // (A, B, a_zp, b_zp, scale, [bias])
    p.a_scale = ParamOf(&in[4]);
    p.bias = ParamOf(Input(in, 5));
  }
  if (qlinear) {
    p.a_scale = ParamOf(&in[1]);
    p.b_scale = ParamOf(&in[4]);
    p.y_scale = ParamOf(&in[6]);
    p.y_zero_point = ParamOf(&in[7]);
    p.bias = ParamOf(Input(in, 8));
  }
  return p;
}

// A quantized kernel whose two operands are each uint8 or int8.
class QOperandsKernel : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  // Launches f(A{}, B{}) for the operands' element types (VisitDType on each).
  template <typename F>
  Status LaunchOperands(DType a, DType b, F&& f) const {
    return LaunchFor<uint8_t, int8_t>(a, "uint8 and int8 operands are", [&](auto a_tag) {
      std::optional<cudaError_t> error =
          VisitDType<uint8_t, int8_t>(b, [&](auto b_tag) { return f(a_tag, b_tag); });
      return error ? *error : cudaErrorInvalidValue;
    });
  }
};

class QMatMulKernel final : public QOperandsKernel {
 public:
  // FusedMatMulInteger's epilogue attributes are checked here, once.
  static StatusOr<std::unique_ptr<QMatMulKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                         CudaKernelContext context) {
    internal::ConvEpilogue epilogue;
    if (def.name == "FusedMatMulInteger") {
      REMEX_ASSIGN_OR_RETURN(epilogue, internal::ParseConvEpilogue(def.name, attrs));
    }
    return std::make_unique<QMatMulKernel>(def, attrs, context, epilogue);
  }
  QMatMulKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, internal::ConvEpilogue epilogue)
      : QOperandsKernel(def, std::move(attrs), context, EmptyOutputs::kSkip), epilogue_(epilogue) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::QMatMulView v, internal::QMatMulViewOf(op(), internal::ToShapeArgs(in)));
    QLinearParams p = ParamsOf(op(), in, out[0].dtype);
    p.activation = epilogue_.activation;
    p.alpha = epilogue_.alpha;
    p.beta = epilogue_.beta;
    const size_t b = p.qlinear ? 3 : 1;
    return LaunchOperands(in[0].dtype, in[b].dtype, [&](auto a_tag, auto b_tag) {
      using A = decltype(a_tag);
      using B = decltype(b_tag);
      return LaunchQMatMul(v.g, static_cast<const A*>(in[0].data), static_cast<const B*>(in[b].data), p,
                           out[0].data, stream());
    });
  }

 private:
  const internal::ConvEpilogue epilogue_;
};

class QConvKernel final : public QOperandsKernel {
 public:
  // The attributes are checked here and read again per call, with the inputs' shapes.
  static StatusOr<std::unique_ptr<QConvKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                       CudaKernelContext context) {
    REMEX_RETURN_IF_ERROR(internal::CheckQConvAttrs(def.name, attrs));
    StatusOr<std::string> layout = attrs.String("layout", "NCHW");
    if (!layout.ok() || *layout != "NCHW") {
      return Unimplemented(def.name + ": channels-last (layout NHWC) X on the CUDA device");
    }
    return std::make_unique<QConvKernel>(def, attrs, context);
  }
  QConvKernel(const OpDef& def, Attributes attrs, CudaKernelContext context)
      : QOperandsKernel(def, std::move(attrs), context, EmptyOutputs::kSkip) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::QConvView v, internal::QConvViewOf(op(), attrs(), internal::ToShapeArgs(in)));
    const QLinearParams p = ParamsOf(op(), in, out[0].dtype);
    const size_t w = p.qlinear ? 3 : 1;
    return LaunchOperands(in[0].dtype, in[w].dtype, [&](auto x_tag, auto w_tag) {
      using X = decltype(x_tag);
      using W = decltype(w_tag);
      return LaunchQConv(v.g, static_cast<const X*>(in[0].data), static_cast<const W*>(in[w].data), p,
                         out[0].data, stream());
    });
  }
};

class QLinearAddKernel final : public QOperandsKernel {
 public:
  using QOperandsKernel::QOperandsKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(internal::QLinearAddView v, internal::QLinearAddViewOf(attrs(), internal::ToShapeArgs(in)));
    if (v.n == 0) return OkStatus();
    return LaunchOperands(v.a, v.b, [&](auto a_tag, auto b_tag) {
      using A = decltype(a_tag);
      using B = decltype(b_tag);
      auto launch = [&](auto* y) {
        return LaunchQLinearAdd(static_cast<const A*>(in[0].data), ParamOf(&in[1]), ParamOf(&in[2]),
                                static_cast<const B*>(in[3].data), ParamOf(&in[4]), ParamOf(&in[5]), ParamOf(&in[6]),
                                ParamOf(&in[7]), v.relu, y, v.n, stream());
      };
      return v.y == DType::kUint8 ? launch(static_cast<uint8_t*>(out[0].data))
                                  : launch(static_cast<int8_t*>(out[0].data));
    });
  }
};

}  // namespace

Status AddQuantCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "FusedQLinearAdd", MakeCudaKernel<QLinearAddKernel>(context)));
  for (const char* name : {"QuantizeLinear", "DequantizeLinear"}) {
    for (int since : {10, 13}) {
      REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, since, MakeCudaKernel<QuantizeKernel>(context)));
    }
  }
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "DynamicQuantizeLinear", MakeCudaKernel<DynamicQuantizeKernel>(context)));
  for (const char* name : {"MatMulInteger", "QLinearMatMul", "FusedMatMulInteger"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<QMatMulKernel>(context)));
  }
  for (const char* name : {"ConvInteger", "QLinearConv"}) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, name, MakeCudaKernel<QConvKernel>(context)));
  }
  return OkStatus();
}

}  // namespace remex::kernels::cuda
