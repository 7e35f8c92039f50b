// Differential tests of the CUDA NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// kernels against the CPU kernels (kernels/ops/nn/loss.cc): every reduction, weights,
// ignore_index, int32 and int64 targets, 2-D to 4-D inputs and the log_prob output, in
// float32 and float16. They skip without a GPU.

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops/nn/cuda/nn_cuda_test_util.h"

namespace remex::kernels {
namespace nn_loss_cuda_test {

using nntest::kFloatTypes;
using nntest::NnCudaTest;
using nntest::Tolerance;
using testing::Attrs;
using testing::HostTensor;

TEST_F(NnCudaTest, NllAndSoftmaxCrossEntropyLoss) {
  struct Case {
    Shape shape;
    const char* reduction;
    bool weighted;
    std::optional<int64_t> ignore_index;
  };
  const Case cases[] = {
      {{5, 7}, "mean", false, std::nullopt}, {{5, 7}, "sum", true, std::nullopt},
      {{5, 7}, "none", false, 2},            {{3, 4, 9}, "mean", true, 0},
      {{3, 4, 9}, "none", true, std::nullopt}, {{2, 3, 4, 5}, "sum", false, -100},
      {{300, 10}, "mean", false, std::nullopt},  // more positions than one block's threads
  };
  std::mt19937 rng(5);
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(ShapeToString(c.shape) + " " + c.reduction);
      Attributes attrs = Attrs({{"reduction", std::string(c.reduction)}});
      if (c.ignore_index) attrs = Attrs({{"reduction", std::string(c.reduction)}, {"ignore_index", *c.ignore_index}});
      Shape target_shape = {c.shape[0]};
      target_shape.insert(target_shape.end(), c.shape.begin() + 2, c.shape.end());
      std::uniform_int_distribution<int64_t> cls(0, c.shape[1] - 1);
      std::vector<int64_t> t(static_cast<size_t>(NumElements(target_shape).value_or(0)));
      for (int64_t& v : t) v = cls(rng);
      if (c.ignore_index) t[0] = *c.ignore_index;
      std::vector<int32_t> t32(t.begin(), t.end());
      for (bool int64_targets : {true, false}) {
        std::vector<HostTensor> in = {Random(dt, c.shape, -4, 4),
                                      int64_targets ? HostTensor::Of<int64_t>(target_shape, t)
                                                    : HostTensor::Of<int32_t>(target_shape, t32)};
        if (c.weighted) in.push_back(Random(dt, {c.shape[1]}, 0.5, 2));
        const Tolerance tol = {1e-5, 1e-5, 4e-3, 4e-3};
        Check("NegativeLogLikelihoodLoss", attrs, in, tol);
        Check("SoftmaxCrossEntropyLoss", attrs, in, tol, 2);  // output and log_prob
        Check("SoftmaxCrossEntropyLoss", attrs, in, tol, 1);  // output only
      }
    }
  }
}

}  // namespace nn_loss_cuda_test
}  // namespace remex::kernels
