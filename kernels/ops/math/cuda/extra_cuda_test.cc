// Differential tests of the extra group's CUDA kernels (each in its op family's cuda/
// folder, see kernels/cuda/README.md#op-families) against the CPU kernels: the window ops (every window, periodic and symmetric, float and
// integer output dtypes, sizes around the block size), MeanVarianceNormalization (both
// entries, float32 / float16 / float64, default and other axes), ReverseSequence (both
// axis orders, trailing dims, element sizes 1 to 8, and out-of-range lengths, which the
// CUDA kernel clamps), Det (batches, sizes 1 to 7, singular and empty matrices) and
// Einsum (matmuls, transposes, sums, diagonals, ellipsis with broadcasting, three
// inputs, empty extents; every dtype) and FusedAttention (the head-split axis orders,
// K given transposed, masks that broadcast and a causal one, keys over several chunks,
// heads past each shared-array size, rank 3, no keys; within rounding). Windows match within a few ulp (cos runs on each
// device's own library); the others bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration
// runs everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CudaRegistry;
using testing::HostTensor;

TEST(ExtraCudaRegistration, RegistersEveryOpAndEntry) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op :
       {"HannWindow", "HammingWindow", "BlackmanWindow", "ReverseSequence", "Det", "Einsum", "FusedAttention"}) {
    EXPECT_TRUE(registry->FindKernel(op, DeviceKind::kCuda)) << op;
  }
  EXPECT_TRUE(registry->FindKernel("MeanVarianceNormalization", 9, DeviceKind::kCuda));
  EXPECT_TRUE(registry->FindKernel("MeanVarianceNormalization", 13, DeviceKind::kCuda));
}

class ExtraCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs, double rel = 0) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << op << " on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i)
      testing::ExpectSameElements(op, out->cpu[i], out->cuda[i].bytes, i, rel);
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  HostTensor Doubles(Shape shape, DType dtype) {
    std::vector<double> v(static_cast<size_t>(NumElements(shape).value_or(0)));
    std::uniform_real_distribution<double> d(-3.0, 5.0);
    for (double& x : v) x = d(rng_);
    return testing::ConvertFloat(HostTensor::Of<double>(std::move(shape), v), dtype);
  }

  std::mt19937 rng_{20261126};
};

TEST_F(ExtraCudaTest, Windows) {
  // Relative tolerances: the CPU's and the GPU's cos differ by an ulp or two, relative
  // to 1, which near the window's zeros is far more than the value's ulp.
  const std::pair<int64_t, double> dtypes[] = {{1, 1e-6}, {10, 1e-3}, {11, 1e-8}, {7, 0}, {2, 0}};
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    for (int64_t periodic : {0, 1}) {
      for (const auto& [onnx_dtype, rel] : dtypes) {
        for (int64_t size : {1, 2, 10, 257, 4099}) {
          // Integers truncate: where the window peaks at 1 (an even N has x = pi), a cos an
          // ulp off makes 0 of 1, so integer dtypes take the sizes whose N is odd.
          const int64_t big_n = periodic ? size : size - 1;
          if (rel == 0 && big_n % 2 == 0 && big_n > 0) continue;
          SCOPED_TRACE(std::string(op) + " periodic " + std::to_string(periodic) + " dtype " +
                       std::to_string(onnx_dtype) + " size " + std::to_string(size));
          const HostTensor s = size % 2 ? HostTensor::Of<int32_t>({}, {static_cast<int32_t>(size)})
                                        : HostTensor::Of<int64_t>({1}, {size});
          Check(op, Attrs({{"periodic", periodic}, {"output_datatype", onnx_dtype}}), {s}, rel);
        }
      }
    }
  }
  Check("HannWindow", {}, {HostTensor::Of<int64_t>({}, {0})});
}

