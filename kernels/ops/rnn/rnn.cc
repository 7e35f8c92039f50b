// LSTM, GRU and RNN: the CPU kernel (ONNX semantics, opsets 7-17; the op definitions,
// shapes and attributes are in rnn_def.cc).
//
// float16 is computed in float32, float32 uses oneDNN's sgemm for the gate products,
// float64 a plain loop.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "kernels/ops/rnn/rnn_def.h"

namespace remex::kernels::internal {
namespace {

using Act = RnnAct;
using Activation = RnnActivation;

// ---------------------------------------------------------------------------
// Activations.

// Applies `a` in place to v[0..n). The switch sits outside the loops.
template <typename C>
void ApplyActivation(const Activation& a, C* v, int64_t n) {
  const C alpha = static_cast<C>(a.alpha), beta = static_cast<C>(a.beta);
  switch (a.kind) {
    case Act::kRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > C(0) ? v[i] : C(0);
      break;
    case Act::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]);
      break;
    case Act::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = C(1) / (C(1) + std::exp(-v[i]));
      break;
    case Act::kAffine:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
      break;
    case Act::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= C(0) ? v[i] : alpha * v[i];
      break;
    case Act::kThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > alpha ? v[i] : C(0);
      break;
    case Act::kScaledTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * std::tanh(beta * v[i]);
      break;
    case Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(alpha * v[i] + beta, C(0), C(1));
      break;
    case Act::kElu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= C(0) ? v[i] : alpha * (std::exp(v[i]) - C(1));
      break;
    case Act::kSoftsign:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (C(1) + std::abs(v[i]));
      break;
    case Act::kSoftplus:
      // log(1 + exp(x)) without overflow for large x.
      for (int64_t i = 0; i < n; ++i) {
        v[i] = v[i] > C(0) ? v[i] + std::log1p(std::exp(-v[i])) : std::log1p(std::exp(v[i]));
      }
      break;
  }
}

// ---------------------------------------------------------------------------
// Kernel.

// Row-by-row dot products for what oneDNN's sgemm does not pay off on: float64, and
// the per-step recurrent products of a few batch entries (a parallel region per step
// costs more than it saves there). Eight lanes let the compiler vectorise the sums.
template <typename C>
void GemmABtLoop(const C* a, int64_t lda, const C* b, int64_t ldb, C* out, int64_t ldc,
                 int64_t m, int64_t n, int64_t k, bool accumulate) {
  constexpr int kLanes = 8;
  for (int64_t i = 0; i < m; ++i) {
    const C* arow = a + i * lda;
    C* orow = out + i * ldc;
    for (int64_t j = 0; j < n; ++j) {
      const C* brow = b + j * ldb;
      C lane[kLanes] = {};
      int64_t p = 0;
      for (; p + kLanes <= k; p += kLanes) {
        for (int l = 0; l < kLanes; ++l) lane[l] += arow[p + l] * brow[p + l];
      }
      C acc = 0;
      for (; p < k; ++p) acc += arow[p] * brow[p];
      for (int l = 0; l < kLanes; ++l) acc += lane[l];
      orow[j] = accumulate ? orow[j] + acc : acc;
    }
  }
}

// out[m x n] (leading dim ldc) = a[m x k] (lda) * b[n x k]^T (ldb), plus out when
// `accumulate`.
template <typename C>
Status GemmABt(const C* a, int64_t lda, const C* b, int64_t ldb, C* out, int64_t ldc, int64_t m,
               int64_t n, int64_t k, bool accumulate) {
  constexpr int64_t kSmallM = 8;
  if (m == 0 || n == 0) return OkStatus();
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill(out + i * ldc, out + i * ldc + n, C(0));
    }
    return OkStatus();
  }
  if constexpr (std::is_same_v<C, float>) {
    if (m > kSmallM) {
      dnnl::status st = dnnl::sgemm('N', 'T', m, n, k, 1.0f, a, lda, b, ldb,
                                    accumulate ? 1.0f : 0.0f, out, ldc);
      if (st != dnnl::status::success) {
        return Internal("oneDNN sgemm failed with status " + std::to_string(static_cast<int>(st)));
      }
      return OkStatus();
    }
  }
  GemmABtLoop<C>(a, lda, b, ldb, out, ldc, m, n, k, accumulate);
  return OkStatus();
}

