// Differential tests of the nn group's CUDA kernels (reductions, ArgMax/ArgMin,
// Softmax, pooling, Resize, normalisation, elementwise) against the CPU kernels on
// random data: odd extents, extent-1 and empty dims, negative axes, broadcasting and
// the attribute settings each op takes, in float32 and float16 (float16 with
// tolerances of a few float16 ulps).
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration and
// the checks that precede any CUDA call (dtypes, attributes) are tested everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/ops/nn/cuda/nn_cuda_test_util.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace nn_cuda_test {

using nntest::Floats;
using nntest::Int64s;
using nntest::kExact;
using nntest::kF16;
using nntest::kF32;
using nntest::kFloatTypes;
using nntest::kSums;
using nntest::NnCudaTest;
using nntest::Tolerance;
using testing::Attrs;
using testing::CudaRegistry;
using testing::FloatValues;
using testing::HostTensor;
using testing::OpRunner;

// ---------------------------------------------------------------------------
// Reductions.

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> axes;
  bool axes_given;
  int64_t keepdims;
  int64_t noop;
};

const ReduceCase kReduceCases[] = {
    {{7, 1, 5, 3}, {1, 3}, true, 1, 0},  // Inner reduced, extent-1 dim.
    {{4, 9, 6}, {-1}, true, 0, 0},       // Rows, negative axis.
    {{4, 9, 6}, {0}, true, 1, 0},        // Columns.
    {{3, 5, 2, 7}, {0, 2}, true, 0, 0},  // Alternating groups, inner kept.
    {{3, 5, 2, 7}, {1, 3}, true, 1, 0},  // Alternating groups, inner reduced.
    {{2, 3, 4}, {}, false, 1, 0},        // Every dim.
    {{2, 3, 4}, {}, true, 0, 1},         // Empty axes with noop_with_empty_axes.
    {{1, 1, 301}, {2}, true, 1, 0},      // Long rows.
    {{517, 3}, {0}, true, 0, 0},         // Long columns.
    {{3, 0, 4}, {1}, true, 1, 0},        // Empty reductions: the identity.
    {{5}, {0}, true, 0, 0},              // Scalar output.
    {{2, 1, 3}, {1}, true, 0, 0},
    {{3, 70, 2, 50}, {1, 3}, true, 1, 0},  // Long rows over two reduced groups.
    {{6, 130}, {-1}, true, 0, 0},          // Long contiguous rows.        // Reducing an extent-1 dim only.
};

class NnCudaReduceTest : public NnCudaTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(NnCudaReduceTest, MatchesCpu) {
  const std::string op = GetParam();
  double lo = -2, hi = 2;
  if (op == "ReduceProd") lo = 0.6, hi = 1.4;
  if (op == "ReduceLogSum") lo = 0.1;
  for (DType dt : kFloatTypes) {
    for (const ReduceCase& c : kReduceCases) {
      for (bool as_input : {false, true}) {
        if (!c.axes_given && as_input) continue;
        SCOPED_TRACE(op + " " + std::string(DTypeName(dt)) + " " + ShapeToString(c.shape) + " axes " +
                     ShapeToString(c.axes) + (as_input ? " (input)" : " (attribute)") +
                     " keepdims=" + std::to_string(c.keepdims));
        Attributes attrs = Attrs({{"keepdims", c.keepdims}, {"noop_with_empty_axes", c.noop}});
        std::vector<HostTensor> in = {Random(dt, c.shape, lo, hi)};
        if (c.axes_given) {
          if (as_input) {
            in.push_back(Int64s({static_cast<int64_t>(c.axes.size())}, c.axes));
          } else {
            attrs.Set("axes", c.axes);
          }
        }
        Check(op, attrs, std::move(in), kSums);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, NnCudaReduceTest,
                         ::testing::Values("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                           "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                                           "ReduceLogSumExp"));

TEST_F(NnCudaTest, ReductionsPropagateNan) {
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceLogSumExp"}) {
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      HostTensor x = Random(dt, {4, 6, 5});
      PutNan(x, 7);
      PutNan(x, 100);
      Check(op, Attrs({{"axes", std::vector<int64_t>{1}}}), {x}, kSums);
      Check(op, Attrs({{"axes", std::vector<int64_t>{2}}}), {x}, kSums);
      Check(op, Attrs({{"axes", std::vector<int64_t>{0, 2}}}), {x}, kSums);
    }
  }
}

TEST_F(NnCudaTest, ArgMaxArgMin) {
  const Shape shapes[] = {{4, 7, 5}, {6, 1}, {3, 33, 2}, {100}, {2, 70}};
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (DType dt : kFloatTypes) {
      for (const Shape& shape : shapes) {
        HostTensor x = RandomInts(dt, shape, -3, 3);  // Many ties.
        if (*NumElements(shape) > 20) PutNan(x, 13);
        const int64_t rank = static_cast<int64_t>(shape.size());
        for (int64_t axis = -rank; axis < rank; ++axis) {
          for (int64_t keepdims : {0, 1}) {
            for (int64_t last : {0, 1}) {
              SCOPED_TRACE(std::string(op) + " " + ShapeToString(shape) + " axis " + std::to_string(axis) +
                           " keepdims " + std::to_string(keepdims) + " select_last_index " +
                           std::to_string(last));
              Check(op, Attrs({{"axis", axis}, {"keepdims", keepdims}, {"select_last_index", last}}), {x},
                    kExact);
            }
          }
        }
      }
    }
  }
}

