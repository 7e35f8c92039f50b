// DFT, STFT and MelWeightMatrix: views, shape functions and CPU kernels (ONNX DFT-17,
// STFT-17, MelWeightMatrix-17; https://onnx.ai/onnx/operators/onnx__DFT.html and its
// siblings, with ONNX's reference implementations op_dft.py, op_stft.py and
// op_mel_weight_matrix.py). What each computes is documented with its view in
// kernels/ops/signal/spectral_view.h; the per-element formulas are kernels/ops/signal/spectral_ops.h's,
// shared with the CUDA kernels, and the kernels here call them the same way the device
// code does, so both give the same bits.
//
// DFT and STFT are naive transforms: each output bin sums its used input samples in
// double (O(n^2) per transform; TODO(perf): an FFT for long transforms). Their lengths
// (dft_length, frame_step, frame_length) are read on the host (ShapeDep::kData), as are
// all of MelWeightMatrix's inputs.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/float_double.h"
#include "kernels/internal.h"
#include "kernels/op_attrs.h"
#include "kernels/ops/signal/spectral_ops.h"
#include "kernels/ops/signal/spectral_view.h"
#include "kernels/transform_common.h"

namespace remex::kernels::internal {
namespace {

constexpr int64_t kMaxMelElements = int64_t{1} << 28;

bool IsSpectralFloat(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16;
}

// The one int32 or int64 value of input i (host memory), or nullopt when it is absent
// or empty and `optional`.
StatusOr<std::optional<int64_t>> ScalarInt(std::string_view op, std::span<const ShapeFnArg> in, size_t i,
                                           std::string_view what, bool optional) {
  if (i >= in.size() || !in[i].present) {
    if (optional) return std::optional<int64_t>();
    return OpError(op, "expects " + std::string(what));
  }
  const ShapeFnArg& a = in[i];
  if (a.dtype != DType::kInt32 && a.dtype != DType::kInt64) {
    return OpError(op, std::string(what) + " must be int32 or int64, got " + std::string(DTypeName(a.dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, a.shape));
  if (n == 0 && optional) return std::optional<int64_t>();
  if (n != 1) return OpError(op, std::string(what) + " must hold one value, got " + std::to_string(n));
  if (a.data == nullptr) return OpError(op, std::string(what) + " has no data");
  if (a.dtype == DType::kInt32) {
    int32_t v;
    std::memcpy(&v, a.data, sizeof v);
    return std::optional<int64_t>(v);
  }
  int64_t v;
  std::memcpy(&v, a.data, sizeof v);
  return std::optional<int64_t>(v);
}

// The one float16/32/64 value of input i (host memory) as a double.
StatusOr<double> ScalarFloat(std::string_view op, std::span<const ShapeFnArg> in, size_t i,
                             std::string_view what) {
  if (i >= in.size() || !in[i].present) return OpError(op, "expects " + std::string(what));
  const ShapeFnArg& a = in[i];
  if (!IsSpectralFloat(a.dtype)) {
    return OpError(op, std::string(what) + " must be float16, float32 or float64, got " +
                           std::string(DTypeName(a.dtype)));
  }
  REMEX_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(op, a.shape));
  if (n != 1) return OpError(op, std::string(what) + " must hold one value, got " + std::to_string(n));
  if (a.data == nullptr) return OpError(op, std::string(what) + " has no data");
  switch (a.dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, a.data, sizeof v);
      return static_cast<double>(v);
    }
    case DType::kFloat64: {
      double v;
      std::memcpy(&v, a.data, sizeof v);
      return v;
    }
    default: {
      Half v;
      std::memcpy(&v.bits, a.data, sizeof v.bits);
      return static_cast<double>(HalfToFloat(v));
    }
  }
}

// A DFT length in [1, kMaxDftLength].
Status CheckDftLength(std::string_view op, std::string_view what, int64_t n) {
  if (n < 1 || n > spectral::kMaxDftLength) {
    return OpError(op, std::string(what) + " must be in [1, " + std::to_string(spectral::kMaxDftLength) +
                           "], got " + std::to_string(n));
  }
  return OkStatus();
}

StatusOr<DType> OutputDatatype(std::string_view op, const Attributes& attrs) {
  StatusOr<int64_t> t = attrs.Int("output_datatype", 1);
  if (!t.ok()) return OpError(op, t.status().message());
  std::optional<DType> dt;
  if (*t > 0 && *t <= std::numeric_limits<int32_t>::max()) dt = DTypeFromOnnx(static_cast<int32_t>(*t));
  if (!dt || !IsNumericType(*dt)) {
    return OpError(op, "output_datatype " + std::to_string(*t) + " is not a numeric data type Remex holds");
  }
  return *dt;
}

}  // namespace