// The op's tensors in the compute type (absent optional inputs are nullptr).
template <typename C>
struct RnnBuffers {
  const C* x = nullptr;
  const C* w = nullptr;
  const C* r = nullptr;
  const C* b = nullptr;
  const C* init_h = nullptr;
  const C* init_c = nullptr;
  const C* p = nullptr;
  C* y = nullptr;
  C* y_h = nullptr;
  C* y_c = nullptr;
};

template <typename C>
class RnnRunner {
 public:
  RnnRunner(const RnnSpec& spec, const RnnAttrs& a, const RnnDims& d,
            const std::vector<int64_t>& lens, const RnnBuffers<C>& io)
      : spec_(spec), a_(a), d_(d), lens_(lens), io_(io) {}

  Status Run() {
    const int64_t h = d_.hidden, g = spec_.gates;
    if (io_.y) {
      std::fill(io_.y, io_.y + d_.seq * d_.dirs * d_.batch * h, C(0));
    }
    xw_.resize(static_cast<size_t>(d_.seq * d_.batch * g * h));
    hr_.resize(static_cast<size_t>(d_.batch * g * h));
    h_.resize(static_cast<size_t>(d_.batch * h));
    gates_.resize(static_cast<size_t>(g * h));
    if (spec_.cell == RnnCell::kLstm) c_.resize(h_.size());
    if (spec_.cell == RnnCell::kGru) rh_.resize(h_.size());
    for (int64_t dir = 0; dir < d_.dirs; ++dir) REMEX_RETURN_IF_ERROR(RunDirection(dir));
    return OkStatus();
  }

 private:
  // Offset (in elements) of batch entry b's state for direction dir in initial_h / Y_h.
  int64_t StateOffset(int64_t dir, int64_t b) const {
    return (d_.layout0() ? dir * d_.batch + b : b * d_.dirs + dir) * d_.hidden;
  }

