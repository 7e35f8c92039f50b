// ConvInteger and QLinearConv through oneDNN's int8 convolution (int8_dnnl.h says when
// and why it gives the int16 GEMM path's bits).

#include "kernels/ops/quantization/int8_dnnl.h"

#include "kernels/cpu_features.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

namespace remex::kernels::internal {

bool DnnlQConv::Available() { return CpuHasInt8DotProducts(); }

bool DnnlQConv::PrepareWeights(const QConvCall& call) {
  const TensorRef& w = *call.w;
  const std::span<const int32_t> zps = call.w_zero_points;
  // Kept weights: compared in place, nothing allocated per call.
  if (w.constant && w8_from_ == w.data && std::equal(zps.begin(), zps.end(), w8_zero_points_.begin(), w8_zero_points_.end())) {
    return w8_fits_;
  }
  // New weights: reordered copies of the old ones in the primitives must go.
  for (auto& [key, entry] : cache_) entry.conv.weights_kept_from = nullptr;
  w8_from_ = nullptr;
  w8_fits_ = false;
  if (!w.constant) return false;
  const int64_t m = w.shape[0];
  const int64_t per_m = NumElements(w.shape).value_or(0) / std::max<int64_t>(m, 1);
  const int64_t taps = per_m / std::max<int64_t>(w.shape[1], 1);
  w8_.resize(static_cast<size_t>(m * per_m));
  w8_sums_.assign(static_cast<size_t>(m), 0);
  residual_.clear();
  const size_t most_residual = static_cast<size_t>(m * per_m / 64);
  bool fits = true;
  for (int64_t mo = 0; mo < m && fits; ++mo) {
    int32_t sum = 0;
    for (int64_t i = 0; i < per_m; ++i) {
      const int64_t at = mo * per_m + i;
      const int32_t v = (w.dtype == DType::kUint8 ? int32_t{static_cast<const uint8_t*>(w.data)[at]}
                                                  : int32_t{static_cast<const int8_t*>(w.data)[at]}) -
                        zps[static_cast<size_t>(mo)];
      const int32_t clamped = std::clamp(v, -128, 127);
      if (clamped != v) {
        residual_.push_back({mo, i / taps, i % taps, v - clamped});
        fits = residual_.size() <= most_residual;
      }
      w8_[static_cast<size_t>(at)] = static_cast<int8_t>(clamped);
      sum += v;
    }
    w8_sums_[static_cast<size_t>(mo)] = sum;
  }
  if (!fits) residual_.clear();
  w8_from_ = w.data;
  w8_zero_points_.assign(zps.begin(), zps.end());
  w8_fits_ = fits;
  return fits;
}

namespace {

dnnl::memory::data_type DnnlType(DType t) {
  switch (t) {
    case DType::kUint8: return dnnl::memory::data_type::u8;
    case DType::kInt8: return dnnl::memory::data_type::s8;
    case DType::kFloat32: return dnnl::memory::data_type::f32;
    default: return dnnl::memory::data_type::s32;
  }
}

// The QLinear forms' requantization as oneDNN attributes: the per-channel multipliers as
// output scales, then a rounding post-op, then y_zero_point. The rounding comes first,
// as in quantize_ops.h's Requantize: oneDNN adds a destination zero point in float32,
// where -1.4999999 + 128 is 126.5, which rounds to 126; rounded first, -1 + 128 is 127.
void SetRequantization(dnnl::primitive_attr& attr, std::span<const float> multipliers, int32_t y_zero_point) {
  attr.set_output_scales(1 << 1, std::vector<float>(multipliers.begin(), multipliers.end()));
  if (y_zero_point == 0) return;
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_round, 0.0f, 0.0f);
  attr.set_post_ops(po);
  attr.set_zero_points(DNNL_ARG_DST, 0, {y_zero_point});
}

// X into `to` with `value` in the padding (1 to 3 spatial dims; elements of 1 byte):
// [N, C, D...] into [N, C, D + pad_begin + pad_end ...], or with `channels_last`
// [N, D..., C] into [N, D + pad_begin + pad_end ..., C]. `shape` and `padded` are the
// channels-first shapes either way. Each output row is written once, the rows split
// over the compute threads.
void PadInto(const uint8_t* x, const Shape& shape, const WindowGeometry& g, uint8_t value, uint8_t* to,
             const Shape& padded, bool channels_last) {
  const size_t sp = shape.size() - 2;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, begin[3] = {0, 0, 0};
  for (size_t i = 0; i < sp; ++i) {
    in[3 - sp + i] = shape[2 + i];
    out[3 - sp + i] = padded[2 + i];
    begin[3 - sp + i] = g.pad_begin[i];
  }
  // Bytes per element of the innermost spatial dim, and the planes padded apart.
  const int64_t inner = channels_last ? shape[1] : 1;
  const int64_t planes = channels_last ? shape[0] : shape[0] * shape[1];
  const int64_t in_row = in[2] * inner, out_row = out[2] * inner;
  const int64_t rows = planes * out[0] * out[1];
  ParallelFor(rows, std::max<int64_t>(1, 65536 / std::max<int64_t>(out_row, 1)), [&](int64_t first, int64_t last, int) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t d1 = r % out[1] - begin[1], d0 = r / out[1] % out[0] - begin[0], p = r / (out[0] * out[1]);
      uint8_t* row = to + r * out_row;
      if (d0 < 0 || d0 >= in[0] || d1 < 0 || d1 >= in[1]) {
        std::memset(row, value, static_cast<size_t>(out_row));
        continue;
      }
      const int64_t left = begin[2] * inner;
      std::memset(row, value, static_cast<size_t>(left));
      std::memcpy(row + left, x + ((p * in[0] + d0) * in[1] + d1) * in_row, static_cast<size_t>(in_row));
      std::memset(row + left + in_row, value, static_cast<size_t>(out_row - left - in_row));
    }
  });
}

}  // namespace

