// CUDA kernels of the elementwise ops beyond those of elementwise.cc (host side). Device
// code: the launchers of elementwise_ops_impl.h (elementwise_ops_impl.cu).
//
// Semantics are the CPU kernels' (kernels/ops/elementwise/elementwise.cc, unary.cc), which follow ONNX:
//   - Unary, float32 and float16: LeakyRelu (alpha, default 0.01), HardSigmoid (alpha
//     0.2, beta 0.5), HardSwish, Swish (alpha, default 1), Gelu (approximate "none"), Tanh, Exp, Log, Erf, Sqrt, Neg, Abs, Reciprocal, Sin,
//     Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Ceil, Floor, Round,
//     Sign, Softplus, Softsign, Elu, Celu, Selu, ThresholdedRelu, Shrink (the list is
//     elementwise_ops_impl.h's REMEX_NN_UNARY_OPS; parameters and defaults are the OpDef's).
//   - Clip (opsets 11-13 form: optional min and max as one-element inputs, read on the
//     device; the frontend turns Clip-6's attributes into inputs), float32 and float16.
//   - Pow (opset 15): float32/float16 base, float32/float16/int32/int64 exponent,
//     numpy broadcasting.
//   - PRelu (opset 16): slope broadcast to X, float32 and float16.
//   - Max, Min (opset 13): variadic with numpy broadcasting; a NaN operand gives NaN.
//     float32, float16, int32, int64. Sum, Mean (opset 13, float32 and float16):
//     folded the same way; Mean divides by the input count.
//   - IsNaN (opset 13), IsInf (opset 10; detect_negative, detect_positive): float32 and
//     float16 to bool.
//   - Mod (opset 13): fmod 0 (int32, int64; the divisor's sign) or 1 (also float32,
//     float16; the dividend's sign). An integer divisor of 0 gives 0 instead of an
//     error (the divisors are not read back).
//   - Equal, Less, Greater (opset 13), LessOrEqual, GreaterOrEqual (opset 16): bool
//     output; float32, float16, int32, int64 (and bool for Equal). And, Or, Xor, Not
//     (opset 7 / 1): bool.
// Other dtypes are UNIMPLEMENTED naming the op and dtype.

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernels/cuda/broadcast.h"
#include "kernels/cuda/skip_empty_kernel.h"
#include "kernels/ops/elementwise/cuda/elementwise_ops_impl.h"

namespace remex::kernels::cuda {
namespace {

class UnaryKernel final : public SkipEmptyKernel {
 public:
  UnaryKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, NnUnaryOp unary, float alpha,
              float beta)
      : SkipEmptyKernel(def, std::move(attrs), context), unary_(unary), alpha_(alpha), beta_(beta) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchNnUnary<T>(unary_, static_cast<const T*>(in[0].data), static_cast<T*>(out[0].data),
                              Count(out[0].shape), alpha_, beta_, stream());
    });
  }

 private:
  const NnUnaryOp unary_;
  const float alpha_, beta_;
};

// The op's attribute parameters (OpTraits::params: LeakyRelu's alpha, HardSigmoid's
// alpha and beta), their ONNX defaults where absent, as the CPU kernels read them.
KernelMake MakeUnary(CudaKernelContext context, NnUnaryOp unary) {
  return [context, unary](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
    float values[2] = {0.0f, 0.0f};
    for (size_t k = 0; k < def.traits.params.size() && k < 2; ++k) {
      const ScalarParam& p = def.traits.params[k];
      StatusOr<float> v = attrs.Float(p.attribute, p.default_value.value_or(0.0f));
      if (!v.ok()) return internal::OpError(def.name, v.status().message());
      values[k] = *v;
    }
    return std::unique_ptr<OpKernel>(
        std::make_unique<UnaryKernel>(def, attrs, context, unary, values[0], values[1]));
  };
}

class ClipKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    const void* lo = in.size() > 1 && in[1].present() ? in[1].data : nullptr;
    const void* hi = in.size() > 2 && in[2].present() ? in[2].data : nullptr;
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchClip<T>(static_cast<const T*>(in[0].data), static_cast<const T*>(lo),
                           static_cast<const T*>(hi), static_cast<T*>(out[0].data), Count(out[0].shape),
                           stream());
    });
  }
};