TEST_F(NnCudaTest, SoftmaxLogSoftmaxAndHardmax) {
  struct Case {
    Shape shape;
    int64_t axis;
    int64_t flatten;
  };
  const Case cases[] = {
      {{3, 5, 7}, -1, 0}, {{3, 5, 7}, 0, 0},  {{3, 5, 7}, 1, 0},       {{2, 1000}, -1, 0},
      {{4, 1, 3}, 1, 0},  {{9}, 0, 0},        {{3, 5, 7}, 1, 1},       {{3, 5, 7}, 0, 1},
      {{3, 5, 7}, 2, 1},  {{3, 5, 7}, -1, 1}, {{2, 3, 1, 300}, -2, 0},
  };
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(ShapeToString(c.shape) + " axis " + std::to_string(c.axis) + " flatten " +
                   std::to_string(c.flatten));
      Attributes attrs = Attrs({{"axis", c.axis}});
      const HostTensor x = Random(dt, c.shape, -6, 6);
      for (std::string op : {"Softmax", "LogSoftmax", "Hardmax"}) {
        SCOPED_TRACE(op);
        Check(c.flatten ? op + "-1" : op, attrs, {x}, op == "Hardmax" ? kExact : Tolerance{1e-6, 1e-5, 1e-3, 4e-3});
      }
    }
  }
  // Hardmax picks the first of equal maxima.
  Check("Hardmax", {}, {HostTensor::Of<float>({2, 3}, {1, 5, 5, 2, 2, 2})}, kExact);
}

// ---------------------------------------------------------------------------
// Pooling.

struct PoolCase {
  Shape x;
  Attributes attrs;
};

std::vector<PoolCase> PoolCases() {
  using V = std::vector<int64_t>;
  return {
      {{2, 3, 9, 11}, Attrs({{"kernel_shape", V{3, 3}}})},
      {{2, 3, 9, 11}, Attrs({{"kernel_shape", V{3, 2}}, {"strides", V{2, 3}}, {"pads", V{1, 0, 1, 1}}})},
      {{1, 2, 10, 9},
       Attrs({{"kernel_shape", V{3, 3}},
              {"strides", V{2, 2}},
              {"pads", V{1, 1, 0, 0}},
              {"ceil_mode", int64_t{1}}})},
      {{1, 2, 12, 13}, Attrs({{"kernel_shape", V{3, 3}}, {"dilations", V{2, 2}}, {"pads", V{2, 2, 2, 2}}})},
      {{1, 2, 9, 8},
       Attrs({{"kernel_shape", V{4, 3}}, {"strides", V{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})},
      {{1, 2, 9, 8},
       Attrs({{"kernel_shape", V{4, 3}}, {"strides", V{2, 1}}, {"auto_pad", std::string("SAME_LOWER")}})},
      {{1, 2, 9, 8},
       Attrs({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"auto_pad", std::string("VALID")}})},
      {{3, 4, 17}, Attrs({{"kernel_shape", V{4}}, {"strides", V{3}}, {"pads", V{2, 1}}})},
      {{1, 2, 5, 6, 7},
       Attrs({{"kernel_shape", V{2, 3, 2}}, {"strides", V{2, 2, 1}}, {"pads", V{1, 0, 1, 1, 1, 0}}})},
      {{1, 1, 1, 1}, Attrs({{"kernel_shape", V{1, 1}}})},
  };
}

TEST_F(NnCudaTest, MaxPool) {
  for (DType dt : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      SCOPED_TRACE(ShapeToString(c.x));
      HostTensor x = Random(dt, c.x);
      Check("MaxPool", c.attrs, {x}, kExact, 1);
      for (int64_t order : {0, 1}) {
        Attributes attrs = c.attrs;
        attrs.Set("storage_order", order);
        Check("MaxPool", attrs, {x}, kExact, 2);  // With Indices.
      }
    }
  }
}

