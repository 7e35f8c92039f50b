// The fixture of the nn group's CUDA differential tests (nn_cuda_test.cc,
// nn_loss_cuda_test.cc): random inputs, and Check, which runs an op on the CPU and on the
// GPU and compares every output within per-dtype tolerances. It skips without a GPU.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels::nntest {

using testing::Attrs;
using testing::CudaRegistry;
using testing::FloatValues;
using testing::HostTensor;
using testing::OpRunner;

inline constexpr DType kF32 = DType::kFloat32;
inline constexpr DType kF16 = DType::kFloat16;
inline constexpr DType kFloatTypes[] = {kF32, kF16};

// Absolute and relative tolerances per float dtype: |got - want| <= abs + rel * |want|.
struct Tolerance {
  double f32_abs = 1e-6, f32_rel = 1e-5;
  double f16_abs = 2e-3, f16_rel = 4e-3;
};

inline constexpr Tolerance kExact = {0, 0, 0, 0};
inline constexpr Tolerance kSums = {1e-4, 1e-4, 4e-3, 4e-3};

class NnCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REMEX_SKIP_WITHOUT_GPU();
    registry_ = CudaRegistry();
    ASSERT_TRUE(registry_);
  }

  // Random values in [lo, hi] of `dtype` (floats; integers rounded; bool by sign).
  HostTensor Random(DType dtype, Shape shape, double lo = -2, double hi = 2) {
    const int64_t n = NumElements(shape).value_or(0);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = dist(rng_);
    return Make(dtype, std::move(shape), v);
  }

  // Integer-valued floats (ties for ArgMax, comparisons).
  HostTensor RandomInts(DType dtype, Shape shape, int lo, int hi) {
    const int64_t n = NumElements(shape).value_or(0);
    std::uniform_int_distribution<int> dist(lo, hi);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = dist(rng_);
    return Make(dtype, std::move(shape), v);
  }

  static HostTensor Make(DType dtype, Shape shape, const std::vector<double>& v) {
    switch (dtype) {
      case kF32:
        return HostTensor::Of<float>(std::move(shape), Convert<float>(v));
      case kF16: {
        std::vector<Half> h;
        for (double x : v) h.push_back(FloatToHalf(static_cast<float>(x)));
        return HostTensor::Of<Half>(std::move(shape), h);
      }
      case DType::kInt32:
        return HostTensor::Of<int32_t>(std::move(shape), Convert<int32_t>(v));
      case DType::kInt64:
        return HostTensor::Of<int64_t>(std::move(shape), Convert<int64_t>(v));
      case DType::kBool: {
        HostTensor t = HostTensor::Zeros(DType::kBool, std::move(shape));
        for (size_t i = 0; i < v.size(); ++i) t.bytes[i] = v[i] > 0 ? 1 : 0;
        return t;
      }
      default:
        break;
    }
    std::abort();
  }

  template <typename T>
  static std::vector<T> Convert(const std::vector<double>& v) {
    std::vector<T> out;
    for (double x : v) out.push_back(static_cast<T>(x));
    return out;
  }

  // Sets element i of a float tensor to NaN.
  static void PutNan(HostTensor& t, size_t i) {
    if (t.dtype == kF32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(t.bytes.data() + i * 4, &nan, 4);
    } else {
      const Half nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
      std::memcpy(t.bytes.data() + i * 2, &nan, 2);
    }
  }

  // Runs `op` on the CPU and on the GPU (inputs declared ShapeDep::kData stay in host
  // memory, as the VM passes them) and compares every output.
  void Check(std::string_view op, const Attributes& attrs, std::vector<HostTensor> inputs, Tolerance tol = {},
             std::optional<size_t> num_outputs = std::nullopt) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, num_outputs, nullptr, 0xff);
    ASSERT_TRUE(out.ok()) << "CUDA " << op << ": " << out.status().ToString();
    const std::vector<HostTensor>& want = out->cpu;
    for (size_t k = 0; k < want.size(); ++k) {
      SCOPED_TRACE(std::string(op) + " output " + std::to_string(k) + " " + ShapeToString(want[k].shape) +
                   " " + std::string(DTypeName(want[k].dtype)));
      Compare(out->cuda[k], want[k], tol);
    }
  }

  static void Compare(const HostTensor& got, const HostTensor& want, Tolerance tol) {
    ASSERT_EQ(got.dtype, want.dtype);
    ASSERT_EQ(got.shape, want.shape);
    if (want.dtype != kF32 && want.dtype != kF16) {
      ASSERT_EQ(got.bytes.size(), want.bytes.size());
      if (want.dtype == DType::kInt64) {
        EXPECT_EQ(got.Values<int64_t>(), want.Values<int64_t>());
      } else {
        EXPECT_EQ(got.bytes, want.bytes);
      }
      return;
    }
    const std::vector<double> g = FloatValues(got);
    const std::vector<double> w = FloatValues(want);
    const double abs = want.dtype == kF32 ? tol.f32_abs : tol.f16_abs;
    const double rel = want.dtype == kF32 ? tol.f32_rel : tol.f16_rel;
    int failures = 0;
    for (size_t i = 0; i < w.size() && failures < 5; ++i) {
      const bool ok = std::isnan(w[i])   ? std::isnan(g[i])
                      : std::isinf(w[i]) ? g[i] == w[i]
                                         : std::fabs(g[i] - w[i]) <= abs + rel * std::fabs(w[i]);
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "element " << i << ": cuda " << g[i] << ", cpu " << w[i];
      }
    }
  }

  std::unique_ptr<KernelRegistry> registry_;
  std::mt19937 rng_{20240607};
};

inline HostTensor Int64s(Shape shape, std::vector<int64_t> v) {
  return HostTensor::Of<int64_t>(std::move(shape), v);
}
inline HostTensor Floats(Shape shape, std::vector<float> v) { return HostTensor::Of<float>(std::move(shape), v); }

}  // namespace remex::kernels::nntest
