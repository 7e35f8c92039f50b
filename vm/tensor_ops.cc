#include "vm/tensor_ops.h"

#include <cmath>
#include <limits>
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

// The tensor's bytes as the host can read them: in place on the CPU device, else a
// host copy kept in `scratch`.
StatusOr<const void*> HostView(Device& device, const Tensor& t, std::vector<std::byte>& scratch) {
  if (t.nbytes() == 0) return static_cast<const void*>(nullptr);
  if (device.kind() == kernels::DeviceKind::kCpu) return static_cast<const void*>(t.data());
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

}  // namespace remex::vm