TEST_F(NnCudaTest, AveragePool) {
  for (DType dt : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      for (int64_t include : {0, 1}) {
        SCOPED_TRACE(ShapeToString(c.x) + " count_include_pad " + std::to_string(include));
        Attributes attrs = c.attrs;
        attrs.Set("count_include_pad", include);
        Check("AveragePool", attrs, {Random(dt, c.x)}, {1e-6, 1e-6, 1e-3, 2e-3});
      }
    }
  }
}

// LpPool: window order and float accumulation on both devices; powf (p = 3) agrees to
// rounding.
TEST_F(NnCudaTest, LpPool) {
  for (DType dt : kFloatTypes) {
    for (const PoolCase& c : PoolCases()) {
      for (int64_t p : {1, 2, 3}) {
        SCOPED_TRACE(ShapeToString(c.x) + " p " + std::to_string(p));
        Attributes attrs = c.attrs;
        attrs.Set("p", p);
        Check("LpPool", attrs, {Random(dt, c.x)}, {1e-6, 1e-6, 1e-3, 2e-3});
      }
    }
  }
}

TEST_F(NnCudaTest, GlobalAveragePool) {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : {Shape{2, 3, 7, 5}, Shape{1, 4, 1}, Shape{2, 2, 33, 17}, Shape{1, 3, 2, 2, 2}}) {
      SCOPED_TRACE(ShapeToString(s));
      Check("GlobalAveragePool", {}, {Random(dt, s)}, kSums);
      Check("GlobalMaxPool", {}, {Random(dt, s)}, kExact);
    }
    HostTensor x = Random(dt, {2, 3, 40});
    PutNan(x, 45);  // plane 1
    Check("GlobalMaxPool", {}, {x}, kExact);
  }
}

// ---------------------------------------------------------------------------
// Resize.

struct ResizeCase {
  Attributes attrs;
  std::vector<float> scales;   // Empty: sizes.
  std::vector<int64_t> sizes;  // Empty: scales.
  std::vector<float> roi;      // Empty: absent.
  const char* op = "Resize";   // The entry: "Resize" (13+) or "Resize-11".
};

std::vector<ResizeCase> ResizeCases() {
  std::vector<ResizeCase> cases;
  auto attrs = [](std::string mode, std::string coord, std::string nearest = "round_prefer_floor") {
    return Attrs({{"mode", mode}, {"coordinate_transformation_mode", coord}, {"nearest_mode", nearest}});
  };
  for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      cases.push_back({attrs("nearest", coord, nearest), {1, 1, 2, 2}, {}, {}});
      cases.push_back({attrs("nearest", coord, nearest), {1, 1, 0.6f, 1.5f}, {}, {}});
    }
    cases.push_back({attrs("nearest", coord), {}, {2, 3, 3, 10}, {}});
    cases.push_back({attrs("linear", coord), {1, 1, 2, 1.5f}, {}, {}});
    cases.push_back({attrs("linear", coord), {1, 1, 0.5f, 0.8f}, {}, {}});
    cases.push_back({attrs("linear", coord), {}, {2, 3, 8, 1}, {}});
    cases.push_back({attrs("cubic", coord), {1, 1, 1.7f, 2.3f}, {}, {}});
  }
  Attributes cubic = attrs("cubic", "half_pixel");
  cubic.Set("exclude_outside", int64_t{1});
  cubic.Set("cubic_coeff_a", -0.5f);
  cases.push_back({cubic, {1, 1, 2.5f, 0.7f}, {}, {}});
  Attributes nn11 = attrs("nearest", "tf_half_pixel_for_nn");
  cases.push_back({nn11, {1, 1, 1.5f, 2}, {}, {}, "Resize-11"});
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Attributes crop = attrs(mode, "tf_crop_and_resize");
    crop.Set("extrapolation_value", 7.5f);
    cases.push_back({crop, {}, {2, 3, 6, 9}, {0, 0, -0.2f, 0.1f, 1, 1, 1.1f, 0.9f}});
    cases.push_back({crop, {}, {2, 3, 1, 4}, {0, 0, 0.3f, 0, 1, 1, 0.6f, 1}});
  }
  return cases;
}

TEST_F(NnCudaTest, Resize) {
  const Shape x_shape = {2, 3, 5, 7};
  for (DType dt : kFloatTypes) {
    for (const ResizeCase& c : ResizeCases()) {
      SCOPED_TRACE(*c.attrs.String("mode") + " " + *c.attrs.String("coordinate_transformation_mode") + " " +
                   *c.attrs.String("nearest_mode") + (c.sizes.empty() ? " scales" : " sizes"));
      std::vector<HostTensor> in = {Random(dt, x_shape)};
      in.push_back(c.roi.empty() ? HostTensor::Absent() : Floats({8}, c.roi));
      in.push_back(c.scales.empty() ? Floats({0}, {}) : Floats({4}, c.scales));
      if (!c.sizes.empty()) in.push_back(Int64s({4}, c.sizes));
      Check(c.op, c.attrs, std::move(in), {1e-5, 1e-5, 2e-3, 4e-3});
    }
  }
}

