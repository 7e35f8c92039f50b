// Differential tests of the training-mode CUDA kernels against the CPU kernels: the
// optimizers Adagrad, Adam and Momentum (standard and Nesterov; training/cuda/optimizer.cc)
// on random tensors, one to three per call, float32 and float64, learning rates of
// either dtype, update counts 0 and beyond (Adam's bias correction, Momentum's beta),
// empty tensors among them; and Dropout's training mode (elementwise/cuda/dropout.cc) with a
// seed, float16 / float32 / float64, with and without the mask output, ratios across
// (0, 1). Outputs must match bit for bit. Without a seed the two devices draw
// different masks, so the CUDA kernel's output is checked against its own mask.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration runs
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

TEST(TrainingCudaRegistration, RegistersEveryEntryAndChecksAttributesWhenMade) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : {"Adagrad", "Adam", "Momentum"}) EXPECT_TRUE(registry->FindKernel(op, 1, DeviceKind::kCuda)) << op;
  const KernelFactory* momentum = registry->FindKernel("Momentum", 1, DeviceKind::kCuda);
  ASSERT_TRUE(momentum);
  auto k = (*momentum)(Attrs({{"alpha", 0.9f}, {"beta", 0.1f}, {"mode", std::string("heavy")},
                              {"norm_coefficient", 0.0f}}));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument) << k.status().ToString();
  EXPECT_TRUE((*momentum)(Attrs({{"alpha", 0.9f}, {"beta", 0.1f}, {"mode", std::string("nesterov")},
                                 {"norm_coefficient", 0.0f}}))
                  .ok());
}

class TrainingCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs,
             std::optional<size_t> outputs = std::nullopt) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, outputs, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << op << " on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i) testing::ExpectSameElements(op, out->cpu[i], out->cuda[i].bytes, i, 0);
  }

  double Real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  HostTensor Values(DType dtype, Shape shape, double lo, double hi) {
    const int64_t n = *NumElements(shape);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = Real(lo, hi);
    switch (dtype) {
      case DType::kFloat64: return HostTensor::Of<double>(std::move(shape), v);
      case DType::kFloat16: {
        std::vector<Half> h;
        for (double x : v) h.push_back(FloatToHalf(static_cast<float>(x)));
        return HostTensor::Of<Half>(std::move(shape), h);
      }
      default: return HostTensor::Of<float>(std::move(shape), std::vector<float>(v.begin(), v.end()));
    }
  }

  std::mt19937 rng_{20261127};
};

TEST_F(TrainingCudaTest, Optimizers) {
  struct Rule {
    const char* op;
    int states;
    Attributes attrs;
  };
  const std::vector<Rule> rules = {
      {"Adagrad", 1, Attrs({{"decay_factor", 0.1f}, {"epsilon", 1e-5f}, {"norm_coefficient", 0.001f}})},
      {"Adagrad", 1, {}},
      {"Adam", 2, Attrs({{"alpha", 0.95f}, {"beta", 0.85f}, {"epsilon", 1e-6f}, {"norm_coefficient", 0.001f},
                         {"norm_coefficient_post", 0.01f}})},
      {"Adam", 2, {}},
      {"Momentum", 1, Attrs({{"alpha", 0.95f}, {"beta", 0.1f}, {"mode", std::string("standard")},
                             {"norm_coefficient", 0.001f}})},
      {"Momentum", 1, Attrs({{"alpha", 0.9f}, {"beta", 0.5f}, {"mode", std::string("nesterov")},
                             {"norm_coefficient", 0.01f}})},
  };
  for (int iter = 0; iter < 48; ++iter) {
    const Rule& rule = rules[static_cast<size_t>(iter) % rules.size()];
    const DType dtype = iter % 4 < 2 ? DType::kFloat32 : DType::kFloat64;
    const DType rate_dtype = iter % 3 == 0 ? DType::kFloat64 : DType::kFloat32;
    const int64_t n = Uniform(1, 3);
    const int64_t t = iter % 2 == 0 ? 0 : Uniform(1, 5000);
    SCOPED_TRACE(std::string(rule.op) + " iter " + std::to_string(iter) + " t " + std::to_string(t));
    std::vector<Shape> shapes;
    for (int64_t i = 0; i < n; ++i) {
      // An empty tensor now and then; one large enough for many blocks.
      if (iter % 7 == 3 && i == 0) {
        shapes.push_back({0, 3});
      } else if (iter % 11 == 5 && i == n - 1) {
        shapes.push_back({Uniform(300, 700), 17});
      } else {
        shapes.push_back({Uniform(1, 9), Uniform(1, 9)});
      }
    }
    std::vector<HostTensor> in;
    in.push_back(rate_dtype == DType::kFloat64 ? HostTensor::Of<double>({}, {Real(0.001, 0.5)})
                                               : HostTensor::Of<float>({}, {static_cast<float>(Real(0.001, 0.5))}));
    in.push_back(HostTensor::Of<int64_t>({}, {t}));
    for (const Shape& s : shapes) in.push_back(Values(dtype, s, -3, 3));    // X
    for (const Shape& s : shapes) in.push_back(Values(dtype, s, -2, 2));    // G
    for (int k = 0; k < rule.states; ++k) {
      // Adagrad's and Adam's H accumulate squares: not negative.
      const bool squares = std::string(rule.op) != "Momentum" && k == rule.states - 1;
      for (const Shape& s : shapes) in.push_back(Values(dtype, s, squares ? 0 : -1, squares ? 4 : 1));
    }
    Check(rule.op, rule.attrs, in);
  }
}