StatusOr<DftView> DftViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "DFT";
  if (in.empty() || !in[0].present) return OpError(op, "expects input");
  if (!IsSpectralFloat(in[0].dtype)) {
    return OpError(op,
                   "input must be float16, float32 or float64, got " + std::string(DTypeName(in[0].dtype)));
  }
  const Shape& s = in[0].shape;
  const int64_t r = static_cast<int64_t>(s.size());
  if (r < 2 || (s[r - 1] != 1 && s[r - 1] != 2)) {
    return OpError(op, "input must be [..., signal, 1 or 2] (real or complex), got " + ShapeToString(s));
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  StatusOr<int64_t> axis_attr = attrs.Int("axis", 1);
  if (!axis_attr.ok()) return OpError(op, axis_attr.status().message());
  int64_t axis = *axis_attr;
  if (axis < -r || axis > r - 2 || axis == -1) {
    return OpError(op, "axis must be in [" + std::to_string(-r) + ", -2] or [0, " + std::to_string(r - 2) +
                           "] for an input of rank " + std::to_string(r) + ", got " + std::to_string(axis));
  }
  if (axis < 0) axis += r;
  DftView v;
  v.dtype = in[0].dtype;
  spectral::DftPlan& p = v.plan;
  REMEX_ASSIGN_OR_RETURN(p.inverse, BoolAttr(op, attrs, "inverse", 0));
  REMEX_ASSIGN_OR_RETURN(const bool onesided, BoolAttr(op, attrs, "onesided", 0));
  for (int64_t d = 0; d < axis; ++d) p.outer *= s[d];
  for (int64_t d = axis + 1; d < r - 1; ++d) p.inner *= s[d];
  p.signal = s[axis];
  p.channels = s[r - 1];
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> length, ScalarInt(op, in, 1, "dft_length", true));
  p.n_fft = length.value_or(p.signal);
  REMEX_RETURN_IF_ERROR(CheckDftLength(op, length ? "dft_length" : "the signal length along axis", p.n_fft));
  p.used = std::min(p.signal, p.n_fft);
  p.bins = onesided ? p.n_fft / 2 + 1 : p.n_fft;
  v.output = s;
  v.output[axis] = p.bins;
  v.output[r - 1] = 2;
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, v.output));
  return v;
}