TEST_F(NnCudaTest, ResizeOpset10AndOtherDtypes) {
  for (const char* mode : {"nearest", "linear"}) {
    for (const std::vector<float>& scales :
         {std::vector<float>{1, 1, 2, 3}, std::vector<float>{1, 1, 0.5f, 0.7f}}) {
      Attributes attrs = Attrs({{"mode", std::string(mode)}});
      Check("Resize-10", attrs, {Random(kF32, {1, 2, 6, 5}), Floats({4}, scales)});
    }
  }
  // Nearest moves any element size; rank 3 and 5 too.
  Check("Resize", Attrs({{"mode", std::string("nearest")}}),
        {RandomInts(DType::kInt64, {2, 3, 5, 7}, -100, 100), HostTensor::Absent(),
         Floats({4}, {1, 1, 1.5f, 0.5f})});
  Check("Resize", Attrs({{"mode", std::string("nearest")}}),
        {Random(DType::kBool, {3, 4, 5}), HostTensor::Absent(), Floats({3}, {1, 2, 0.6f})});
  Check("Resize", Attrs({{"mode", std::string("linear")}}),
        {Random(kF32, {1, 2, 3, 4, 5}), HostTensor::Absent(), Floats({5}, {1, 1, 2, 1.5f, 0.5f})});
}

// ---------------------------------------------------------------------------
// Normalisation.

TEST_F(NnCudaTest, BatchNormalization) {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : {Shape{2, 3, 5, 4}, Shape{4, 6}, Shape{1, 5, 1, 3, 3}}) {
      SCOPED_TRACE(ShapeToString(s));
      const Shape c = {s[1]};
      Check("BatchNormalization", Attrs({{"epsilon", 1e-3f}}),
            {Random(dt, s), Random(dt, c), Random(dt, c), Random(dt, c), Random(dt, c, 0.5, 2)});
    }
  }
}

// Training mode: batch statistics in one block per channel (float, summed in another
// order than the CPU's), so the outputs agree within float rounding of the statistics.
TEST_F(NnCudaTest, BatchNormalizationTrainingMode) {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : {Shape{2, 3, 5, 4}, Shape{4, 6}, Shape{3, 2, 37, 29}}) {
      SCOPED_TRACE(ShapeToString(s));
      const Shape c = {s[1]};
      const std::vector<HostTensor> in = {Random(dt, s), Random(dt, c), Random(dt, c), Random(dt, c),
                                          Random(dt, c, 0.5, 2)};
      const Attributes attrs = Attrs({{"training_mode", int64_t{1}}, {"momentum", 0.7f}, {"epsilon", 1e-3f}});
      Check("BatchNormalization", attrs, in, {1e-5, 1e-4, 4e-3, 4e-3});
      Check("BatchNormalization", attrs, in, {1e-5, 1e-4, 4e-3, 4e-3}, 1);  // Y only.
    }
  }
}

TEST_F(NnCudaTest, InstanceNormalization) {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : {Shape{2, 3, 5, 7}, Shape{1, 4, 300}, Shape{3, 1, 1, 1}}) {
      SCOPED_TRACE(ShapeToString(s));
      const Shape c = {s[1]};
      Check("InstanceNormalization", Attrs({{"epsilon", 1e-4f}}),
            {Random(dt, s), Random(dt, c), Random(dt, c)}, {1e-5, 1e-4, 4e-3, 4e-3});
    }
  }
}

TEST_F(NnCudaTest, LayerNormalization) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    std::optional<Shape> bias;
  };
  const Case cases[] = {
      {{3, 5, 7}, -1, {7}, Shape{7}},        {{3, 5, 7}, 1, {5, 7}, Shape{5, 7}},
      {{3, 5, 7}, -1, {1, 7}, std::nullopt}, {{3, 5, 7}, 1, {5, 1}, Shape{7}},
      {{2, 600}, 1, {600}, Shape{600}},      {{4, 3, 5}, 0, {3, 5}, Shape{1}},
      {{3, 5, 7}, 2, {3, 1, 7}, Shape{7}},
  };
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(ShapeToString(c.x) + " axis " + std::to_string(c.axis) + " scale " +
                   ShapeToString(c.scale));
      std::vector<HostTensor> in = {Random(dt, c.x), Random(dt, c.scale)};
      if (c.bias) in.push_back(Random(dt, *c.bias));
      const Tolerance tol = {1e-5, 1e-4, 4e-3, 4e-3};
      Check("LayerNormalization", Attrs({{"axis", c.axis}, {"epsilon", 1e-5f}}), in, tol, 1);
      Check("LayerNormalization", Attrs({{"axis", c.axis}}), in, tol, 3);  // Mean and InvStdDev.
    }
  }
}