StatusOr<DnnlQConv::Entry*> DnnlQConv::FindOrCompile(std::vector<int64_t> key, const QConvCall& call,
                                                     const ConvDims& d, const Shape& src_shape, bool pad_copy,
                                                     bool bake_x_zero_point, bool with_bias) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return &it->second;
  using dnnl::memory;
  if (!engine_) {
    engine_ = std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0);
    stream_ = std::make_unique<dnnl::stream>(*engine_);
  }
  if (cache_.size() >= 16) cache_.clear();
  Entry& e = cache_[std::move(key)];
  const WindowGeometry& g = d.geometry;
  const size_t rank = src_shape.size(), sp = rank - 2;
  const memory::dims src_dims(src_shape.begin(), src_shape.end());
  const memory::dims dst_dims(d.output.begin(), d.output.end());
  memory::dims w_dims;
  if (d.group == 1) {
    w_dims.assign(call.w->shape.begin(), call.w->shape.end());
  } else {
    w_dims = {d.group, d.m / d.group, d.c / d.group};
    w_dims.insert(w_dims.end(), call.w->shape.begin() + 2, call.w->shape.end());
  }
  memory::dims strides(g.strides.begin(), g.strides.end()), dilates(sp), pad_l(sp, 0), pad_r(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    dilates[i] = g.dilations[i] - 1;
    if (!pad_copy) {
      pad_l[i] = g.pad_begin[i];
      pad_r[i] = g.pad_end[i];
    }
  }
  const bool qlinear = call.op == "QLinearConv";
  const auto src_t = DnnlType(call.x->dtype), dst_t = DnnlType(call.y->dtype);
  const auto s8 = memory::data_type::s8, s32 = memory::data_type::s32;
  const memory::format_tag any = memory::format_tag::any;
  memory::desc src_any(src_dims, src_t, any), w_any(w_dims, s8, any), dst_any(dst_dims, dst_t, any);
  memory::desc bias_md({d.m}, s32, memory::format_tag::a);
  dnnl::primitive_attr attr;
  if (bake_x_zero_point && call.x_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {call.x_zero_point});
  if (qlinear) SetRequantization(attr, call.multipliers, call.y_zero_point);
  const int64_t macs = *NumElements(d.output) * (*NumElements(call.w->shape) / d.m);
  const int threads = ThreadsForMacs(macs);
  ScopedComputeThreads scoped(threads);
  try {
    const auto desc = with_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                  dnnl::algorithm::convolution_direct, src_any,
                                                                  w_any, bias_md, dst_any, strides, dilates,
                                                                  pad_l, pad_r)
                                : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                                  dnnl::algorithm::convolution_direct, src_any,
                                                                  w_any, dst_any, strides, dilates, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, *engine_);
    const memory::format_tag user_tag = call.channels_last ? ChannelsLastTag(rank) : PlainTag(rank);
    e.conv = MakeDnnlConvPrimitive<dnnl::convolution_forward>(
        pd, *engine_, memory::desc(src_dims, src_t, user_tag), memory::desc(w_dims, s8, PlainTag(w_dims.size())),
        memory::desc(dst_dims, dst_t, user_tag), with_bias, bias_md);
    e.conv.threads = threads;
    e.usable = true;
  } catch (const dnnl::error&) {
    e.usable = false;  // no int8 primitive for this case: the int16 path runs it
  }
  return &e;
}