StatusOr<StftView> StftViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "STFT";
  if (in.size() < 2 || !in[0].present) return OpError(op, "expects signal and frame_step");
  if (!IsSpectralFloat(in[0].dtype)) {
    return OpError(op,
                   "signal must be float16, float32 or float64, got " + std::string(DTypeName(in[0].dtype)));
  }
  const Shape& s = in[0].shape;
  if (s.size() != 3 || (s[2] != 1 && s[2] != 2)) {
    return OpError(op, "signal must be [batch, signal_length, 1 or 2], got " + ShapeToString(s));
  }
  REMEX_RETURN_IF_ERROR(CheckedNumElements(op, s).status());
  StftView v;
  v.dtype = in[0].dtype;
  spectral::StftPlan& p = v.plan;
  p.batch = s[0];
  p.signal = s[1];
  p.channels = s[2];
  REMEX_ASSIGN_OR_RETURN(const bool onesided, BoolAttr(op, attrs, "onesided", 1));
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> step, ScalarInt(op, in, 1, "frame_step", false));
  if (*step < 1) return OpError(op, "frame_step must be >= 1, got " + std::to_string(*step));
  p.frame_step = *step;
  int64_t window_length = -1;
  if (in.size() > 2 && in[2].present) {
    if (in[2].dtype != v.dtype) {
      return OpError(op, "window must be " + std::string(DTypeName(v.dtype)) + " as the signal, got " +
                             std::string(DTypeName(in[2].dtype)));
    }
    if (in[2].shape.size() != 1 || in[2].shape[0] < 1) {
      return OpError(op, "window must be 1-D and not empty, got " + ShapeToString(in[2].shape));
    }
    window_length = in[2].shape[0];
    p.has_window = true;
  }
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> length, ScalarInt(op, in, 3, "frame_length", true));
  p.n_fft = length ? *length : (p.has_window ? window_length : p.signal);
  REMEX_RETURN_IF_ERROR(CheckDftLength(op,
                                       length         ? "frame_length"
                                       : p.has_window ? "the window length"
                                                      : "the signal length",
                                       p.n_fft));
  if (p.n_fft > p.signal) {
    return OpError(op, "frame_length " + std::to_string(p.n_fft) + " must be at most the signal length " +
                           std::to_string(p.signal));
  }
  p.used = p.has_window ? std::min(window_length, p.n_fft) : p.n_fft;
  p.frames = 1 + (p.signal - p.n_fft) / p.frame_step;
  p.bins = onesided ? p.n_fft / 2 + 1 : p.n_fft;
  v.output = {p.batch, p.frames, p.bins, 2};
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, v.output));
  return v;
}

StatusOr<MelWeightMatrixView> MelWeightMatrixViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  constexpr std::string_view op = "MelWeightMatrix";
  MelWeightMatrixView v;
  REMEX_ASSIGN_OR_RETURN(v.dtype, OutputDatatype(op, attrs));
  if (in.size() != 5) return OpError(op, "expects 5 inputs, got " + std::to_string(in.size()));
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> mel_bins, ScalarInt(op, in, 0, "num_mel_bins", false));
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> dft_length, ScalarInt(op, in, 1, "dft_length", false));
  REMEX_ASSIGN_OR_RETURN(std::optional<int64_t> sample_rate, ScalarInt(op, in, 2, "sample_rate", false));
  REMEX_ASSIGN_OR_RETURN(const double lower, ScalarFloat(op, in, 3, "lower_edge_hertz"));
  REMEX_ASSIGN_OR_RETURN(const double upper, ScalarFloat(op, in, 4, "upper_edge_hertz"));
  if (*mel_bins < 1 || *mel_bins > spectral::kMaxMelBins) {
    return OpError(op, "num_mel_bins must be in [1, " + std::to_string(spectral::kMaxMelBins) + "], got " +
                           std::to_string(*mel_bins));
  }
  REMEX_RETURN_IF_ERROR(CheckDftLength(op, "dft_length", *dft_length));
  if (*sample_rate < 1) return OpError(op, "sample_rate must be >= 1, got " + std::to_string(*sample_rate));
  if (!std::isfinite(lower) || !std::isfinite(upper)) {
    return OpError(op, "lower_edge_hertz and upper_edge_hertz must be finite, got " + std::to_string(lower) +
                           " and " + std::to_string(upper));
  }
  v.num_mel_bins = *mel_bins;
  v.spectrogram_bins = *dft_length / 2 + 1;
  v.output = {v.spectrogram_bins, v.num_mel_bins};
  if (v.spectrogram_bins * v.num_mel_bins > kMaxMelElements) {
    return OpError(op, "the matrix " + ShapeToString(v.output) + " has more than " +
                           std::to_string(kMaxMelElements) + " elements");
  }
  REMEX_RETURN_IF_ERROR(CheckOutputSize(op, v.dtype, v.output));
  v.bins.resize(static_cast<size_t>(v.num_mel_bins + 2));
  for (int64_t i = 0; i < v.num_mel_bins + 2; ++i) {
    const double bin = spectral::MelFrequencyBin(i, v.num_mel_bins, *dft_length, *sample_rate, lower, upper);
    if (!(bin >= 0.0 && bin <= static_cast<double>(v.spectrogram_bins))) {
      return OpError(op, "frequency bin " + std::to_string(i) + " (" + std::to_string(bin) +
                             ") is out of range [0, " + std::to_string(v.spectrogram_bins) +
                             "] (lower_edge_hertz " + std::to_string(lower) + ", upper_edge_hertz " +
                             std::to_string(upper) + ")");
    }
    v.bins[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  // The reference writes the center of mel bin i unless its rising edge is reversed.
  for (int64_t i = 0; i < v.num_mel_bins; ++i) {
    const int64_t lower_bin = v.bins[i], center = v.bins[i + 1];
    if (center >= lower_bin && center >= v.spectrogram_bins) {
      return OpError(op, "the center frequency bin " + std::to_string(center) + " of mel bin " +
                             std::to_string(i) + " is out of range [0, " +
                             std::to_string(v.spectrogram_bins) + ")");
    }
  }
  return v;
}

void WriteMelWeightMatrix(const MelWeightMatrixView& v, void* out) {
  (void)DispatchNumeric("MelWeightMatrix", v.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* y = static_cast<T*>(out);
    for (int64_t j = 0; j < v.spectrogram_bins; ++j) {
      for (int64_t i = 0; i < v.num_mel_bins; ++i) {
        const double w = spectral::MelWeight(j, v.bins[i], v.bins[i + 1], v.bins[i + 2]);
        T& e = y[j * v.num_mel_bins + i];
        if constexpr (std::is_same_v<T, Half>) {
          e = DoubleToHalf(w);
        } else {
          e = static_cast<T>(w);  // In [0, 1]: integers truncate as numpy's astype.
        }
      }
    }
    return OkStatus();
  });
}