// Pow, PRelu, Mod and the comparison and logical ops: out = a op b with numpy
// broadcasting.
class BinaryKernel final : public SkipEmptyKernel {
 public:
  BinaryKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, NnBinaryOp binary)
      : SkipEmptyKernel(def, std::move(attrs), context), binary_(binary) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (binary_ == NnBinaryOp::kPow) return RunPow(in, out);
    NnBinaryOp binary = binary_;
    if (binary == NnBinaryOp::kMod) {  // fmod picks the rule; the shape function checked it.
      REMEX_ASSIGN_OR_RETURN(int64_t fmod, attrs().Int("fmod", 0));
      if (fmod == 1) binary = NnBinaryOp::kFmod;
    }
    return RunForOp(in[0].dtype, [&](auto tag) -> Status {
      using T = decltype(tag);
      REMEX_ASSIGN_OR_RETURN(BroadcastPlan plan, Plan(in, out));
      return Launch([&] {
        return LaunchNnBinary<T>(binary, static_cast<const T*>(in[0].data), static_cast<const T*>(in[1].data),
                                 out[0].data, Count(out[0].shape), plan, stream());
      });
    });
  }

 private:
  // Calls run(T{}) (returning Status) for `dtype`'s element type T when the op takes it
  // (elementwise_ops_impl.h's NnBinaryOp), else Unsupported naming the dtypes it takes.
  template <typename F>
  Status RunForOp(DType dtype, F&& run) const {
    switch (binary_) {
      case NnBinaryOp::kEqual:
        return RunFor<float, Half, int32_t, int64_t, bool>(
            dtype, "float32, float16, int32, int64 and bool are", run);
      case NnBinaryOp::kAnd:
      case NnBinaryOp::kOr:
      case NnBinaryOp::kXor:
        return RunFor<bool>(dtype, "bool is", run);
      case NnBinaryOp::kMod:
      case NnBinaryOp::kLess:
      case NnBinaryOp::kGreater:
      case NnBinaryOp::kLessOrEqual:
      case NnBinaryOp::kGreaterOrEqual:
        return RunFor<float, Half, int32_t, int64_t>(dtype, kFloatIntDTypes, run);
      default:  // PRelu.
        return RunFor<float, Half>(dtype, kFloatDTypes, run);
    }
  }

  // Pow: a float base, an exponent of float32, float16, int32 or int64.
  Status RunPow(std::span<const TensorRef> in, std::span<const TensorRef> out) const {
    return RunFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto a_tag) -> Status {
      using A = decltype(a_tag);
      return RunFor<float, Half, int32_t, int64_t>(
          in[1].dtype, "the exponent takes float32, float16, int32 and int64", [&](auto b_tag) -> Status {
            using B = decltype(b_tag);
            REMEX_ASSIGN_OR_RETURN(BroadcastPlan plan, Plan(in, out));
            return Launch([&] {
              return LaunchPow<A, B>(static_cast<const A*>(in[0].data), static_cast<const B*>(in[1].data),
                                     static_cast<A*>(out[0].data), Count(out[0].shape), plan, stream());
            });
          });
    });
  }

  // The broadcast plan of out = a op b.
  StatusOr<BroadcastPlan> Plan(std::span<const TensorRef> in, std::span<const TensorRef> out) const {
    StatusOr<BroadcastPlan> plan = ComputeBroadcastPlan(in[0].shape, in[1].shape, out[0].shape);
    if (!plan.ok()) return plan.status().WithContext(op());
    return plan;
  }

  const NnBinaryOp binary_;
};

// Max, Min, Sum, Mean: folded pairwise into the output.
class VariadicKernel final : public SkipEmptyKernel {
 public:
  // `mean`: Mean, the sum (binary kAdd) divided by the input count.
  VariadicKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, NnBinaryOp binary,
                 bool mean = false)
      : SkipEmptyKernel(def, std::move(attrs), context), binary_(binary), mean_(mean) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    if (binary_ != NnBinaryOp::kAdd) {
      return RunFor<float, Half, int32_t, int64_t>(in[0].dtype, kFloatIntDTypes,
                                                   [&](auto tag) { return Fold<decltype(tag)>(in, out); });
    }
    // Sum and Mean: float32 and float16 (the shape function refuses integers); Mean then
    // divides by the input count.
    return RunFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) -> Status {
      using T = decltype(tag);
      REMEX_RETURN_IF_ERROR(Fold<T>(in, out));
      if (!mean_ || in.size() == 1) return OkStatus();
      return Launch([&] {
        return LaunchDivideInPlace<T>(static_cast<T*>(out[0].data), Count(out[0].shape),
                                      static_cast<float>(in.size()), stream());
      });
    });
  }

 private:
  // Folds the inputs of element type T into the output (one input: copied).
  template <typename T>
  Status Fold(std::span<const TensorRef> in, std::span<const TensorRef> out) const {
    const TensorRef& y = out[0];
    const int64_t n = Count(y.shape);
    if (in.size() == 1) {
      if (y.data == in[0].data) return OkStatus();
      REMEX_RETURN_IF_ERROR(UseDevice());
      return CudaCheck(op(), "cudaMemcpyAsync",
                       cudaMemcpyAsync(y.data, in[0].data, static_cast<size_t>(n) * DTypeSize(y.dtype),
                                       cudaMemcpyDeviceToDevice, stream()));
    }
    // Start from an input that shares the output's buffer, if any, so that no input
    // is overwritten before it is read (as the CPU kernel does).
    size_t first = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].data == y.data) first = i;
    }
    const TensorRef* acc = &in[first];
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == first) continue;
      StatusOr<BroadcastPlan> plan = ComputeBroadcastPlan(acc->shape, in[i].shape, y.shape);
      if (!plan.ok()) return plan.status().WithContext(op());
      REMEX_RETURN_IF_ERROR(Launch([&] {
        return LaunchNnBinary<T>(binary_, static_cast<const T*>(acc->data), static_cast<const T*>(in[i].data),
                                 y.data, n, *plan, stream());
      }));
      acc = &y;
    }
    return OkStatus();
  }

  const NnBinaryOp binary_;
  const bool mean_;
};