// ---------------------------------------------------------------------------
// Elementwise.

TEST_F(NnCudaTest, UnaryOps) {
  struct Case {
    const char* op;
    double lo, hi;
  };
  const Case cases[] = {{"LeakyRelu", -4, 4}, {"HardSigmoid", -6, 6}, {"HardSwish", -5, 5},  {"Tanh", -5, 5},
                        {"Exp", -10, 10},     {"Log", 0.01, 50},      {"Erf", -3, 3},        {"Sqrt", 0, 50},
                        {"Neg", -4, 4},       {"Abs", -4, 4},         {"Reciprocal", 0.1, 5},
                        {"Sin", -10, 10},     {"Cos", -10, 10},       {"Tan", -1.5, 1.5},    {"Asin", -1, 1},
                        {"Acos", -1, 1},      {"Atan", -10, 10},      {"Sinh", -5, 5},       {"Cosh", -5, 5},
                        {"Asinh", -10, 10},   {"Acosh", 1, 10},       {"Atanh", -0.99, 0.99}, {"Ceil", -10, 10},
                        {"Floor", -10, 10},   {"Round", -10, 10},     {"Sign", -3, 3},       {"Softplus", -20, 20},
                        {"Softsign", -10, 10}, {"Elu", -5, 5},        {"Celu", -5, 5},       {"Selu", -5, 5},
                        {"ThresholdedRelu", -3, 3}, {"Shrink", -2, 2}};
  for (DType dt : kFloatTypes) {
    for (const Case& c : cases) {
      for (const Shape& s : {Shape{3, 7, 5}, Shape{1}, Shape{}, Shape{1030}}) {
        SCOPED_TRACE(std::string(c.op) + " " + ShapeToString(s));
        Check(c.op, {}, {Random(dt, s, c.lo, c.hi)}, {1e-6, 2e-6, 1e-3, 2e-3});
      }
    }
    Check("LeakyRelu", Attrs({{"alpha", 0.3f}}), {Random(dt, {4, 9})});
    Check("Swish", {}, {Random(dt, {4, 9}, -8, 8)});
    Check("Swish", Attrs({{"alpha", 1.702f}}), {Random(dt, {4, 9}, -8, 8)});
    Check("Gelu", {}, {Random(dt, {4, 9}, -8, 8)});
    Check("HardSigmoid", Attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), {Random(dt, {4, 9}, -5, 5)});
    Check("Reciprocal", {}, {Random(dt, {4, 9}, -5, -0.1)});
    Check("Elu", Attrs({{"alpha", 0.5f}}), {Random(dt, {4, 9}, -5, 5)});
    Check("Celu", Attrs({{"alpha", 2.0f}}), {Random(dt, {4, 9}, -5, 5)});
    Check("Selu", Attrs({{"alpha", 2.0f}, {"gamma", 3.0f}}), {Random(dt, {4, 9}, -5, 5)});
    Check("ThresholdedRelu", Attrs({{"alpha", 0.5f}}), {Random(dt, {4, 9}, -3, 3)});
    Check("Shrink", Attrs({{"bias", 1.5f}, {"lambd", 1.5f}}), {Random(dt, {4, 9}, -3, 3)});
  }
}

TEST_F(NnCudaTest, Clip) {
  for (DType dt : kFloatTypes) {
    const HostTensor x = Random(dt, {5, 7}, -3, 3);
    Check("Clip", {}, {x});
    Check("Clip", {}, {x, Make(dt, {}, {-1})});
    Check("Clip", {}, {x, HostTensor::Absent(), Make(dt, {1}, {0.5})});
    Check("Clip", {}, {x, Make(dt, {}, {-0.25}), Make(dt, {}, {1.5})});
    Check("Clip", {}, {x, Make(dt, {}, {1}), Make(dt, {}, {-1})});  // min > max: every value is max.
  }
}

