// Device code of the CUDA LSTM, GRU and RNN kernels. Includes only CUDA and plain
// headers. Semantics are kernels/ops/rnn/rnn.cc's (ONNX LSTM / GRU / RNN, opsets 7-17),
// computed in float32 for float32 and float16 tensors (float16 is widened on load and
// rounded to nearest even on store, as the CPU kernel does).
//
// Scratch (float32, see RnnWorkspaceFloats): xw [seq * batch rows in X's order,
// dirs * G * H] holds X . W^T plus the biases that are plain sums (GRU's R bias of the
// h gate stays apart under linear_before_reset, as on the CPU); then two hidden-state
// buffers used in turn (step s reads one and writes the other), the cell state (LSTM),
// and GRU's z gate and r . H(t-1) (without linear_before_reset), each [dirs, batch, H].
// A batch entry past its sequence length copies its hidden state forward unchanged.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/ops/rnn/cuda/rnn_impl.h"
#include "kernels/cuda/half_io.cuh"
#include "kernels/cuda/launch.cuh"

namespace remex::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 1 << 20;
constexpr int kTile = 16;


// std::clamp's result: lo when v < lo, hi when hi < v, else v (NaN stays NaN).
__device__ __forceinline__ float Clamp(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }

// The activations as kernels/ops/rnn/rnn.cc's ApplyActivation computes them.
__device__ float Activate(const RnnActParams& a, float v) {
  switch (a.fn) {
    case RnnActFn::kRelu: return v > 0.0f ? v : 0.0f;
    case RnnActFn::kTanh: return tanhf(v);
    case RnnActFn::kSigmoid: return 1.0f / (1.0f + expf(-v));
    case RnnActFn::kAffine: return a.alpha * v + a.beta;
    case RnnActFn::kLeakyRelu: return v >= 0.0f ? v : a.alpha * v;
    case RnnActFn::kThresholdedRelu: return v > a.alpha ? v : 0.0f;
    case RnnActFn::kScaledTanh: return a.alpha * tanhf(a.beta * v);
    case RnnActFn::kHardSigmoid: return Clamp(a.alpha * v + a.beta, 0.0f, 1.0f);
    case RnnActFn::kElu: return v >= 0.0f ? v : a.alpha * (expf(v) - 1.0f);
    case RnnActFn::kSoftsign: return v / (1.0f + fabsf(v));
    case RnnActFn::kSoftplus: return v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
  }
  return v;
}

__device__ __forceinline__ float ClipGate(const RnnParams& p, float v) {
  return p.has_clip ? Clamp(v, -p.clip, p.clip) : v;
}

// sequence_lens[b] as stored (seq when absent).
__device__ __forceinline__ int64_t RawLen(const RnnParams& p, const void* lens, bool lens64, int64_t b) {
  if (!lens) return p.seq;
  return lens64 ? static_cast<const int64_t*>(lens)[b] : static_cast<const int32_t*>(lens)[b];
}

__device__ __forceinline__ bool LenValid(const RnnParams& p, int64_t len) { return len >= 0 && len <= p.seq; }

// The number of steps batch entry b runs (0 for an invalid length).
__device__ __forceinline__ int64_t RunLen(const RnnParams& p, const void* lens, bool lens64, int64_t b) {
  const int64_t len = RawLen(p, lens, lens64, b);
  return LenValid(p, len) ? len : 0;
}

// Offset of batch entry b's state for direction dir in initial_h / Y_h / Y_c.
__device__ __forceinline__ int64_t StateOffset(const RnnParams& p, int64_t dir, int64_t b) {
  return (p.layout1 ? b * p.dirs + dir : dir * p.batch + b) * p.hidden;
}

// Offset of Y's row for step t, direction dir, batch entry b.
__device__ __forceinline__ int64_t YOffset(const RnnParams& p, int64_t t, int64_t dir, int64_t b) {
  return (p.layout1 ? (b * p.seq + t) * p.dirs + dir : (t * p.dirs + dir) * p.batch + b) * p.hidden;
}