  Status RunDirection(int64_t dir) {
    const int64_t h = d_.hidden, g = spec_.gates, gh = g * h;
    const bool reverse = a_.reverse || dir == 1;
    const C* w = io_.w + dir * gh * d_.input;
    const C* r = io_.r + dir * gh * h;
    const C* bias = io_.b ? io_.b + dir * 2 * gh : nullptr;
    const C* peep = io_.p ? io_.p + dir * 3 * h : nullptr;
    const Activation* acts = a_.acts.data() + dir * spec_.num_acts;
    const bool lbr = spec_.cell == RnnCell::kGru && a_.linear_before_reset;

    // Input products for every step at once, rows in X's order, with the biases that
    // are plain sums (the GRU h gate's R bias stays apart under linear_before_reset).
    const int64_t rows = d_.seq * d_.batch;
    REMEX_RETURN_IF_ERROR(
        GemmABt<C>(io_.x, d_.input, w, d_.input, xw_.data(), gh, rows, gh, d_.input, false));
    rbh_.assign(static_cast<size_t>(h), C(0));
    if (bias) {
      std::vector<C> sum(bias, bias + gh);
      for (int64_t j = 0; j < gh; ++j) sum[j] += bias[gh + j];
      if (lbr) {
        for (int64_t j = 0; j < h; ++j) {
          sum[2 * h + j] = bias[2 * h + j];
          rbh_[j] = bias[gh + 2 * h + j];
        }
      }
      for (int64_t row = 0; row < rows; ++row) {
        C* xr = xw_.data() + row * gh;
        for (int64_t j = 0; j < gh; ++j) xr[j] += sum[j];
      }
    }

    for (int64_t b = 0; b < d_.batch; ++b) {
      C* hb = h_.data() + b * h;
      if (io_.init_h) {
        std::copy(io_.init_h + StateOffset(dir, b), io_.init_h + StateOffset(dir, b) + h, hb);
      } else {
        std::fill(hb, hb + h, C(0));
      }
      if (spec_.cell == RnnCell::kLstm) {
        C* cb = c_.data() + b * h;
        if (io_.init_c) {
          std::copy(io_.init_c + StateOffset(dir, b), io_.init_c + StateOffset(dir, b) + h, cb);
        } else {
          std::fill(cb, cb + h, C(0));
        }
      }
    }

    for (int64_t s = 0; s < d_.seq; ++s) {
      // Recurrent products of the previous hidden state (GRU without
      // linear_before_reset: z and r gates only, the h gate needs r first).
      const int64_t n = spec_.cell == RnnCell::kGru && !lbr ? 2 * h : gh;
      REMEX_RETURN_IF_ERROR(GemmABt<C>(h_.data(), h, r, h, hr_.data(), gh, d_.batch, n, h, false));
      if (spec_.cell == RnnCell::kGru && !lbr) {
        for (int64_t b = 0; b < d_.batch; ++b) {
          if (s >= lens_[b]) continue;
          C* gt = GatePreActivations(b, s, reverse, 2 * h);
          C* z = gt;
          C* rg = gt + h;
          Clip(z, 2 * h);
          ApplyActivation(acts[0], z, h);
          ApplyActivation(acts[0], rg, h);
          const C* hb = h_.data() + b * h;
          C* rh = rh_.data() + b * h;
          for (int64_t j = 0; j < h; ++j) rh[j] = rg[j] * hb[j];
          // z is kept in the recurrent buffer for the second phase.
          std::copy(z, z + h, hr_.data() + b * gh);
        }
        // (r . Ht-1) * Rh^T into the h-gate columns of the recurrent buffer.
        REMEX_RETURN_IF_ERROR(GemmABt<C>(rh_.data(), h, r + 2 * h * h, h, hr_.data() + 2 * h, gh,
                                         d_.batch, h, h, false));
      }
      for (int64_t b = 0; b < d_.batch; ++b) {
        if (s >= lens_[b]) continue;
        const int64_t t = reverse ? lens_[b] - 1 - s : s;
        C* hb = h_.data() + b * h;
        switch (spec_.cell) {
          case RnnCell::kRnn: StepRnn(b, t, hb, acts); break;
          case RnnCell::kGru: StepGru(b, t, hb, acts, lbr); break;
          case RnnCell::kLstm: StepLstm(b, t, hb, acts, peep); break;
        }
        if (io_.y) {
          C* yrow = io_.y + (d_.layout0() ? (t * d_.dirs + dir) * d_.batch + b
                                          : (b * d_.seq + t) * d_.dirs + dir) *
                                h;
          std::copy(hb, hb + h, yrow);
        }
      }
    }

    for (int64_t b = 0; b < d_.batch; ++b) {
      if (io_.y_h) std::copy(h_.data() + b * h, h_.data() + (b + 1) * h, io_.y_h + StateOffset(dir, b));
      if (io_.y_c) std::copy(c_.data() + b * h, c_.data() + (b + 1) * h, io_.y_c + StateOffset(dir, b));
    }
    return OkStatus();
  }

  const C* XwRow(int64_t b, int64_t t) const {
    return xw_.data() + (d_.layout0() ? t * d_.batch + b : b * d_.seq + t) * spec_.gates * d_.hidden;
  }

  // gates_[0..n) = input products + recurrent products of batch entry b at step s.
  C* GatePreActivations(int64_t b, int64_t s, bool reverse, int64_t n) {
    const int64_t gh = spec_.gates * d_.hidden;
    const int64_t t = reverse ? lens_[b] - 1 - s : s;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * gh;
    for (int64_t j = 0; j < n; ++j) gates_[j] = xr[j] + hr[j];
    return gates_.data();
  }