TEST_F(NnCudaTest, Pow) {
  for (DType dt : kFloatTypes) {
    const HostTensor x = Random(dt, {4, 5}, 0.1, 3);
    Check("Pow", {}, {x, Random(dt, {4, 5}, -2, 2)});
    Check("Pow", {}, {x, Random(dt, {5}, -2, 2)});
    Check("Pow", {}, {Random(dt, {5, 1}, 0.1, 3), Random(dt, {2, 1, 3}, -2, 2)});
    for (double e : {2.0, 1.0, 0.5, -1.5}) Check("Pow", {}, {x, Make(dt, {}, {e})});
    Check("Pow", {}, {Random(dt, {4, 5}, -3, 3), RandomInts(DType::kInt64, {5}, -2, 3)});
    Check("Pow", {}, {Random(dt, {4, 5}, -3, 3), RandomInts(DType::kInt32, {4, 1}, -2, 3)});
    Check("Pow", {}, {x, Random(dt == kF32 ? kF16 : kF32, {1, 5}, -2, 2)});  // Mixed float exponent.
  }
}

TEST_F(NnCudaTest, PRelu) {
  for (DType dt : kFloatTypes) {
    const HostTensor x = Random(dt, {2, 3, 4, 5});
    for (const Shape& s : {Shape{3, 1, 1}, Shape{5}, Shape{1}, Shape{2, 3, 4, 5}}) {
      SCOPED_TRACE(ShapeToString(s));
      Check("PRelu", {}, {x, Random(dt, s, 0, 1)});
    }
  }
}

TEST_F(NnCudaTest, SumAndMean) {
  for (const char* op : {"Sum", "Mean"}) {
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      Check(op, {}, {Random(dt, {3, 1, 5})});
      Check(op, {}, {Random(dt, {3, 1, 5}), Random(dt, {4, 1})});
      Check(op, {}, {Random(dt, {2, 3, 4}), Random(dt, {4}), Random(dt, {3, 1})});
    }
  }
}

TEST_F(NnCudaTest, MaxMin) {
  for (const char* op : {"Max", "Min"}) {
    for (DType dt : {kF32, kF16, DType::kInt32, DType::kInt64}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      HostTensor a = Random(dt, {3, 1, 5}, -50, 50);
      HostTensor b = Random(dt, {4, 1}, -50, 50);
      if (dt == kF32 || dt == kF16) {
        PutNan(a, 2);
        PutNan(b, 1);
      }
      Check(op, {}, {a}, kExact);
      Check(op, {}, {a, b}, kExact);
      Check(op, {}, {b, a}, kExact);
      Check(op, {}, {Random(dt, {2, 3, 4}, -50, 50), Random(dt, {4}, -50, 50), Random(dt, {3, 1}, -50, 50)},
            kExact);
      Check(op, {}, {Random(dt, {}, -50, 50), Random(dt, {2, 1}, -50, 50), Random(dt, {1, 3}, -50, 50)},
            kExact);
    }
  }
}

TEST_F(NnCudaTest, Comparisons) {
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    for (DType dt : {kF32, kF16, DType::kInt32, DType::kInt64}) {
      SCOPED_TRACE(std::string(op) + " " + std::string(DTypeName(dt)));
      Check(op, {}, {RandomInts(dt, {3, 4}, -2, 2), RandomInts(dt, {4}, -2, 2)});
      Check(op, {}, {RandomInts(dt, {2, 1, 5}, -2, 2), RandomInts(dt, {3, 1}, -2, 2)});
      Check(op, {}, {RandomInts(dt, {7}, -2, 2), RandomInts(dt, {}, -2, 2)});
    }
  }
  Check("Equal", {}, {Random(DType::kBool, {3, 4}), Random(DType::kBool, {4})});
  for (const char* op : {"And", "Or", "Xor"}) {
    Check(op, {}, {Random(DType::kBool, {3, 4}), Random(DType::kBool, {4})});
    Check(op, {}, {Random(DType::kBool, {2, 1, 6}), Random(DType::kBool, {5, 1})});
  }
  Check("Not", {}, {Random(DType::kBool, {3, 17})});
  for (DType dt : kFloatTypes) {
    HostTensor x = Random(dt, {4, 9}, -1e4, 1e4);
    PutNan(x, 3);
    PutNan(x, 20);
    Check("IsNaN", {}, {x});
    const double inf = std::numeric_limits<double>::infinity();
    const HostTensor special = Make(dt, {6}, {1, std::nan(""), inf, -inf, 0, -2});
    for (const HostTensor& t : {x, special}) {
      Check("IsNaN", {}, {t});
      Check("IsInf", {}, {t});
      Check("IsInf", Attrs({{"detect_positive", int64_t{0}}}), {t});
      Check("IsInf", Attrs({{"detect_negative", int64_t{0}}}), {t});
    }
  }
  // Mod: fmod 0 on integers (no zero divisors), fmod 1 on every type.
  for (DType dt : {DType::kInt32, DType::kInt64}) {
    Check("Mod", {}, {RandomInts(dt, {3, 4}, -20, 20), RandomInts(dt, {4}, 1, 7)});
    Check("Mod", {}, {RandomInts(dt, {3, 4}, -20, 20), RandomInts(dt, {3, 1}, -7, -1)});
  }
  for (DType dt : {kF32, kF16, DType::kInt32, DType::kInt64}) {
    Check("Mod", Attrs({{"fmod", int64_t{1}}}), {RandomInts(dt, {2, 5}, -20, 20), RandomInts(dt, {5}, 1, 6)});
  }
  Check("Mod", Attrs({{"fmod", int64_t{1}}}), {Random(kF32, {2, 5}, -9, 9), Random(kF32, {5}, 0.5, 3)});
}