// xw[m, n] = sum_k x[m, k] * w[n, k] + bias(n), with n = dir * G * H + gate column.
// 16 x 16 output tiles; the grid's y dimension strides over the row tiles.
template <typename T>
__global__ void InputProductKernel(const T* x, const T* w, const T* bias, float* xw, int64_t m, int64_t n,
                                   int64_t k, int64_t gh, int64_t hidden, bool lbr) {
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t col = col0 + tx;
  for (int64_t tile = blockIdx.y; tile * kTile < m; tile += gridDim.y) {
    const int64_t row = tile * kTile + ty;
    const int64_t wrow = col0 + ty;
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < k; k0 += kTile) {
      const int64_t kk = k0 + tx;
      xs[ty][tx] = row < m && kk < k ? Load(x[row * k + kk]) : 0.0f;
      ws[ty][tx] = wrow < n && kk < k ? Load(w[wrow * k + kk]) : 0.0f;
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kTile; ++q) acc += xs[ty][q] * ws[tx][q];
      __syncthreads();
    }
    if (row < m && col < n) {
      float b = 0.0f;
      if (bias) {
        const int64_t dir = col / gh, j = col % gh;
        const T* bd = bias + dir * 2 * gh;
        b = Load(bd[j]);
        if (!(lbr && j >= 2 * hidden)) b = b + Load(bd[gh + j]);
      }
      xw[row * n + col] = acc + b;
    }
  }
}

template <typename T>
struct DeviceTensors {
  const T* r;
  const T* b;
  const T* p;
  const void* lens;
  bool lens64;
  const T* init_h;
  const T* init_c;
  T* y;
  T* y_h;
  T* y_c;
  const float* xw;
  float* h[2];
  float* c;
  float* z;
  float* rh;
};

#define REMEX_RNN_GRID_LOOP(i, n) for (int64_t i = GlobalThread(); i < (n); i += GridThreads())

template <typename T>
__global__ void InitStateKernel(RnnParams p, DeviceTensors<T> d) {
  const int64_t n = p.dirs * p.batch * p.hidden;
  REMEX_RNN_GRID_LOOP(i, n) {
    const int64_t j = i % p.hidden, b = (i / p.hidden) % p.batch, dir = i / (p.hidden * p.batch);
    const int64_t so = StateOffset(p, dir, b) + j;
    d.h[0][i] = d.init_h ? Load(d.init_h[so]) : 0.0f;
    if (p.cell == RnnCell::kLstm) d.c[i] = d.init_c ? Load(d.init_c[so]) : 0.0f;
  }
}

// acc[g] = sum_k h[k] * r[(g0 + g) * H + j, k] for g in [0, kGates).
template <int kGates, typename T>
__device__ __forceinline__ void RecurrentSums(const float* h, const T* r, int64_t hidden, int64_t j, int g0,
                                              float* acc) {
#pragma unroll
  for (int g = 0; g < kGates; ++g) acc[g] = 0.0f;
  for (int64_t k = 0; k < hidden; ++k) {
    const float hk = h[k];
#pragma unroll
    for (int g = 0; g < kGates; ++g) acc[g] += hk * Load(r[((g0 + g) * hidden + j) * hidden + k]);
  }
}

// Where thread `i` of a step works: direction, batch entry, hidden unit, and the step's
// time index t (-1 when the batch entry's sequence has ended).
struct StepPos {
  int64_t dir, b, j, row_state, t;
};

__device__ __forceinline__ StepPos PosOf(const RnnParams& p, const void* lens, bool lens64, int64_t i,
                                         int64_t s) {
  StepPos q;
  q.j = i % p.hidden;
  q.b = (i / p.hidden) % p.batch;
  q.dir = i / (p.hidden * p.batch);
  q.row_state = (q.dir * p.batch + q.b) * p.hidden;
  const int64_t len = RunLen(p, lens, lens64, q.b);
  const bool reverse = p.reverse || q.dir == 1;
  q.t = s >= len ? -1 : (reverse ? len - 1 - s : s);
  return q;
}

__device__ __forceinline__ const float* XwRow(const RnnParams& p, const float* xw, const StepPos& q) {
  const int64_t gh = static_cast<int64_t>(p.gates) * p.hidden;
  const int64_t row = p.layout1 ? q.b * p.seq + q.t : q.t * p.batch + q.b;
  return xw + row * (p.dirs * gh) + q.dir * gh;
}