StatusOr<bool> DnnlQConv::Run(const QConvCall& call) {
  if (!Available() || !PrepareWeights(call)) return false;
  REMEX_ASSIGN_OR_RETURN(WindowAttrs window, ParseWindowAttrs(call.op, *call.attrs, /*with_ceil_mode=*/false));
  REMEX_ASSIGN_OR_RETURN(int64_t group, ParseGroup(call.op, *call.attrs));
  const Shape x_first = call.channels_last ? ToChannelsFirst(call.x->shape) : call.x->shape;
  REMEX_ASSIGN_OR_RETURN(ConvDims d, ConvDimsOf(call.op, window, group, x_first, call.w->shape));
  const bool qlinear = call.op == "QLinearConv";
  if (qlinear && !residual_.empty()) return false;
  // A zero point known only now is taken off after the sums (see int8_dnnl.h).
  const bool run_time_zp = !call.x_zero_point_constant && call.x_zero_point != 0;
  bool padded = false;
  for (size_t i = 0; i < d.geometry.pad_begin.size(); ++i) {
    padded = padded || d.geometry.pad_begin[i] != 0 || d.geometry.pad_end[i] != 0;
  }
  const bool pad_copy = run_time_zp && padded;
  Shape src_shape = x_first;
  if (pad_copy) {
    for (size_t i = 2; i < src_shape.size(); ++i) {
      src_shape[i] += d.geometry.pad_begin[i - 2] + d.geometry.pad_end[i - 2];
    }
  }
  const bool with_bias = qlinear && (call.bias != nullptr || run_time_zp);
  std::vector<int64_t> key(src_shape.begin(), src_shape.end());
  key.insert(key.end(), call.w->shape.begin(), call.w->shape.end());
  key.insert(key.end(), {static_cast<int64_t>(call.x->dtype), static_cast<int64_t>(call.y->dtype),
                         int64_t{run_time_zp} | int64_t{pad_copy} << 1 | int64_t{with_bias} << 2 |
                             int64_t{call.channels_last} << 3,
                         run_time_zp ? 0 : call.x_zero_point, call.y_zero_point});
  for (float f : call.multipliers) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    key.push_back(bits);
  }
  REMEX_ASSIGN_OR_RETURN(Entry * e, FindOrCompile(std::move(key), call, d, src_shape, pad_copy, !run_time_zp, with_bias));
  if (!e->usable) return false;
  const void* src = call.x->data;
  if (pad_copy) {
    padded_.resize(static_cast<size_t>(*NumElements(src_shape)));
    PadInto(static_cast<const uint8_t*>(call.x->data), x_first, d.geometry,
            static_cast<uint8_t>(call.x_zero_point), padded_.data(), src_shape, call.channels_last);
    src = padded_.data();
  }
  void* bias = const_cast<int32_t*>(call.bias);
  if (run_time_zp && qlinear) {
    bias_.resize(static_cast<size_t>(d.m));
    for (int64_t mo = 0; mo < d.m; ++mo) {
      // In uint32: int32 sums wrap as the int16 path's do.
      bias_[mo] = static_cast<int32_t>((call.bias ? static_cast<uint32_t>(call.bias[mo]) : 0u) -
                                       static_cast<uint32_t>(call.x_zero_point) * static_cast<uint32_t>(w8_sums_[mo]));
    }
    bias = bias_.data();
  }
  const TensorRef w8{w8_.data(), DType::kInt8, call.w->shape, /*constant=*/true};
  try {
    ExecuteDnnlConv(e->conv, *stream_, const_cast<void*>(src), w8, call.y->data, bias);
  } catch (const dnnl::error& err) {
    return Internal(std::string(call.op) + ": oneDNN: " + err.what());
  }
  if (!residual_.empty()) {
    AddResidual(call, d, src, src_shape, pad_copy, run_time_zp ? 0 : call.x_zero_point);
  }
  if (run_time_zp && !qlinear) {
    // ConvInteger: y[n, m, ...] -= x_zero_point * sum(W'[m]).
    std::vector<uint32_t> off(static_cast<size_t>(d.m));
    for (int64_t mo = 0; mo < d.m; ++mo) {
      off[mo] = static_cast<uint32_t>(call.x_zero_point) * static_cast<uint32_t>(w8_sums_[mo]);
    }
    uint32_t* y = static_cast<uint32_t*>(call.y->data);
    if (call.channels_last) {
      const int64_t rows = *NumElements(d.output) / std::max<int64_t>(d.m, 1);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t mo = 0; mo < d.m; ++mo) y[r * d.m + mo] -= off[mo];
      }
    } else {
      const int64_t plane = *NumElements(d.output) / std::max<int64_t>(d.n * d.m, 1);
      for (int64_t nm = 0; nm < d.n * d.m; ++nm) {
        uint32_t* p = y + nm * plane;
        for (int64_t i = 0; i < plane; ++i) p[i] -= off[nm % d.m];
      }
    }
  }
  ++runs_;
  return true;
}