namespace {

// ---------------------------------------------------------------------------
// DFT and STFT.

// x * w rounded to T, as numpy multiplies the frame by the window.
template <typename T>
double WindowedSample(T x, T w) {
  if constexpr (std::is_same_v<T, Half>) {
    return static_cast<double>(HalfToFloat(FloatToHalf(HalfToFloat(x) * HalfToFloat(w))));
  } else {
    return static_cast<double>(x * w);
  }
}

// UnitRoot(m, n) for every m in [0, n).
std::vector<spectral::Complex> UnitRoots(int64_t n) {
  std::vector<spectral::Complex> roots(static_cast<size_t>(n));
  for (int64_t m = 0; m < n; ++m) roots[static_cast<size_t>(m)] = spectral::UnitRoot(m, n);
  return roots;
}

StatusOr<std::vector<TensorInfo>> InferDft(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(DftView v, DftViewOf(attrs, in));
  return std::vector<TensorInfo>{{v.dtype, v.output}};
}

OpDef DftDef() {
  OpDef def;
  def.name = "DFT";
  def.since_version = 17;
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferDft;
  return def;
}

class DftKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(DftView v, DftViewOf(attrs(), ToShapeArgs(in)));
    const spectral::DftPlan& p = v.plan;
    if (NumElements(v.output).value_or(0) == 0) return OkStatus();
    const std::vector<spectral::Complex> roots = UnitRoots(p.n_fft);
    auto root = [&](int64_t m) { return roots[static_cast<size_t>(m)]; };
    return DispatchFloat(op(), v.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      T* y = DataAs<T>(out[0]);
      for (int64_t o = 0; o < p.outer; ++o) {
        for (int64_t k = 0; k < p.bins; ++k) {
          for (int64_t i = 0; i < p.inner; ++i) {
            const T* xs = x + (o * p.signal * p.inner + i) * p.channels;
            auto load = [&](int64_t t) {
              const T* e = xs + t * p.inner * p.channels;
              return spectral::Complex{ToDouble(e[0]), p.channels == 2 ? ToDouble(e[1]) : 0.0};
            };
            const spectral::Complex c = spectral::DftValue(load, root, p.used, k, p.n_fft, p.inverse);
            T* ye = y + ((o * p.bins + k) * p.inner + i) * 2;
            ye[0] = FloatFromDouble<T>(c.re);
            ye[1] = FloatFromDouble<T>(c.im);
          }
        }
      }
      return OkStatus();
    });
  }
};