// One step of RNN, LSTM or GRU with linear_before_reset, every direction at once.
template <typename T, RnnCell kCell>
__global__ void StepKernel(RnnParams p, DeviceTensors<T> d, int64_t s) {
  constexpr int kGates = kCell == RnnCell::kRnn ? 1 : kCell == RnnCell::kGru ? 3 : 4;
  const float* hp_all = d.h[s & 1];
  float* hn_all = d.h[(s + 1) & 1];
  const int64_t n = p.dirs * p.batch * p.hidden;
  REMEX_RNN_GRID_LOOP(i, n) {
    const StepPos q = PosOf(p, d.lens, d.lens64, i, s);
    const float* hp = hp_all + q.row_state;
    if (q.t < 0) {
      hn_all[i] = hp[q.j];
      continue;
    }
    const int64_t H = p.hidden, j = q.j, gh = kGates * H;
    const float* xr = XwRow(p, d.xw, q);
    const T* r = d.r + q.dir * gh * H;
    const RnnActParams* acts = p.acts + q.dir * p.num_acts;
    float acc[kGates];
    RecurrentSums<kGates>(hp, r, H, j, 0, acc);
    float h;
    if constexpr (kCell == RnnCell::kRnn) {
      h = Activate(acts[0], ClipGate(p, xr[j] + acc[0]));
    } else if constexpr (kCell == RnnCell::kGru) {
      const float z = Activate(acts[0], ClipGate(p, xr[j] + acc[0]));
      const float rg = Activate(acts[0], ClipGate(p, xr[H + j] + acc[1]));
      const float rbh = d.b ? Load(d.b[q.dir * 2 * gh + gh + 2 * H + j]) : 0.0f;
      const float ht = Activate(acts[1], ClipGate(p, xr[2 * H + j] + rg * (acc[2] + rbh)));
      h = (1.0f - z) * ht + z * hp[j];
    } else {
      float* c = d.c + i;
      const float c_prev = *c;
      float gi = xr[j] + acc[0];
      float go = xr[H + j] + acc[1];
      float gf = xr[2 * H + j] + acc[2];
      const float gc = xr[3 * H + j] + acc[3];
      const T* peep = d.p ? d.p + q.dir * 3 * H : nullptr;
      if (peep) {
        gi += Load(peep[j]) * c_prev;
        gf += Load(peep[2 * H + j]) * c_prev;
      }
      gi = Activate(acts[0], ClipGate(p, gi));
      gf = p.input_forget ? 1.0f - gi : Activate(acts[0], ClipGate(p, gf));
      const float cc = Activate(acts[1], ClipGate(p, gc));
      const float c_new = gf * c_prev + gi * cc;
      *c = c_new;
      if (peep) go += Load(peep[H + j]) * c_new;
      go = Activate(acts[0], ClipGate(p, go));
      h = go * Activate(acts[2], c_new);
    }
    hn_all[i] = h;
    if (d.y) d.y[YOffset(p, q.t, q.dir, q.b) + j] = Store<T>(h);
  }
}

// GRU without linear_before_reset, first half of a step: z and r . H(t-1).
template <typename T>
__global__ void GruGatesKernel(RnnParams p, DeviceTensors<T> d, int64_t s) {
  const float* hp_all = d.h[s & 1];
  const int64_t n = p.dirs * p.batch * p.hidden;
  REMEX_RNN_GRID_LOOP(i, n) {
    const StepPos q = PosOf(p, d.lens, d.lens64, i, s);
    if (q.t < 0) continue;
    const int64_t H = p.hidden, j = q.j;
    const float* hp = hp_all + q.row_state;
    const float* xr = XwRow(p, d.xw, q);
    const T* r = d.r + q.dir * 3 * H * H;
    const RnnActParams* acts = p.acts + q.dir * p.num_acts;
    float acc[2];
    RecurrentSums<2>(hp, r, H, j, 0, acc);
    d.z[i] = Activate(acts[0], ClipGate(p, xr[j] + acc[0]));
    const float rg = Activate(acts[0], ClipGate(p, xr[H + j] + acc[1]));
    d.rh[i] = rg * hp[j];
  }
}

// GRU without linear_before_reset, second half: h gate from (r . H(t-1)) . Rh^T.
template <typename T>
__global__ void GruOutputKernel(RnnParams p, DeviceTensors<T> d, int64_t s) {
  const float* hp_all = d.h[s & 1];
  float* hn_all = d.h[(s + 1) & 1];
  const int64_t n = p.dirs * p.batch * p.hidden;
  REMEX_RNN_GRID_LOOP(i, n) {
    const StepPos q = PosOf(p, d.lens, d.lens64, i, s);
    const float* hp = hp_all + q.row_state;
    if (q.t < 0) {
      hn_all[i] = hp[q.j];
      continue;
    }
    const int64_t H = p.hidden, j = q.j;
    const float* xr = XwRow(p, d.xw, q);
    const T* r = d.r + q.dir * 3 * H * H;
    const RnnActParams* acts = p.acts + q.dir * p.num_acts;
    float acc[1];
    RecurrentSums<1>(d.rh + q.row_state, r, H, j, 2, acc);
    const float ht = Activate(acts[1], ClipGate(p, xr[2 * H + j] + acc[0]));
    const float z = d.z[i];
    const float h = (1.0f - z) * ht + z * hp[j];
    hn_all[i] = h;
    if (d.y) d.y[YOffset(p, q.t, q.dir, q.b) + j] = Store<T>(h);
  }
}