// y += residual * (x - baked_zero_point) for each residual weight, the window's taps
// over `src` (X, or X padded when pad_copy: then no pads are left), positions in the
// pads contributing nothing, as in the primitive's sums. In uint32, int32 sums wrapping
// as the primitive's and the int16 path's do. Rows of Y split over the compute threads.
void DnnlQConv::AddResidual(const QConvCall& call, const ConvDims& d, const void* src, const Shape& src_shape,
                            bool pad_copy, int32_t baked_zero_point) {
  const WindowGeometry& g = d.geometry;
  const size_t sp = src_shape.size() - 2;
  // Spatial dims right-aligned in 3 (the leading ones 1), as PadInto does.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};
  for (size_t i = 0; i < sp; ++i) {
    const size_t k = 3 - sp + i;
    in[k] = src_shape[2 + i];
    out[k] = d.output[2 + i];
    kernel[k] = call.w->shape[2 + i];
    stride[k] = g.strides[i];
    dil[k] = g.dilations[i];
    pad[k] = pad_copy ? 0 : g.pad_begin[i];
  }
  const int64_t n = src_shape[0], c = src_shape[1], m = d.m;
  const int64_t c_per_group = c / d.group, m_per_group = m / d.group;
  const int64_t in_spatial = in[0] * in[1] * in[2], out_spatial = out[0] * out[1] * out[2];
  const bool last = call.channels_last;
  const bool is_u8 = call.x->dtype == DType::kUint8;
  const auto* x8 = static_cast<const uint8_t*>(src);
  auto* y = static_cast<uint32_t*>(call.y->data);
  // Each residual weight's window tap and input channel, worked out once per call.
  struct Tap {
    int64_t t0, t1, t2, ci, m;
    uint32_t value;
  };
  std::vector<Tap> taps;
  taps.reserve(residual_.size());
  for (const Residual& e : residual_) {
    taps.push_back({e.tap / (kernel[1] * kernel[2]), e.tap / kernel[2] % kernel[1], e.tap % kernel[2],
                    e.m / m_per_group * c_per_group + e.c, e.m, static_cast<uint32_t>(e.value)});
  }
  const int64_t rows = n * out[0] * out[1];
  ParallelFor(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(out[2] * static_cast<int64_t>(residual_.size()), 1)),
              [&](int64_t first, int64_t last_row, int) {
    for (int64_t r = first; r < last_row; ++r) {
      const int64_t o1 = r % out[1], o0 = r / out[1] % out[0], b = r / (out[0] * out[1]);
      const int64_t y_row = (o0 * out[1] + o1) * out[2];
      for (const Tap& e : taps) {
        const int64_t i0 = o0 * stride[0] + e.t0 * dil[0] - pad[0],
                      i1 = o1 * stride[1] + e.t1 * dil[1] - pad[1];
        if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1]) continue;
        const int64_t in_row = (i0 * in[1] + i1) * in[2];
        for (int64_t o2 = 0; o2 < out[2]; ++o2) {
          const int64_t i2 = o2 * stride[2] + e.t2 * dil[2] - pad[2];
          if (i2 < 0 || i2 >= in[2]) continue;
          const int64_t xi =
              last ? (b * in_spatial + in_row + i2) * c + e.ci : (b * c + e.ci) * in_spatial + in_row + i2;
          const int32_t xv = (is_u8 ? int32_t{x8[xi]} : int32_t{static_cast<int8_t>(x8[xi])}) - baked_zero_point;
          const int64_t yi =
              last ? (b * out_spatial + y_row + o2) * m + e.m : (b * m + e.m) * out_spatial + y_row + o2;
          y[yi] += e.value * static_cast<uint32_t>(xv);
        }
      }
    }
  });
}

