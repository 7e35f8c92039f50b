// Differential tests of the GridSample CUDA kernel (kernels/ops/image/cuda/grid_sample.cc) against the
// CPU kernel: every mode (bilinear, nearest, bicubic) x padding mode (zeros, border,
// reflection) x align_corners, grids reaching well outside [-1, 1], grid points on
// pixel centres and half-way points (round half to even), one-pixel axes, several
// batches and channels, float16 / float32 / float64, and NaN and infinite grid
// values. Outputs must match bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration runs
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CudaRegistry;
using testing::HostTensor;

TEST(GridCudaRegistration, RegistersEveryEntry) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  EXPECT_TRUE(registry->FindKernel("GridSample", 16, DeviceKind::kCuda));
}

class GridCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const Attributes& attrs, std::vector<HostTensor> inputs) {
    auto out = testing::RunOnCpuAndCuda(*registry_, "GridSample", attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << "GridSample on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i)
      testing::ExpectSameElements("GridSample", out->cpu[i], out->cuda[i].bytes, i, 0);
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // Values in [lo, hi] of `dtype`; with `snap`, a third of them on multiples of 1/8
  // (pixel centres and half-way points for small sizes).
  HostTensor Floats(DType dtype, Shape shape, double lo, double hi, bool snap) {
    HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
    const size_t es = DTypeSize(dtype), n = t.bytes.size() / es;
    std::uniform_real_distribution<double> d(lo, hi);
    for (size_t i = 0; i < n; ++i) {
      double v = d(rng_);
      if (snap && Uniform(0, 2) == 0) v = std::round(v * 8) / 8;
      uint8_t* p = t.bytes.data() + i * es;
      if (dtype == DType::kFloat32) {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else if (dtype == DType::kFloat64) {
        std::memcpy(p, &v, 8);
      } else {
        const Half h = DoubleToHalf(v);
        std::memcpy(p, &h.bits, 2);
      }
    }
    return t;
  }

  std::mt19937 rng_{20261126};
};

TEST_F(GridCudaTest, EveryModePaddingAndAlignment) {
  const char* modes[] = {"bilinear", "nearest", "bicubic"};
  const char* paddings[] = {"zeros", "border", "reflection"};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
  int iter = 0;
  for (const char* mode : modes) {
    for (const char* padding : paddings) {
      for (int64_t align : {0, 1}) {
        for (DType dtype : dtypes) {
          for (int rep = 0; rep < 3; ++rep, ++iter) {
            const int64_t n = Uniform(1, 2), c = Uniform(1, 3);
            // Some one-pixel axes (reflection's empty range with align_corners).
            const int64_t h = iter % 5 == 0 ? 1 : Uniform(1, 9), w = iter % 7 == 0 ? 1 : Uniform(1, 9);
            const int64_t ho = Uniform(1, 7), wo = Uniform(1, 7);
            SCOPED_TRACE(std::string(mode) + " " + padding + " align_corners " + std::to_string(align) + " " +
                         std::string(DTypeName(dtype)) + " X [" + std::to_string(n) + ", " +
                         std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) + "]");
            // Grids reaching 3.5 times outside [-1, 1] (several reflections).
            const double reach = rep == 0 ? 1.0 : 3.5;
            Check(Attrs({{"mode", std::string(mode)},
                         {"padding_mode", std::string(padding)},
                         {"align_corners", align}}),
                  {Floats(dtype, {n, c, h, w}, -5.0, 5.0, false),
                   Floats(dtype, {n, ho, wo, 2}, -reach, reach, true)});
          }
        }
      }
    }
  }
}

TEST_F(GridCudaTest, LargerImage) {
  Check(Attrs({{"mode", std::string("bicubic")}, {"padding_mode", std::string("reflection")}}),
        {Floats(DType::kFloat32, {2, 3, 33, 47}, -1.0, 1.0, false),
         Floats(DType::kFloat32, {2, 40, 50, 2}, -1.5, 1.5, false)});
}

TEST_F(GridCudaTest, NotFiniteGridValues) {
  const float nan = std::nanf(""), inf = INFINITY;
  const HostTensor x = HostTensor::Of<float>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const HostTensor g =
      HostTensor::Of<float>({1, 2, 3, 2}, {nan, 0, 0, nan, inf, 0, -inf, 0.5f, 1e30f, -1e30f, 0, inf});
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      SCOPED_TRACE(std::string(mode) + " " + padding);
      Check(Attrs({{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}}), {x, g});
    }
  }
}

}  // namespace
}  // namespace remex::kernels