// Y_h and Y_c from the final states; NaN (and NaN Y rows) for a batch entry whose
// sequence length is outside [0, seq].
template <typename T>
__global__ void FinishKernel(RnnParams p, DeviceTensors<T> d, const float* h_final) {
  const int64_t n = p.dirs * p.batch * p.hidden;
  REMEX_RNN_GRID_LOOP(i, n) {
    const int64_t j = i % p.hidden, b = (i / p.hidden) % p.batch, dir = i / (p.hidden * p.batch);
    const bool valid = LenValid(p, RawLen(p, d.lens, d.lens64, b));
    const float nan = __int_as_float(0x7fc00000);
    const int64_t so = StateOffset(p, dir, b) + j;
    if (d.y_h) d.y_h[so] = Store<T>(valid ? h_final[i] : nan);
    if (d.y_c) d.y_c[so] = Store<T>(valid ? d.c[i] : nan);
    if (!valid && d.y) {
      for (int64_t t = 0; t < p.seq; ++t) d.y[YOffset(p, t, dir, b) + j] = Store<T>(nan);
    }
  }
}

unsigned BlocksFor(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

template <typename T>
cudaError_t Run(const RnnParams& p, const RnnTensors& t, float* workspace, cudaStream_t stream) {
  const int64_t H = p.hidden, gh = static_cast<int64_t>(p.gates) * H;
  const int64_t state = p.dirs * p.batch * H;
  const int64_t rows = p.seq * p.batch, cols = p.dirs * gh;
  DeviceTensors<T> d;
  d.r = static_cast<const T*>(t.r);
  d.b = static_cast<const T*>(t.b);
  d.p = static_cast<const T*>(t.p);
  d.lens = t.seq_lens;
  d.lens64 = t.seq_lens_int64;
  d.init_h = static_cast<const T*>(t.init_h);
  d.init_c = static_cast<const T*>(t.init_c);
  d.y = static_cast<T*>(t.y);
  d.y_h = static_cast<T*>(t.y_h);
  d.y_c = static_cast<T*>(t.y_c);
  float* xw = workspace;
  d.xw = xw;
  d.h[0] = xw + rows * cols;
  d.h[1] = d.h[0] + state;
  d.c = d.h[1] + state;
  d.z = d.c + state;
  d.rh = d.z + state;

  if (d.y) {
    const cudaError_t e = cudaMemsetAsync(d.y, 0, static_cast<size_t>(rows * p.dirs * H) * sizeof(T), stream);
    if (e != cudaSuccess) return e;
  }
  if (rows > 0) {
    const dim3 block(kTile, kTile);
    const int64_t row_tiles = (rows + kTile - 1) / kTile;
    const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                    static_cast<unsigned>(std::min<int64_t>(row_tiles, 65535)));
    LaunchKernel<InputProductKernel<T>>(grid, block, 0, stream, static_cast<const T*>(t.x),
                                        static_cast<const T*>(t.w), d.b, xw, rows, cols, p.input, gh, H,
                                        p.cell == RnnCell::kGru && p.linear_before_reset);
  }
  const unsigned blocks = BlocksFor(state);
  LaunchKernel<InitStateKernel<T>>(blocks, kThreads, 0, stream, p, d);
  for (int64_t s = 0; s < p.seq; ++s) {
    switch (p.cell) {
      case RnnCell::kRnn:
        LaunchKernel<StepKernel<T, RnnCell::kRnn>>(blocks, kThreads, 0, stream, p, d, s);
        break;
      case RnnCell::kLstm:
        LaunchKernel<StepKernel<T, RnnCell::kLstm>>(blocks, kThreads, 0, stream, p, d, s);
        break;
      case RnnCell::kGru:
        if (p.linear_before_reset) {
          LaunchKernel<StepKernel<T, RnnCell::kGru>>(blocks, kThreads, 0, stream, p, d, s);
        } else {
          LaunchKernel<GruGatesKernel<T>>(blocks, kThreads, 0, stream, p, d, s);
          LaunchKernel<GruOutputKernel<T>>(blocks, kThreads, 0, stream, p, d, s);
        }
        break;
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  LaunchKernel<FinishKernel<T>>(blocks, kThreads, 0, stream, p, d, d.h[p.seq & 1]);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchRnn(const RnnParams& p, const RnnTensors& t, float* workspace, cudaStream_t stream) {
  return Run<DeviceType<T>>(p, t, workspace, stream);
}

template cudaError_t LaunchRnn<float>(const RnnParams&, const RnnTensors&, float*, cudaStream_t);
template cudaError_t LaunchRnn<Half>(const RnnParams&, const RnnTensors&, float*, cudaStream_t);

}  // namespace remex::kernels::cuda