bool DnnlQMatMul::PrepareWeights(const QMatMulCall& call) {
  const TensorRef& b = *call.b;
  const std::span<const int32_t> zps = call.b_zero_points;
  if (b.constant && b8_from_ == b.data && std::equal(zps.begin(), zps.end(), b8_zero_points_.begin(), b8_zero_points_.end())) {
    return b8_fits_;
  }
  for (auto& [key, entry] : cache_) entry.weights_ready = false;
  b8_from_ = nullptr;
  b8_fits_ = false;
  if (!b.constant) return false;
  b8_.resize(static_cast<size_t>(call.k * call.n));
  bool fits = true;
  for (int64_t i = 0; i < call.k * call.n && fits; ++i) {
    const int32_t v = (b.dtype == DType::kUint8 ? int32_t{static_cast<const uint8_t*>(b.data)[i]}
                                                : int32_t{static_cast<const int8_t*>(b.data)[i]}) -
                      zps[static_cast<size_t>(i % call.n)];
    fits = v >= -128 && v <= 127;
    b8_[static_cast<size_t>(i)] = static_cast<int8_t>(v);
  }
  b8_from_ = b.data;
  b8_zero_points_.assign(zps.begin(), zps.end());
  b8_fits_ = fits;
  return fits;
}

StatusOr<bool> DnnlQMatMul::Run(const QMatMulCall& call) {
  if (!DnnlQConv::Available() || call.m <= 0 || call.k <= 0 || call.n <= 0 || !PrepareWeights(call)) return false;
  using dnnl::memory;
  const bool qlinear = call.op == "QLinearMatMul";
  const bool to_float = !call.scales.empty();
  std::vector<int64_t> key = {call.m,
                              call.k,
                              call.n,
                              static_cast<int64_t>(call.a->dtype),
                              static_cast<int64_t>(call.y->dtype),
                              call.y_zero_point,
                              static_cast<int64_t>(call.scales.size()),
                              call.bias != nullptr};
  for (float f : call.multipliers) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    key.push_back(bits);
  }
  if (!engine_) {
    engine_ = std::make_unique<dnnl::engine>(dnnl::engine::kind::cpu, 0);
    stream_ = std::make_unique<dnnl::stream>(*engine_);
  }
  const memory::desc a_md({call.m, call.k}, DnnlType(call.a->dtype), memory::format_tag::ab);
  const memory::desc b_plain({call.k, call.n}, memory::data_type::s8, memory::format_tag::ab);
  const memory::desc y_md({call.m, call.n}, DnnlType(call.y->dtype), memory::format_tag::ab);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    if (cache_.size() >= 16) cache_.clear();
    Entry& e = cache_[key];
    dnnl::primitive_attr attr;
    // A's zero point at run time: DynamicQuantizeLinear's changes every call.
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (qlinear) SetRequantization(attr, call.multipliers, call.y_zero_point);
    if (to_float) {
      attr.set_output_scales(call.scales.size() > 1 ? 1 << 1 : 0, {DNNL_RUNTIME_F32_VAL});
      dnnl::post_ops po;
      if (call.bias != nullptr) {
        po.append_binary(dnnl::algorithm::binary_add,
                         memory::desc({1, call.n}, memory::data_type::f32, memory::format_tag::ab));
      }
      attr.set_post_ops(po);
    }
    e.threads = ThreadsForMacs(call.m * call.k * call.n);
    ScopedComputeThreads scoped(e.threads);
    try {
      const memory::desc b_any({call.k, call.n}, memory::data_type::s8, memory::format_tag::any);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, y_md), attr, *engine_);
      e.primitive = dnnl::matmul(pd);
      e.weights = memory(pd.weights_desc(), *engine_);
      e.usable = true;
    } catch (const dnnl::error&) {
      e.usable = false;
    }
    it = cache_.find(key);
  }
  Entry& e = it->second;
  if (!e.usable) return false;
  ScopedComputeThreads scoped(e.threads);
  try {
    if (!e.weights_ready) {
      memory b_user(b_plain, *engine_, b8_.data());
      dnnl::reorder(b_user, e.weights).execute(*stream_, b_user, e.weights);
      e.weights_ready = true;
    }
    int32_t zp = call.a_zero_point;
    memory a_mem(a_md, *engine_, call.a->data), y_mem(y_md, *engine_, call.y->data);
    memory zp_mem({{1}, memory::data_type::s32, memory::format_tag::x}, *engine_, &zp);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, a_mem},
                                            {DNNL_ARG_WEIGHTS, e.weights},
                                            {DNNL_ARG_DST, y_mem},
                                            {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}};
    if (to_float) {
      const memory::dim count = static_cast<memory::dim>(call.scales.size());
      args[DNNL_ARG_ATTR_OUTPUT_SCALES] = memory({{count}, memory::data_type::f32, memory::format_tag::x}, *engine_,
                                                 const_cast<float*>(call.scales.data()));
      if (call.bias != nullptr) {
        args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] =
            memory({{1, call.n}, memory::data_type::f32, memory::format_tag::ab}, *engine_,
                   const_cast<float*>(call.bias));
      }
    }
    e.primitive.execute(*stream_, args);
    stream_->wait();
  } catch (const dnnl::error& err) {
    return Internal(std::string(call.op) + ": oneDNN: " + err.what());
  }
  ++runs_;
  return true;
}

}  // namespace remex::kernels::internal