class NotKernel final : public SkipEmptyKernel {
 public:
  using SkipEmptyKernel::SkipEmptyKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    return LaunchFor<bool>(in[0].dtype, "bool is", [&](auto) {
      return LaunchNot(static_cast<const bool*>(in[0].data), static_cast<bool*>(out[0].data),
                       Count(out[0].shape), stream());
    });
  }
};

// IsNaN, or IsInf with `inf` (detect_negative, detect_positive as the CPU reads them).
class ClassifyKernel final : public SkipEmptyKernel {
 public:
  ClassifyKernel(const OpDef& def, Attributes attrs, CudaKernelContext context, bool inf)
      : SkipEmptyKernel(def, std::move(attrs), context), inf_(inf) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(int64_t negative, attrs().Int("detect_negative", 1));
    REMEX_ASSIGN_OR_RETURN(int64_t positive, attrs().Int("detect_positive", 1));
    return LaunchFor<float, Half>(in[0].dtype, kFloatDTypes, [&](auto tag) {
      using T = decltype(tag);
      return LaunchClassify<T>(inf_, negative != 0, positive != 0, static_cast<const T*>(in[0].data),
                               static_cast<bool*>(out[0].data), Count(out[0].shape), stream());
    });
  }

 private:
  const bool inf_;
};

struct UnaryName {
  const char* name;
  NnUnaryOp op;
};

constexpr UnaryName kUnaryOps[] = {
#define REMEX_NN_UNARY_NAME(name) {#name, NnUnaryOp::k##name},
    REMEX_NN_UNARY_OPS(REMEX_NN_UNARY_NAME)
#undef REMEX_NN_UNARY_NAME
};

struct BinaryName {
  const char* name;
  NnBinaryOp op;
};

constexpr BinaryName kBinaryOps[] = {
    {"Pow", NnBinaryOp::kPow},
    {"PRelu", NnBinaryOp::kPRelu},
    {"Mod", NnBinaryOp::kMod},
    {"Equal", NnBinaryOp::kEqual},
    {"Less", NnBinaryOp::kLess},
    {"Greater", NnBinaryOp::kGreater},
    {"And", NnBinaryOp::kAnd},
    {"Or", NnBinaryOp::kOr},
    {"Xor", NnBinaryOp::kXor},
    {"LessOrEqual", NnBinaryOp::kLessOrEqual},
    {"GreaterOrEqual", NnBinaryOp::kGreaterOrEqual},
};

}  // namespace

Status AddElementwiseOpsCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  for (const UnaryName& u : kUnaryOps) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, u.name, MakeUnary(context, u.op)));
  }
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Clip", MakeCudaKernel<ClipKernel>(context)));
  for (const BinaryName& b : kBinaryOps) {
    REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, b.name, MakeCudaKernel<BinaryKernel>(context, b.op)));
  }
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Max", MakeCudaKernel<VariadicKernel>(context, NnBinaryOp::kMax)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Min", MakeCudaKernel<VariadicKernel>(context, NnBinaryOp::kMin)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "Sum", MakeCudaKernel<VariadicKernel>(context, NnBinaryOp::kAdd)));
  REMEX_RETURN_IF_ERROR(
      AddCudaKernel(registry, "Mean", MakeCudaKernel<VariadicKernel>(context, NnBinaryOp::kAdd, true)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "IsNaN", MakeCudaKernel<ClassifyKernel>(context, false)));
  REMEX_RETURN_IF_ERROR(AddCudaKernel(registry, "IsInf", MakeCudaKernel<ClassifyKernel>(context, true)));
  return AddCudaKernel(registry, "Not", MakeCudaKernel<NotKernel>(context));
}

}  // namespace remex::kernels::cuda