  void Clip(C* v, int64_t n) const {
    if (!a_.has_clip) return;
    const C lim = static_cast<C>(a_.clip);
    for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -lim, lim);
  }

  void StepRnn(int64_t b, int64_t t, C* hb, const Activation* acts) {
    const int64_t h = d_.hidden;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * h;
    for (int64_t j = 0; j < h; ++j) hb[j] = xr[j] + hr[j];
    Clip(hb, h);
    ApplyActivation(acts[0], hb, h);
  }

  void StepGru(int64_t b, int64_t t, C* hb, const Activation* acts, bool lbr) {
    const int64_t h = d_.hidden, gh = 3 * h;
    const C* xr = XwRow(b, t);
    C* hr = hr_.data() + b * gh;
    C* z = gates_.data();
    C* rg = z + h;
    C* ht = z + 2 * h;
    if (lbr) {
      for (int64_t j = 0; j < 2 * h; ++j) z[j] = xr[j] + hr[j];
      Clip(z, 2 * h);
      ApplyActivation(acts[0], z, h);
      ApplyActivation(acts[0], rg, h);
      for (int64_t j = 0; j < h; ++j) ht[j] = xr[2 * h + j] + rg[j] * (hr[2 * h + j] + rbh_[j]);
    } else {
      // Phase one left z in hr[0..h) and (r . Ht-1) * Rh^T in hr[2h..3h).
      std::copy(hr, hr + h, z);
      for (int64_t j = 0; j < h; ++j) ht[j] = xr[2 * h + j] + hr[2 * h + j];
    }
    Clip(ht, h);
    ApplyActivation(acts[1], ht, h);
    for (int64_t j = 0; j < h; ++j) hb[j] = (C(1) - z[j]) * ht[j] + z[j] * hb[j];
  }

  void StepLstm(int64_t b, int64_t t, C* hb, const Activation* acts, const C* peep) {
    const int64_t h = d_.hidden, gh = 4 * h;
    const C* xr = XwRow(b, t);
    const C* hr = hr_.data() + b * gh;
    C* cb = c_.data() + b * h;
    C* gi = gates_.data();
    C* go = gi + h;
    C* gf = gi + 2 * h;
    C* gc = gi + 3 * h;
    for (int64_t j = 0; j < gh; ++j) gi[j] = xr[j] + hr[j];
    if (peep) {
      for (int64_t j = 0; j < h; ++j) {
        gi[j] += peep[j] * cb[j];
        gf[j] += peep[2 * h + j] * cb[j];
      }
    }
    Clip(gi, h);
    Clip(gf, h);
    Clip(gc, h);
    ApplyActivation(acts[0], gi, h);
    if (a_.input_forget) {
      for (int64_t j = 0; j < h; ++j) gf[j] = C(1) - gi[j];
    } else {
      ApplyActivation(acts[0], gf, h);
    }
    ApplyActivation(acts[1], gc, h);
    for (int64_t j = 0; j < h; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
    if (peep) {
      for (int64_t j = 0; j < h; ++j) go[j] += peep[h + j] * cb[j];
    }
    Clip(go, h);
    ApplyActivation(acts[0], go, h);
    // hb = o . h(C), with h(C) computed in the c-gate slot.
    std::copy(cb, cb + h, gc);
    ApplyActivation(acts[2], gc, h);
    for (int64_t j = 0; j < h; ++j) hb[j] = go[j] * gc[j];
  }

  const RnnSpec& spec_;
  const RnnAttrs& a_;
  const RnnDims& d_;
  const std::vector<int64_t>& lens_;
  RnnBuffers<C> io_;
  std::vector<C> xw_, hr_, h_, c_, rh_, gates_, rbh_;
};

class RnnKernel final : public ValidatedKernel {
 public:
  static StatusOr<std::unique_ptr<RnnKernel>> Create(const OpDef& def, const Attributes& attrs,
                                                     const RnnSpec* spec) {
    REMEX_ASSIGN_OR_RETURN(RnnAttrs parsed, ParseRnnSpecAttrs(*spec, attrs));
    return std::make_unique<RnnKernel>(def, attrs, *spec, std::move(parsed));
  }
  RnnKernel(const OpDef& def, const Attributes& attrs, const RnnSpec& spec, RnnAttrs parsed)
      : ValidatedKernel(def, attrs), spec_(spec), attrs_(std::move(parsed)) {}