TEST_F(TrainingCudaTest, DropoutWithASeedDropsAsTheCpu) {
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64};
  for (int iter = 0; iter < 24; ++iter) {
    const DType dtype = types[iter % 3];
    const Shape s = iter % 8 == 7 ? Shape{3, 1000} : Shape{Uniform(1, 9), Uniform(1, 40)};
    const double ratio = iter % 5 == 0 ? 0.5 : Real(0.01, 0.99);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " ratio " + std::to_string(ratio));
    const Attributes attrs = Attrs({{"seed", static_cast<int64_t>(Uniform(-5, 1 << 20))}});
    HostTensor r = iter % 2 ? HostTensor::Of<float>({}, {static_cast<float>(ratio)}) : HostTensor::Of<double>({}, {ratio});
    std::vector<HostTensor> in = {Values(dtype, s, -4, 4), r, HostTensor::Of<bool>({}, {true})};
    Check("Dropout", attrs, in);     // output and mask
    Check("Dropout", attrs, in, 1);  // output only (the mask in workspace scratch)
  }
}

TEST_F(TrainingCudaTest, DropoutWithoutASeedScalesWhatItsMaskKeeps) {
  const Shape s = {4, 500};
  std::vector<HostTensor> in = {Values(DType::kFloat32, s, 1, 2), HostTensor::Of<float>({}, {0.25f}),
                                HostTensor::Of<bool>({}, {true})};
  const OpDef* def = testing::FindVersionedOp(*registry_, "Dropout");
  ASSERT_TRUE(def);
  auto infos = InferShapes(*def, {}, testing::ShapeArgs(*def, in));
  ASSERT_TRUE(infos.ok()) << infos.status().ToString();
  auto kernel = testing::CreateCudaKernel(*registry_, "Dropout", {});
  ASSERT_TRUE(kernel);
  auto a = testing::RunOnDevice(*kernel, def, in, *infos, stream_, 0xCD);
  auto b = testing::RunOnDevice(*kernel, def, in, *infos, stream_, 0xCD);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)[1].bytes, (*b)[1].bytes);  // 2000 draws agree with probability ~2^-1600.
  const std::vector<float> x = in[0].Values<float>();
  int kept = 0;
  for (const auto* out : {&*a, &*b}) {
    const std::vector<float> y = (*out)[0].Values<float>();
    for (size_t i = 0; i < y.size(); ++i) {
      const bool keep = (*out)[1].bytes[i] != 0;
      kept += keep;
      ASSERT_EQ(y[i], keep ? x[i] * (1.0f / 0.75f) : 0.0f) << i;
    }
  }
  EXPECT_NEAR(kept, 2 * 2000 * 0.75, 2 * 2000 * 0.05);
}

}  // namespace
}  // namespace remex::kernels
