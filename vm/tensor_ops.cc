#include "vm/tensor_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>
#include <vector>

#include "base/allclose.h"
#include "kernels/float16.h"

namespace remex::vm {
namespace {

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) for the C++ type of `dtype`.
template <typename F>
Status VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat64: return f(Tag<double>{});
    case DType::kFloat16: return f(Tag<kernels::Half>{});
    case DType::kBFloat16: return f(Tag<kernels::BFloat16>{});
    case DType::kUint8: return f(Tag<uint8_t>{});
    case DType::kInt8: return f(Tag<int8_t>{});
    case DType::kUint16: return f(Tag<uint16_t>{});
    case DType::kInt16: return f(Tag<int16_t>{});
    case DType::kInt32: return f(Tag<int32_t>{});
    case DType::kInt64: return f(Tag<int64_t>{});
    case DType::kUint32: return f(Tag<uint32_t>{});
    case DType::kUint64: return f(Tag<uint64_t>{});
    case DType::kBool: return f(Tag<uint8_t>{});  // bytes from the wire: any value, nonzero is true
    default: return InvalidArgument("tensor of dtype " + std::string(DTypeName(dtype)) + " holds no numbers");
  }
}

template <typename T>
double ToDouble(const T& v) {
  if constexpr (std::is_same_v<T, kernels::Half>) {
    return static_cast<double>(kernels::HalfToFloat(v));
  } else if constexpr (std::is_same_v<T, kernels::BFloat16>) {
    return static_cast<double>(kernels::BFloat16ToFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

// The tensor's bytes as the host can read them: in place on a host-addressable device
// (once its work is done), else a host copy kept in `scratch`.
StatusOr<const void*> HostView(Device& device, const Tensor& t, std::vector<std::byte>& scratch) {
  if (t.nbytes() == 0) return static_cast<const void*>(nullptr);
  if (t.view()) {
    // A view grown in place along t.axis: its rows over the dims before the axis (equal
    // to physical's there) are runs of shape[axis:] elements, physical[axis:] apart.
    const size_t a = static_cast<size_t>(t.axis);
    const size_t elem = DTypeSize(t.dtype);
    int64_t rows = 1, run = 1, stride = 1;
    for (size_t i = 0; i < a; ++i) rows *= t.shape[i];
    for (size_t i = a; i < t.shape.size(); ++i) {
      run *= t.shape[i];
      stride *= t.physical[i];
    }
    scratch.resize(t.nbytes());
    const auto* base = static_cast<const std::byte*>(t.data());
    for (int64_t r = 0; r < rows; ++r) {
      REMEX_RETURN_IF_ERROR(device.CopyToHost(scratch.data() + static_cast<size_t>(r * run) * elem,
                                              base + static_cast<size_t>(r * stride) * elem,
                                              static_cast<size_t>(run) * elem));
    }
    return static_cast<const void*>(scratch.data());
  }
  if (device.capabilities().host_addressable) {
    REMEX_RETURN_IF_ERROR(device.Synchronize());
    return static_cast<const void*>(t.data());
  }
  // TODO(perf): reduce on the device instead of copying the whole tensor.
  scratch.resize(t.nbytes());
  REMEX_RETURN_IF_ERROR(device.CopyToHost(scratch.data(), t.data(), scratch.size()));
  return static_cast<const void*>(scratch.data());
}

StatusOr<size_t> ElementCount(const Tensor& t) {
  auto n = NumElements(t.shape);
  if (!n) return InvalidArgument("tensor shape " + ShapeToString(t.shape) + " is not valid");
  return static_cast<size_t>(*n);
}

// SplitMix64's output function (Steele, Lea and Flood 2014): a 64-bit mix of `x`.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The k-th uniform draw in [0, 1) of `seed`: 53 bits of SplitMix64(seed's stream, k).
double UniformDraw(uint64_t seed, uint64_t k) {
  return static_cast<double>(SplitMix64(SplitMix64(seed) + k * 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53;
}

bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// The value of element i of `fill`, in float64 (before the dtype's rounding).
double FillValue(const TensorFill& fill, double low, double high, uint64_t i) {
  switch (fill.kind) {
    case TensorFill::Kind::kZeros:
      return 0;
    case TensorFill::Kind::kUniform:
      return low + (high - low) * UniformDraw(fill.seed, i);
    case TensorFill::Kind::kNormal: {
      const double u1 = UniformDraw(fill.seed, 2 * i), u2 = UniformDraw(fill.seed, 2 * i + 1);
      return fill.mean + fill.scale * std::sqrt(-2 * std::log1p(-u1)) * std::cos(2 * std::numbers::pi * u2);
    }
  }
  return 0;
}

// The value of T next below `x` (x finite): one step of its encoding towards -inf.
template <typename T>
T NextBelow(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::nextafter(x, -std::numeric_limits<T>::infinity());
  } else {  // Half, BFloat16: sign and magnitude in 16 bits
    T out = x;
    const bool negative = x.bits & 0x8000u;
    if ((x.bits & 0x7fffu) == 0) {
      out.bits = 0x8001u;  // below +-0: the negative value of least magnitude
    } else {
      out.bits = static_cast<uint16_t>(negative ? x.bits + 1 : x.bits - 1);
    }
    return out;
  }
}

// `v` in T: floats round (to nearest even for float16 and bfloat16), staying below a
// uniform fill's `high`; integers take the floor.
template <typename T>
T FromDouble(double v, const TensorFill& fill, double high) {
  if constexpr (std::is_same_v<T, kernels::Half> || std::is_same_v<T, kernels::BFloat16> ||
                std::is_floating_point_v<T>) {
    T out;
    if constexpr (std::is_same_v<T, kernels::Half>) {
      out = kernels::FloatToHalf(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, kernels::BFloat16>) {
      out = kernels::FloatToBFloat16(static_cast<float>(v));
    } else {
      out = static_cast<T>(v);
    }
    // Rounding may reach `high`: step down to the values below it.
    while (fill.kind == TensorFill::Kind::kUniform && ToDouble(out) >= high) out = NextBelow(out);
    return out;
  } else {
    return static_cast<T>(std::floor(v));
  }
}

// The smallest and largest values of an integer dtype (bool: 0 and 1), as float64.
void IntegerRange(DType d, double& lo, double& hi) {
  switch (d) {
    case DType::kUint8:
      lo = 0;
      hi = 255;
      break;
    case DType::kInt8:
      lo = -128;
      hi = 127;
      break;
    case DType::kUint16:
      lo = 0;
      hi = 65535;
      break;
    case DType::kInt16:
      lo = -32768;
      hi = 32767;
      break;
    case DType::kInt32:
      lo = -2147483648.0;
      hi = 2147483647.0;
      break;
    case DType::kUint32:
      lo = 0;
      hi = 4294967295.0;
      break;
    case DType::kInt64:
      lo = -0x1.0p63;
      hi = 0x1.0p63;
      break;  // up to 2^53 exactly
    case DType::kUint64:
      lo = 0;
      hi = 0x1.0p64;
      break;
    default:
      lo = 0;
      hi = 1;
      break;  // bool
  }
}

}  // namespace

StatusOr<TensorStats> ComputeStats(Device& device, const Tensor& tensor) {
  REMEX_ASSIGN_OR_RETURN(size_t n, ElementCount(tensor));
  std::vector<std::byte> scratch;
  TensorStats stats;
  stats.count = n;
  Status st = VisitDType(tensor.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    REMEX_ASSIGN_OR_RETURN(const void* raw, HostView(device, tensor, scratch));
    const T* data = static_cast<const T*>(raw);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // Two passes (mean, then squared deviations) keep the variance accurate.
    double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -lo;
    uint64_t finite = 0;
    for (size_t i = 0; i < n; ++i) {
      double v = ToDouble(data[i]);
      if (std::isnan(v)) {
        stats.nan_count++;
      } else if (std::isinf(v)) {
        stats.inf_count++;
      } else {
        ++finite;
        sum += v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
    }
    if (finite == 0) {
      stats.min = stats.max = stats.mean = stats.std = nan;
      return OkStatus();
    }
    double mean = sum / static_cast<double>(finite);
    double sq = 0;
    for (size_t i = 0; i < n; ++i) {
      double v = ToDouble(data[i]);
      if (std::isfinite(v)) sq += (v - mean) * (v - mean);
    }
    stats.min = lo;
    stats.max = hi;
    stats.mean = mean;
    stats.std = std::sqrt(sq / static_cast<double>(finite));
    return OkStatus();
  });
  REMEX_RETURN_IF_ERROR(st);
  return stats;
}

StatusOr<Comparison> CompareTensors(Device& device, const Tensor& a, const Tensor& b, double rtol, double atol,
                                     bool equal_nan) {
  if (a.dtype != b.dtype) {
    return InvalidArgument("cannot compare a " + std::string(DTypeName(a.dtype)) + " tensor with a " +
                           std::string(DTypeName(b.dtype)) + " tensor");
  }
  if (a.shape != b.shape) {
    return InvalidArgument("cannot compare tensors of shapes " + ShapeToString(a.shape) + " and " +
                           ShapeToString(b.shape));
  }
  if (!ValidTolerances(rtol, atol)) {
    return InvalidArgument("rtol and atol must be finite and >= 0, got rtol " + std::to_string(rtol) + ", atol " +
                           std::to_string(atol));
  }
  REMEX_ASSIGN_OR_RETURN(size_t n, ElementCount(a));
  std::vector<std::byte> scratch_a, scratch_b;
  AllcloseAccumulator acc(rtol, atol, equal_nan);
  Status st = VisitDType(a.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    REMEX_ASSIGN_OR_RETURN(const void* raw_a, HostView(device, a, scratch_a));
    REMEX_ASSIGN_OR_RETURN(const void* raw_b, HostView(device, b, scratch_b));
    const T* pa = static_cast<const T*>(raw_a);
    const T* pb = static_cast<const T*>(raw_b);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        acc.Add(ToDouble(pa[i]), ToDouble(pb[i]), pa[i] == pb[i]);
      } else {
        acc.Add(ToDouble(pa[i]), ToDouble(pb[i]));
      }
    }
    return OkStatus();
  });
  REMEX_RETURN_IF_ERROR(st);
  return acc.stats();
}

Status CheckFill(DType dtype, const TensorFill& unresolved) {
  const TensorFill fill = ResolveFillBounds(dtype, unresolved);
  REMEX_RETURN_IF_ERROR(VisitDType(dtype, [](auto) { return OkStatus(); }));
  switch (fill.kind) {
    case TensorFill::Kind::kZeros:
      return OkStatus();
    case TensorFill::Kind::kUniform: {
      if (!std::isfinite(fill.low) || !std::isfinite(fill.high) || !(fill.low < fill.high)) {
        return InvalidArgument("uniform fill needs finite bounds with low < high, got [" +
                               std::to_string(fill.low) + ", " + std::to_string(fill.high) + ")");
      }
      if (!IsFloating(dtype)) {
        double lo = 0, hi = 0;
        IntegerRange(dtype, lo, hi);
        if (std::floor(fill.low) < lo || std::ceil(fill.high) - 1 > hi) {
          return InvalidArgument("uniform fill [" + std::to_string(fill.low) + ", " +
                                 std::to_string(fill.high) + ") leaves the values of " +
                                 std::string(DTypeName(dtype)));
        }
      }
      return OkStatus();
    }
    case TensorFill::Kind::kNormal:
      if (!IsFloating(dtype)) {
        return InvalidArgument(
            "normal fill needs a floating dtype (float32, float64, float16, bfloat16), not " +
            std::string(DTypeName(dtype)));
      }
      if (!std::isfinite(fill.mean) || !std::isfinite(fill.scale) || fill.scale < 0) {
        return InvalidArgument("normal fill needs a finite mean and a finite scale >= 0");
      }
      return OkStatus();
  }
  return InvalidArgument("unknown fill kind");
}

Status FillTensor(Device& device, Tensor& tensor, const TensorFill& unresolved,
                  const std::function<void()>& yield) {
  REMEX_RETURN_IF_ERROR(CheckFill(tensor.dtype, unresolved));
  const TensorFill fill = ResolveFillBounds(tensor.dtype, unresolved);
  REMEX_ASSIGN_OR_RETURN(size_t n, ElementCount(tensor));
  if (n == 0) return OkStatus();
  if (fill.kind == TensorFill::Kind::kZeros) return device.Memset(tensor.data(), 0, tensor.nbytes());
  const double low = fill.low, high = fill.high;
  // A host-addressable device's memory is written in place, once its work on it is done.
  const bool in_place = device.capabilities().host_addressable;
  if (in_place) REMEX_RETURN_IF_ERROR(device.Synchronize());
  return VisitDType(tensor.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    constexpr size_t kBlock = (size_t{1} << 20) / sizeof(T);
    std::vector<T> host;
    if (!in_place) host.resize(std::min(n, kBlock));
    T* out = static_cast<T*>(tensor.data());
    for (size_t begin = 0; begin < n; begin += kBlock) {
      const size_t count = std::min(kBlock, n - begin);
      T* block = in_place ? out + begin : host.data();
      for (size_t k = 0; k < count; ++k)
        block[k] = FromDouble<T>(FillValue(fill, low, high, begin + k), fill, high);
      if (!in_place) REMEX_RETURN_IF_ERROR(device.CopyToDevice(out + begin, block, count * sizeof(T)));
      if (yield) yield();
    }
    return OkStatus();
  });
}

}  // namespace remex::vm