 protected:
  Status Run(std::span<const TensorRef> in, std::span<const TensorRef> out) override {
    std::vector<ShapeFnArg> args = ToShapeArgs(in);
    REMEX_ASSIGN_OR_RETURN(RnnDims d, ComputeRnnDims(spec_, attrs_, args));
    std::vector<int64_t> lens(static_cast<size_t>(d.batch), d.seq);
    if (Present(in, kSeqLens)) {
      const TensorRef& t = in[kSeqLens];
      REMEX_ASSIGN_OR_RETURN(lens, ReadIndexTensor(op(), "sequence_lens", t.dtype, t.shape, t.data));
      for (int64_t v : lens) {
        if (v < 0 || v > d.seq) {
          return OpError(op(), "sequence_lens value " + std::to_string(v) + " is outside [0, " +
                                   std::to_string(d.seq) + "]");
        }
      }
    }
    return DispatchFloat(op(), in[kX].dtype, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      auto input = [&](size_t i) -> const T* {
        return Present(in, i) ? DataAs<const T>(in[i]) : nullptr;
      };
      auto output = [&](size_t i) -> T* { return i < out.size() ? DataAs<T>(out[i]) : nullptr; };
      if constexpr (std::is_same_v<T, C>) {
        RnnBuffers<C> io{input(kX), input(kW), input(kR), input(kB), input(kInitH),
                         input(kInitC), input(kP), output(0), output(1), output(2)};
        return RnnRunner<C>(spec_, attrs_, d, lens, io).Run();
      } else {
        // float16: the tensors are widened to float32 and the outputs narrowed back.
        std::vector<std::vector<C>> wide(kP + 1);
        auto widen = [&](size_t i) -> const C* {
          const T* p = input(i);
          if (!p) return nullptr;
          const size_t n = static_cast<size_t>(*NumElements(in[i].shape));
          wide[i].resize(n);
          for (size_t j = 0; j < n; ++j) wide[i][j] = Load(p[j]);
          return wide[i].data();
        };
        std::vector<std::vector<C>> outs(out.size());
        auto scratch = [&](size_t i) -> C* {
          if (i >= out.size()) return nullptr;
          outs[i].resize(static_cast<size_t>(*NumElements(out[i].shape)));
          return outs[i].data();
        };
        RnnBuffers<C> io{widen(kX), widen(kW), widen(kR), widen(kB), widen(kInitH),
                         widen(kInitC), widen(kP), scratch(0), scratch(1), scratch(2)};
        REMEX_RETURN_IF_ERROR(RnnRunner<C>(spec_, attrs_, d, lens, io).Run());
        for (size_t i = 0; i < out.size(); ++i) {
          T* o = DataAs<T>(out[i]);
          for (size_t j = 0; j < outs[i].size(); ++j) o[j] = Store<T>(outs[i][j]);
        }
        return OkStatus();
      }
    });
  }

 private:
  static bool Present(std::span<const TensorRef> in, size_t i) {
    return i < in.size() && in[i].present();
  }

  const RnnSpec& spec_;
  RnnAttrs attrs_;
};

Status AddRnnKernel(KernelRegistry& registry, const RnnSpec& spec) {
  REMEX_ASSIGN_OR_RETURN(const int since, OnlyEntrySince(registry, spec.name, "RegisterCpuKernels"));
  return registry.AddKernel(spec.name, since, DeviceKind::kCpu, MakeKernel<RnnKernel>(&spec));
}


}  // namespace

Status AddRnnCpuKernels(KernelRegistry& registry) {
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, kLstmSpec));
  REMEX_RETURN_IF_ERROR(AddRnnKernel(registry, kGruSpec));
  return AddRnnKernel(registry, kRnnSpec);
}

}  // namespace remex::kernels::internal