TEST_F(ExtraCudaTest, MeanVarianceNormalization) {
  for (int iter = 0; iter < 40; ++iter) {
    const DType dtype = iter % 3 == 0 ? DType::kFloat16 : iter % 3 == 1 ? DType::kFloat32 : DType::kFloat64;
    const bool defaults = iter % 4 == 0;
    Shape s(static_cast<size_t>(defaults ? Uniform(4, 5) : Uniform(1, 5)));
    for (int64_t& d : s) d = Uniform(1, 7);
    Attributes attrs;
    if (!defaults) {
      std::vector<int64_t> axes;
      const int64_t rank = static_cast<int64_t>(s.size());
      for (int64_t d = 0; d < rank; ++d) {
        if (Uniform(0, 1)) axes.push_back(Uniform(0, 1) ? d : d - rank);
      }
      attrs.Set("axes", axes);
    }
    SCOPED_TRACE(ShapeToString(s) + " " + std::string(DTypeName(dtype)));
    Check(iter % 2 ? "MeanVarianceNormalization" : "MeanVarianceNormalization-9", attrs, {Doubles(s, dtype)});
  }
  Check("MeanVarianceNormalization", {}, {Doubles({300, 2, 40, 3}, DType::kFloat32)});  // Many groups.
  Check("MeanVarianceNormalization", {}, {HostTensor::Zeros(DType::kFloat32, {2, 3, 0, 4})});
}

TEST_F(ExtraCudaTest, ReverseSequence) {
  const DType dtypes[] = {DType::kUint8, DType::kFloat16, DType::kFloat32, DType::kInt64, DType::kBool};
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t batch_axis = iter % 2, time_axis = 1 - batch_axis;
    Shape s(static_cast<size_t>(Uniform(2, 4)));
    for (int64_t& d : s) d = Uniform(1, 6);
    if (iter == 7) s = {300, 5, 40};
    HostTensor x = HostTensor::Zeros(dtypes[iter % 5], s);
    for (uint8_t& b : x.bytes)
      b = static_cast<uint8_t>(Uniform(0, dtypes[iter % 5] == DType::kBool ? 1 : 255));
    std::vector<int64_t> lens(static_cast<size_t>(s[batch_axis]));
    for (int64_t& l : lens) l = Uniform(0, s[time_axis]);
    SCOPED_TRACE(ShapeToString(s) + " batch_axis " + std::to_string(batch_axis));
    Check("ReverseSequence", Attrs({{"batch_axis", batch_axis}, {"time_axis", time_axis}}),
          {x, HostTensor::Of<int64_t>({s[batch_axis]}, lens)});
  }
}

// Lengths outside [0, time] are refused by the CPU kernel; the CUDA kernel, reading
// them on the device, clamps them: the result is the CPU's for the clamped lengths.
TEST_F(ExtraCudaTest, ReverseSequenceClampsOutOfRangeLengths) {
  const Attributes attrs = Attrs({{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}});
  const Shape s = {4, 5, 3};
  std::vector<float> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const HostTensor x = HostTensor::Of<float>(s, v);
  const std::vector<int64_t> bad = {-7, 6, INT64_MAX, INT64_MIN}, clamped = {0, 5, 5, 0};
  std::vector<HostTensor> want_in = {x, HostTensor::Of<int64_t>({4}, clamped)};
  auto want =
      testing::RunOnCpuAndCuda(*registry_, "ReverseSequence", attrs, want_in, std::nullopt, stream_, 0xCD);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const KernelFactory* factory = registry_->FindKernel("ReverseSequence", DeviceKind::kCuda);
  ASSERT_TRUE(factory);
  auto kernel = (*factory)(attrs);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  std::vector<HostTensor> in = {x, HostTensor::Of<int64_t>({4}, bad)};
  auto got = testing::RunOnDevice(**kernel, registry_->FindOp("ReverseSequence"), in, {{DType::kFloat32, s}},
                                  stream_, 0xCD);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectSameElements("ReverseSequence", want->cpu[0], (*got)[0].bytes, 0);
}