TEST_F(NnCudaTest, EmptyTensors) {
  Check("ReduceSum", Attrs({{"axes", std::vector<int64_t>{1}}}), {Random(kF32, {0, 3})});
  Check("Softmax", {}, {Random(kF32, {2, 0})});
  Check("Tanh", {}, {Random(kF32, {0})});
  Check("Max", {}, {Random(kF32, {0, 2}), Random(kF32, {2})});
  Check("Resize", Attrs({{"mode", std::string("linear")}}),
        {Random(kF32, {1, 1, 2, 2}), HostTensor::Absent(), HostTensor::Absent(), Int64s({4}, {1, 1, 0, 3})});
}

// ---------------------------------------------------------------------------
// GlobalLpPool-2 and LpNormalization-1 (kernels/ops/nn/lp_ops.h): the CPU kernels sum in
// another order (GlobalLpPool: in double; the device's block reduction in float), so
// they agree to rounding; LpNormalization sums in order on both.
TEST_F(NnCudaTest, GlobalLpPoolAndLpNormalization) {
  for (DType dt : kFloatTypes) {
    for (int64_t p : {1, 2, 3}) {
      for (const Shape& s : {Shape{2, 3, 7, 5}, Shape{1, 4, 1}, Shape{2, 2, 33, 17}}) {
        SCOPED_TRACE(ShapeToString(s) + " p " + std::to_string(p));
        Check("GlobalLpPool", Attrs({{"p", p}}), {Random(dt, s)}, kSums);
      }
    }
    for (int64_t p : {1, 2}) {
      for (int64_t axis : {-1, 0, 1}) {
        SCOPED_TRACE("LpNormalization axis " + std::to_string(axis) + " p " + std::to_string(p));
        Check("LpNormalization", Attrs({{"axis", axis}, {"p", p}}), {Random(dt, {3, 17, 5})}, kSums);
      }
    }
    // A zero vector normalises to zeros on both.
    Check("LpNormalization", {}, {HostTensor::Zeros(dt, {2, 4})}, kExact);
  }
}

// Without a GPU: registration, and refusals that precede any CUDA call.

TEST(NnCudaRegistration, RegistersEveryOp) {
  auto r = CudaRegistry();
  ASSERT_TRUE(r);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin",
                         "Softmax", "LogSoftmax", "Hardmax", "NegativeLogLikelihoodLoss",
                         "SoftmaxCrossEntropyLoss", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                         "GlobalMaxPool", "GlobalLpPool", "LpNormalization", "Resize",
                         "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LeakyRelu",
                         "HardSigmoid", "HardSwish", "Swish", "Gelu", "Tanh", "Exp", "Log", "Erf", "Sqrt", "Neg", "Abs",
                         "Reciprocal", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
                         "Acosh", "Atanh", "Ceil", "Floor", "Round", "Sign", "Softplus", "Softsign", "Elu",
                         "Celu", "Selu", "ThresholdedRelu", "Shrink", "Clip", "Pow", "PRelu", "Max", "Min",
                         "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                         "Xor", "Not", "Mod", "Sum", "Mean", "IsNaN", "IsInf"}) {
    EXPECT_NE(r->FindKernel(op, DeviceKind::kCuda), nullptr) << op;
  }
}

// Runs a CUDA kernel on host buffers that it must refuse before touching them.
Status ComputeOnHost(const KernelRegistry& r, std::string_view op, const Attributes& attrs,
                     std::vector<HostTensor> inputs) {
  OpRunner cpu;
  REMEX_ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, cpu.Infer(op, attrs, inputs));
  REMEX_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, (*r.FindKernel(op, DeviceKind::kCuda))(attrs));
  return OpRunner::RunKernel(*kernel, infos, inputs, std::nullopt).status();
}

