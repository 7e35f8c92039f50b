// Softmax, LogSoftmax and Hardmax: shape functions and CPU kernels (ONNX semantics;
// https://onnx.ai/onnx/operators/onnx__Softmax.html, onnx__LogSoftmax.html,
// onnx__Hardmax.html). float16, float32, float64; the output has the input's dtype
// and shape.
//
// Two entries each. From opset 13 the op normalises along `axis` (default -1, in
// [-rank, rank)); opsets 1-12 see the input as 2-D [prod(shape[:axis]),
// prod(shape[axis:])] (axis default 1, in [-rank, rank]) and normalise each row.
// Either way the input is an [outer, n, inner] view normalised along n
// (SoftmaxViewOf, shared with the CUDA kernels):
//   Softmax     y = exp(x - max) / sum(exp(x - max))
//   LogSoftmax  y = (x - max) - log(sum(exp(x - max)))
//   Hardmax     y = 1 at the first maximum along n, 0 elsewhere
// max skips NaN, so a NaN makes its whole Softmax/LogSoftmax row NaN; Hardmax never
// picks a NaN. float16 computes in float32.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"

namespace remex::kernels::internal {

StatusOr<SoftmaxView> SoftmaxViewOf(std::string_view op, bool flatten, const Attributes& attrs, const Shape& shape) {
  StatusOr<int64_t> attr = attrs.Int("axis", flatten ? 1 : -1);
  if (!attr.ok()) return OpError(op, attr.status().message());
  const int64_t rank = static_cast<int64_t>(shape.size());
  SoftmaxView v;
  if (flatten) {
    // Opsets < 13 accept axis in [-rank, rank]; a rank-0 input is one element.
    const int64_t axis = *attr < 0 ? *attr + rank : *attr;
    if (axis < 0 || axis > rank) {
      return OpError(op, "axis " + std::to_string(*attr) + " is out of range for rank " + std::to_string(rank));
    }
    for (int64_t i = 0; i < axis; ++i) v.outer *= shape[i];
    for (int64_t i = axis; i < rank; ++i) v.n *= shape[i];
    return v;
  }
  if (rank == 0) return OpError(op, "input must have rank >= 1");
  REMEX_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(op, *attr, rank));
  for (int64_t i = 0; i < axis; ++i) v.outer *= shape[i];
  v.n = shape[axis];
  for (int64_t i = axis + 1; i < rank; ++i) v.inner *= shape[i];
  return v;
}

std::string_view SoftmaxOpName(SoftmaxMode mode) {
  switch (mode) {
    case SoftmaxMode::kSoftmax: return "Softmax";
    case SoftmaxMode::kLogSoftmax: return "LogSoftmax";
    case SoftmaxMode::kHardmax: return "Hardmax";
  }
  return "Softmax";
}

namespace {

StatusOr<std::vector<TensorInfo>> InferSoftmax(std::string_view op, bool flatten, const Attributes& attrs,
                                               std::span<const ShapeFnArg> in) {
  if (in.size() != 1) return OpError(op, "expects 1 input");
  if (!IsFloatType(in[0].dtype)) return OpError(op, "unsupported dtype " + std::string(DTypeName(in[0].dtype)));
  REMEX_RETURN_IF_ERROR(SoftmaxViewOf(op, flatten, attrs, in[0].shape).status());
  return std::vector<TensorInfo>{{in[0].dtype, in[0].shape}};
}

// The entry for opsets 1-12 (`since` 1) or 13+.
OpDef SoftmaxDef(SoftmaxMode mode, int since) {
  const bool flatten = since < 13;
  const std::string_view op = SoftmaxOpName(mode);
  OpDef def;
  def.name = std::string(op);
  def.since_version = since;
  if (flatten) def.end_version = 12;
  def.infer = [op, flatten](const Attributes& attrs, std::span<const ShapeFnArg> in) {
    return InferSoftmax(op, flatten, attrs, in);
  };
  return def;
}

// Elements per compute thread at least (smaller inputs run on the calling thread).
constexpr int64_t kGrainElements = 16384;

class SoftmaxKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<SoftmaxKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                         SoftmaxMode mode) {
    StatusOr<int64_t> axis = attrs.Int("axis", 0);
    if (!axis.ok()) return OpError(def.name, axis.status().message());
    // Before opset 13 the input is flattened to 2-D at `axis`.
    return std::make_unique<SoftmaxKernel>(def, attrs, mode, def.since_version < 13);
  }
  SoftmaxKernel(const OpDef& def, const Attributes& attrs, SoftmaxMode mode, bool flatten)
      : ValidatedKernel(def, attrs), mode_(mode), flatten_(flatten) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(SoftmaxView v, SoftmaxViewOf(op(), flatten_, attrs(), in[0].shape));
    return DispatchFloat(op(), in[0].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      // Rows (outer x inner) are independent: the compute threads take runs of them.
      const int64_t rows = v.outer * v.inner;
      const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(v.n, 1));
      ParallelFor(rows, grain, [&](int64_t r0, int64_t r1, int) {
        std::vector<C> buf(static_cast<size_t>(v.n));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t o = r / v.inner, i = r % v.inner;
          const int64_t base = o * v.n * v.inner + i;
          C mx = -std::numeric_limits<C>::infinity();
          int64_t arg = 0;
          for (int64_t a = 0; a < v.n; ++a) {
            buf[a] = Load(x[base + a * v.inner]);
            if (buf[a] > mx) {
              mx = buf[a];
              arg = a;
            }
          }
          if (mode_ == SoftmaxMode::kHardmax) {
            for (int64_t a = 0; a < v.n; ++a) y[base + a * v.inner] = Store<T>(C(a == arg ? 1 : 0));
            continue;
          }
          C sum = 0;
          if (mode_ == SoftmaxMode::kLogSoftmax) {
            for (int64_t a = 0; a < v.n; ++a) sum += std::exp(buf[a] - mx);
            const C log_sum = std::log(sum);
            for (int64_t a = 0; a < v.n; ++a) y[base + a * v.inner] = Store<T>((buf[a] - mx) - log_sum);
            continue;
          }
          for (int64_t a = 0; a < v.n; ++a) {
            buf[a] = std::exp(buf[a] - mx);
            sum += buf[a];
          }
          const C inv = C(1) / sum;
          for (int64_t a = 0; a < v.n; ++a) y[base + a * v.inner] = Store<T>(buf[a] * inv);
        }
      });
      return OkStatus();
    });
  }

 private:
  const SoftmaxMode mode_;
  const bool flatten_;
};

constexpr SoftmaxMode kModes[] = {SoftmaxMode::kSoftmax, SoftmaxMode::kLogSoftmax, SoftmaxMode::kHardmax};

}  // namespace

Status AddSoftmaxOpDefs(KernelRegistry& registry) {
  for (SoftmaxMode mode : kModes) {
    for (int since : {1, 13}) REMEX_RETURN_IF_ERROR(registry.AddOp(SoftmaxDef(mode, since)));
  }
  return OkStatus();
}

Status AddSoftmaxCpuKernels(KernelRegistry& registry) {
  for (SoftmaxMode mode : kModes) {
    for (int since : {1, 13}) {
      REMEX_RETURN_IF_ERROR(registry.AddKernel(SoftmaxDef(mode, since).name, since, DeviceKind::kCpu,
                                               MakeKernel<SoftmaxKernel>(mode)));
    }
  }
  return OkStatus();
}

}  // namespace remex::kernels::internal