TEST_F(ExtraCudaTest, Det) {
  for (int iter = 0; iter < 30; ++iter) {
    const DType dtype = iter % 3 == 0 ? DType::kFloat16 : iter % 3 == 1 ? DType::kFloat32 : DType::kFloat64;
    Shape s(static_cast<size_t>(Uniform(0, 2)));
    for (int64_t& d : s) d = Uniform(1, 4);
    const int64_t m = Uniform(1, 7);
    s.push_back(m);
    s.push_back(m);
    SCOPED_TRACE(ShapeToString(s) + " " + std::string(DTypeName(dtype)));
    Check("Det", {}, {Doubles(s, dtype)});
  }
  // Singular (repeated rows) and empty matrices; many matrices.
  Check("Det", {}, {HostTensor::Of<float>({2, 2, 2}, {1, 2, 1, 2, 0, 0, 3, 4})});
  Check("Det", {}, {HostTensor::Zeros(DType::kFloat32, {4, 0, 0})});
  Check("Det", {}, {Doubles({500, 3, 3}, DType::kFloat32)});
}

TEST_F(ExtraCudaTest, Einsum) {
  struct Case {
    const char* equation;
    std::vector<Shape> shapes;
  };
  const Case cases[] = {
      {"ij,jk->ik", {{5, 7}, {7, 3}}},
      {"bij,bjk->bik", {{3, 4, 5}, {3, 5, 2}}},
      {"ij->ji", {{4, 6}}},
      {"ij->", {{3, 5}}},
      {"i,i", {{9}, {9}}},
      {"ii->i", {{6, 6}}},
      {"...ii->...i", {{3, 2, 4, 4}}},
      {"...ij,...jk", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"i,ij,j->", {{3}, {3, 4}, {4}}},
      {"abc,cd->dba", {{2, 3, 4}, {4, 5}}},
      {"...i->i", {{2, 3, 4}}},
      {"ij,ij->ij", {{64, 33}, {64, 33}}},
      {"ik,k->i", {{0, 3}, {3}}},
      {"ik,kj->ij", {{2, 0}, {0, 3}}},
  };
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32, DType::kInt64};
  for (const Case& c : cases) {
    for (DType dtype : dtypes) {
      SCOPED_TRACE(std::string(c.equation) + " " + std::string(DTypeName(dtype)));
      std::vector<HostTensor> in;
      for (const Shape& s : c.shapes) {
        if (dtype == DType::kInt32 || dtype == DType::kInt64) {
          HostTensor t = HostTensor::Zeros(dtype, s);
          for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(Uniform(0, 255));  // Wraps.
          in.push_back(t);
        } else {
          in.push_back(Doubles(s, dtype));
        }
      }
      Check("Einsum", Attrs({{"equation", std::string(c.equation)}}), in);
    }
  }
}


