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
// picks a NaN. float16 computes in float32. float32 rows along the last axis (inner 1:
// the attention softmax) take loops written to vectorise (SoftmaxRowsFloat32, compiled
// for AVX2 and AVX-512 too) with kernels/scalar_ops.h's float exp; the rest loops
// element by element.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/math/softmax_cpu.h"
#include "kernels/scalar_ops.h"

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

// Declared in softmax_cpu.h. softmax.cc is compiled with -ffp-contract=off (sources.cmake):
// no clone fuses a multiply-add.
REMEX_CPU_CLONES void SoftmaxRowsFloat32(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  constexpr int64_t kLanes = 16;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float lane[kLanes];
    for (int64_t k = 0; k < kLanes; ++k) lane[k] = -std::numeric_limits<float>::infinity();
    int64_t a = 0;
    for (; a + kLanes <= n; a += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) lane[k] = xr[a + k] > lane[k] ? xr[a + k] : lane[k];  // NaN skipped
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < kLanes; ++k) mx = lane[k] > mx ? lane[k] : mx;
    for (; a < n; ++a) mx = xr[a] > mx ? xr[a] : mx;
    // sum(exp(x - max)), added in lanes; Softmax keeps the exponentials in y.
    auto term = [&](int64_t i) {
      const float e = scalar::math::Exp(xr[i] - mx);
      if (!log) yr[i] = e;
      return e;
    };
    for (int64_t k = 0; k < kLanes; ++k) lane[k] = 0.0f;
    for (a = 0; a + kLanes <= n; a += kLanes) {
      for (int64_t k = 0; k < kLanes; ++k) lane[k] += term(a + k);
    }
    float sum = 0.0f;
    for (int64_t k = 0; k < kLanes; ++k) sum += lane[k];
    for (; a < n; ++a) sum += term(a);
    if (log) {
      const float log_sum = std::log(sum);
      for (a = 0; a < n; ++a) yr[a] = (xr[a] - mx) - log_sum;
    } else {
      const float inv = 1.0f / sum;
      for (a = 0; a < n; ++a) yr[a] *= inv;
    }
  }
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
      if constexpr (std::is_same_v<T, float>) {
        if (v.inner == 1 && v.n > 0 && mode_ != SoftmaxMode::kHardmax) {
          ParallelFor(rows, grain, [&](int64_t r0, int64_t r1, int) {
            SoftmaxRowsFloat32(x + r0 * v.n, y + r0 * v.n, r1 - r0, v.n, mode_ == SoftmaxMode::kLogSoftmax);
          });
          return OkStatus();
        }
      }
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