StatusOr<std::vector<TensorInfo>> InferStft(const Attributes& attrs, std::span<const ShapeFnArg> in) {
  REMEX_ASSIGN_OR_RETURN(StftView v, StftViewOf(attrs, in));
  return std::vector<TensorInfo>{{v.dtype, v.output}};
}

OpDef StftDef() {
  OpDef def;
  def.name = "STFT";
  def.since_version = 17;
  def.min_inputs = 2;
  def.max_inputs = 4;
  def.input_deps = {ShapeDep::kShape, ShapeDep::kData, ShapeDep::kShape, ShapeDep::kData};
  def.infer = InferStft;
  return def;
}

class StftKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(StftView v, StftViewOf(attrs(), ToShapeArgs(in)));
    const spectral::StftPlan& p = v.plan;
    if (NumElements(v.output).value_or(0) == 0) return OkStatus();
    const std::vector<spectral::Complex> roots = UnitRoots(p.n_fft);
    auto root = [&](int64_t m) { return roots[static_cast<size_t>(m)]; };
    return DispatchFloat(op(), v.dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* x = DataAs<const T>(in[0]);
      const T* w = p.has_window ? DataAs<const T>(in[2]) : nullptr;
      T* y = DataAs<T>(out[0]);
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t f = 0; f < p.frames; ++f) {
          const int64_t start = f * p.frame_step;
          const T* xs = x + b * p.signal * p.channels;
          auto load = [&](int64_t t) {
            const int64_t at = start + t;
            if (at >= p.signal) return spectral::Complex{};
            const T* e = xs + at * p.channels;
            if (w == nullptr)
              return spectral::Complex{ToDouble(e[0]), p.channels == 2 ? ToDouble(e[1]) : 0.0};
            return spectral::Complex{WindowedSample(e[0], w[t]),
                                     p.channels == 2 ? WindowedSample(e[1], w[t]) : 0.0};
          };
          for (int64_t k = 0; k < p.bins; ++k) {
            const spectral::Complex c = spectral::DftValue(load, root, p.used, k, p.n_fft, false);
            T* ye = y + ((b * p.frames + f) * p.bins + k) * 2;
            ye[0] = FloatFromDouble<T>(c.re);
            ye[1] = FloatFromDouble<T>(c.im);
          }
        }
      }
      return OkStatus();
    });
  }
};

// ---------------------------------------------------------------------------
// MelWeightMatrix.

OpDef MelWeightMatrixDef() {
  OpDef def;
  def.name = "MelWeightMatrix";
  def.since_version = 17;
  def.min_inputs = def.max_inputs = 5;
  def.input_deps = {ShapeDep::kData};
  def.infer = [](const Attributes& attrs,
                 std::span<const ShapeFnArg> in) -> StatusOr<std::vector<TensorInfo>> {
    REMEX_ASSIGN_OR_RETURN(MelWeightMatrixView v, MelWeightMatrixViewOf(attrs, in));
    return std::vector<TensorInfo>{{v.dtype, v.output}};
  };
  def.output_dtypes = [](const Attributes& attrs, std::span<const DType>) {
    StatusOr<DType> dt = OutputDatatype("MelWeightMatrix", attrs);
    return std::vector<DType>{dt.ok() ? *dt : DType::kUndefined};
  };
  return def;
}

class MelWeightMatrixKernel final : public ValidatedKernel {
 public:
  using ValidatedKernel::ValidatedKernel;

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    REMEX_ASSIGN_OR_RETURN(MelWeightMatrixView v, MelWeightMatrixViewOf(attrs(), ToShapeArgs(in)));
    WriteMelWeightMatrix(v, out[0].data);
    return OkStatus();
  }
};

}  // namespace

Status AddSpectralOpDefs(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(registry.AddOp(DftDef()));
  REMEX_RETURN_IF_ERROR(registry.AddOp(StftDef()));
  return registry.AddOp(MelWeightMatrixDef());
}

Status AddSpectralCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddCpuKernel<DftKernel>(registry, "DFT"));
  REMEX_RETURN_IF_ERROR(AddCpuKernel<StftKernel>(registry, "STFT"));
  return AddCpuKernel<MelWeightMatrixKernel>(registry, "MelWeightMatrix");
}

}  // namespace remex::kernels::internal