// FusedAttention against the CPU kernel (sgemm products, two-pass softmax): the CUDA
// kernel's online softmax and its sums' order differ, so within rounding: 2e-5 absolute
// plus 1e-4 relative (outputs are averages of V's rows, of magnitude up to 5).
TEST_F(ExtraCudaTest, FusedAttention) {
  struct Case {
    std::string name;
    Shape q, k, v, mask;  // stored shapes; mask empty: none
    std::vector<int64_t> q_perm, k_perm, v_perm, y_perm;
    float scale = 0.5f;
    bool causal = false;
  };
  const std::vector<int64_t> bshd = {0, 2, 1, 3};
  const std::vector<Case> cases = {
      {"identity", {2, 3, 7, 8}, {2, 3, 9, 8}, {2, 3, 9, 6}, {}, {}, {}, {}, {}, 0.35f},
      {"heads split and merged, key mask", {2, 7, 3, 8}, {2, 9, 3, 8}, {2, 9, 3, 8}, {1, 1, 1, 9}, bshd, bshd,
       bshd, bshd},
      {"K transposed, per-head mask", {1, 2, 5, 4}, {1, 2, 4, 11}, {1, 2, 11, 4}, {2, 5, 11}, {}, {0, 1, 3, 2},
       {}, {}},
      {"causal decoder step", {1, 2, 3, 16}, {1, 2, 40, 16}, {1, 2, 40, 16}, {3, 40}, {}, {}, {}, {}, 0.25f, true},
      {"keys over three chunks", {1, 1, 3, 8}, {1, 1, 600, 8}, {1, 1, 600, 5}, {}, {}, {}, {}, {}, 2.0f},
      {"heads past 128", {1, 1, 2, 200}, {1, 1, 5, 200}, {1, 1, 5, 300}, {}, {}, {}, {}, {}, 0.05f},
      {"heads past 512", {1, 1, 2, 40}, {1, 1, 5, 40}, {1, 1, 5, 700}, {}, {}, {}, {}, {}, 0.1f},
      {"rank 3", {4, 6, 8}, {4, 10, 8}, {4, 10, 8}, {}, {}, {}, {}, {}},
      {"no keys", {2, 3, 4}, {2, 0, 4}, {2, 0, 4}, {}, {}, {}, {}, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<HostTensor> in = {Doubles(c.q, DType::kFloat32), Doubles(c.k, DType::kFloat32),
                                  Doubles(c.v, DType::kFloat32)};
    if (!c.mask.empty()) {
      HostTensor m = Doubles(c.mask, DType::kFloat32);
      if (c.causal) {  // [Sq, Sk]: -1e9 where the key lies after the query
        const int64_t sq = c.mask[0], sk = c.mask[1];
        std::vector<float> values(static_cast<size_t>(sq * sk));
        for (int64_t i = 0; i < sq; ++i) {
          for (int64_t j = 0; j < sk; ++j) values[i * sk + j] = j > i + (sk - sq) ? -1e9f : 0.0f;
        }
        m = HostTensor::Of<float>(c.mask, values);
      }
      in.push_back(std::move(m));
    }
    Attributes attrs = Attrs({{"scale", c.scale}});
    if (!c.q_perm.empty()) attrs.Set("q_perm", c.q_perm);
    if (!c.k_perm.empty()) attrs.Set("k_perm", c.k_perm);
    if (!c.v_perm.empty()) attrs.Set("v_perm", c.v_perm);
    if (!c.y_perm.empty()) attrs.Set("y_perm", c.y_perm);
    auto out = testing::RunOnCpuAndCuda(*registry_, "FusedAttention", attrs, in, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> want = out->cpu[0].Values<float>();
    ASSERT_EQ(out->cuda[0].bytes.size(), want.size() * sizeof(float));
    std::vector<float> got(want.size());
    std::memcpy(got.data(), out->cuda[0].bytes.data(), out->cuda[0].bytes.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 + 1e-4 * std::fabs(want[i])) << "element " << i;
    }
  }
}

TEST_F(ExtraCudaTest, FusedAttentionRefusesHeadsPastItsSharedArrays) {
  auto kernel = testing::CreateCudaKernel(*registry_, "FusedAttention", Attrs({}));
  ASSERT_TRUE(kernel);
  std::vector<HostTensor> in = {HostTensor::Zeros(DType::kFloat32, {1, 1, 4097}),
                                HostTensor::Zeros(DType::kFloat32, {1, 1, 4097}),
                                HostTensor::Zeros(DType::kFloat32, {1, 1, 4})};
  auto out = testing::RunOnDevice(*kernel, nullptr, in, {TensorInfo{DType::kFloat32, {1, 1, 4}}}, stream_, 0);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnimplemented) << out.status().ToString();
  EXPECT_NE(out.status().message().find("at most 4096"), std::string::npos) << out.status().ToString();
}

}  // namespace
}  // namespace remex::kernels