// Refused with UNIMPLEMENTED naming the op, the dtype and the dtypes the kernel takes
// (CudaKernel's LaunchFor / RunFor).
TEST(NnCudaRegistration, UnsupportedDtypesAreUnimplemented) {
  auto r = CudaRegistry();
  ASSERT_TRUE(r);
  struct Case {
    const char* op;
    Attributes attrs;
    std::vector<HostTensor> in;
    const char* message;
  };
  auto int8s = [](Shape shape) { return HostTensor::Zeros(DType::kInt8, std::move(shape)); };
  std::vector<Case> cases;
  cases.push_back({"ReduceSum",
                   {},
                   {HostTensor::Of<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6})},
                   "ReduceSum on cuda: dtype int32 is not implemented (float32 and float16 are)"});
  cases.push_back({"Softmax",
                   {},
                   {HostTensor::Of<double>({2}, {1, 2})},
                   "Softmax on cuda: dtype float64 is not implemented (float32 and float16 are)"});
  cases.push_back({"MaxPool",
                   Attrs({{"kernel_shape", std::vector<int64_t>{1}}}),
                   {HostTensor::Of<int8_t>({1, 1, 2}, {1, 2})},
                   "MaxPool on cuda: dtype int8 is not implemented (float32 and float16 are)"});
  cases.push_back({"Resize",
                   Attrs({{"mode", std::string("linear")}}),
                   {HostTensor::Of<int32_t>({2}, {1, 2}), HostTensor::Absent(), Floats({1}, {2})},
                   "Resize on cuda: dtype int32 is not implemented (linear and cubic modes take float32 and "
                   "float16)"});
  cases.push_back({"Abs",
                   {},
                   {HostTensor::Of<int64_t>({2}, {-1, 2})},
                   "Abs on cuda: dtype int64 is not implemented (float32 and float16 are)"});
  cases.push_back({"Sum",
                   {},
                   {HostTensor::Of<double>({2}, {1, 2}), HostTensor::Of<double>({2}, {3, 4})},
                   "Sum on cuda: dtype float64 is not implemented (float32 and float16 are)"});
  cases.push_back({"Max",
                   {},
                   {int8s({2}), int8s({2})},
                   "Max on cuda: dtype int8 is not implemented (float32, float16, int32 and int64 are)"});
  cases.push_back(
      {"Equal",
       {},
       {int8s({2}), int8s({2})},
       "Equal on cuda: dtype int8 is not implemented (float32, float16, int32, int64 and bool are)"});
  cases.push_back({"Less",
                   {},
                   {int8s({2}), int8s({2})},
                   "Less on cuda: dtype int8 is not implemented (float32, float16, int32 and int64 are)"});
  cases.push_back(
      {"Pow",
       {},
       {Floats({2}, {1, 2}), int8s({2})},
       "Pow on cuda: dtype int8 is not implemented (the exponent takes float32, float16, int32 and "
       "int64)"});
  cases.push_back({"LayerNormalization",
                   Attrs({{"stash_type", int64_t{11}}}),
                   {Floats({2}, {1, 2}), Floats({2}, {1, 1})},
                   "LayerNormalization on cuda: stash_type 11 is not implemented (1 is)"});
  for (Case& c : cases) {
    Status s = ComputeOnHost(*r, c.op, c.attrs, std::move(c.in));
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << c.op << ": " << s.ToString();
    EXPECT_EQ(s.message(), c.message) << c.op;
  }
}

TEST(NnCudaRegistration, BadAttributesAreRefusedAtCreation) {
  auto r = CudaRegistry();
  ASSERT_TRUE(r);
  EXPECT_FALSE((*r->FindKernel("MaxPool", DeviceKind::kCuda))(Attributes{}).ok());
  // The layout pass's NHWC pooling (the CPU device's compiles) is the CPU kernels' alone.
  for (const char* op : {"MaxPool", "AveragePool", "GlobalAveragePool"}) {
    Attributes attrs = Attrs({{"layout", std::string("NHWC")}});
    if (std::string(op) != "GlobalAveragePool") attrs.Set("kernel_shape", std::vector<int64_t>{2, 2});
    const auto nhwc_pool = (*r->FindKernel(op, DeviceKind::kCuda))(attrs);
    ASSERT_FALSE(nhwc_pool.ok()) << op;
    EXPECT_EQ(nhwc_pool.status().code(), StatusCode::kUnimplemented) << nhwc_pool.status().ToString();
  }
  EXPECT_FALSE((*r->FindKernel("AveragePool", DeviceKind::kCuda))(
                   Attrs({{"kernel_shape", std::vector<int64_t>{2}}, {"count_include_pad", int64_t{2}}}))
                   .ok());
  EXPECT_FALSE((*r->FindKernel("Resize", DeviceKind::kCuda))(Attrs({{"mode", std::string("bicubic")}})).ok());
  EXPECT_FALSE((*r->FindKernel("LeakyRelu", DeviceKind::kCuda))(Attrs({{"alpha", int64_t{1}}})).ok());
}

}  // namespace nn_cuda_test
}  // namespace remex::kernels
