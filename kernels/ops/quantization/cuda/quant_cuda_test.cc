// Differential tests of the quantization ops' CUDA kernels (kernels/ops/quantization/cuda/quant.cc)
// against the CPU kernels: QuantizeLinear / DequantizeLinear (both entries, per tensor
// and per axis, every x and zero-point type, with and without a zero point),
// DynamicQuantizeLinear (values, all zero, empty), MatMulInteger / QLinearMatMul /
// FusedMatMulInteger (every operand combination, broadcast batches, 1-D operands,
// per-column parameters, with and without the bias), FusedQLinearAdd (every type,
// with and without Relu)
// and ConvInteger / QLinearConv (1-D to 3-D, strides, pads, dilations, groups, auto_pad,
// per-channel parameters, bias). Outputs must match bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration and
// the attribute checks at creation run everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

constexpr const char* kQuantOps[] = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                     "MatMulInteger",  "QLinearMatMul",    "FusedMatMulInteger",
                                     "ConvInteger",    "QLinearConv",      "FusedQLinearAdd"};

TEST(QuantCudaRegistration, RegistersEveryOpAndEntry) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : kQuantOps) EXPECT_TRUE(registry->FindKernel(op, DeviceKind::kCuda)) << op;
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"}) {
    EXPECT_TRUE(registry->FindKernel(op, 10, DeviceKind::kCuda)) << op;
    EXPECT_TRUE(registry->FindKernel(op, 13, DeviceKind::kCuda)) << op;
  }
}

TEST(QuantCudaRegistration, RejectsBadConvAttributesAtCreation) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : {"ConvInteger", "QLinearConv"}) {
    const KernelFactory* f = registry->FindKernel(op, DeviceKind::kCuda);
    ASSERT_TRUE(f) << op;
    EXPECT_FALSE((*f)(Attrs({{"group", int64_t{0}}})).ok()) << op;
    EXPECT_FALSE((*f)(Attrs({{"strides", std::vector<int64_t>{0, 1}}})).ok()) << op;
    EXPECT_FALSE((*f)(Attrs({{"auto_pad", std::string("MIRROR")}})).ok()) << op;
    EXPECT_TRUE((*f)(Attrs({{"group", int64_t{2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}})).ok()) << op;
  }
}

class QuantCudaTest : public testing::CudaStreamTest {
 protected:
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    auto out = testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, std::nullopt, stream_, 0xCD);
    ASSERT_TRUE(out.ok()) << op << " on cuda: " << out.status().ToString();
    for (size_t i = 0; i < out->cpu.size(); ++i) testing::ExpectSameElements(op, out->cpu[i], out->cuda[i].bytes, i, 0);
  }

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  // Random bytes of `dtype` (uint8 / int8: every value; int32: small values).
  HostTensor Random(DType dtype, Shape shape) {
    HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
    if (dtype == DType::kInt32) {
      auto* p = reinterpret_cast<int32_t*>(t.bytes.data());
      for (size_t i = 0; i < t.bytes.size() / 4; ++i) p[i] = static_cast<int32_t>(Uniform(-100000, 100000));
    } else {
      for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(Uniform(0, 255));
    }
    return t;
  }

  HostTensor Floats(Shape shape, float lo, float hi) {
    HostTensor t = HostTensor::Zeros(DType::kFloat32, std::move(shape));
    auto* p = reinterpret_cast<float*>(t.bytes.data());
    std::uniform_real_distribution<float> d(lo, hi);
    for (size_t i = 0; i < t.bytes.size() / 4; ++i) p[i] = d(rng_);
    return t;
  }

  Shape RandomShape(size_t min_rank, size_t max_rank) {
    Shape s(static_cast<size_t>(Uniform(static_cast<int64_t>(min_rank), static_cast<int64_t>(max_rank))));
    for (int64_t& d : s) d = Uniform(1, 6);
    return s;
  }

  std::mt19937 rng_{20261126};
};

TEST_F(QuantCudaTest, QuantizeAndDequantizeLinear) {
  for (int iter = 0; iter < 80; ++iter) {
    const bool opset13 = iter % 4 != 0;
    const Shape s = RandomShape(opset13 ? 1 : 0, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t axis = rank == 0 ? 0 : Uniform(-rank, rank - 1);
    const bool per_axis = opset13 && rank > 0 && iter % 2 == 1;
    const Shape ps = per_axis ? Shape{s[axis < 0 ? axis + rank : axis]} : (iter % 3 ? Shape{} : Shape{1});
    const Attributes attrs = opset13 && rank > 0 ? Attrs({{"axis", axis}}) : Attributes{};
    const HostTensor scale = Floats(ps, 0.01f, 0.5f);
    const DType qt = iter % 3 == 0 ? DType::kInt8 : DType::kUint8;
    const bool with_zp = iter % 5 != 0;
    SCOPED_TRACE(ShapeToString(s) + " axis " + std::to_string(axis) + (per_axis ? " per axis" : " per tensor"));
    // QuantizeLinear of float32 (a wide range, so that both ends saturate) and int32 x.
    const HostTensor x = iter % 7 == 0 ? Random(DType::kInt32, s) : Floats(s, -80.0f, 80.0f);
    std::vector<HostTensor> qin = {x, scale};
    if (with_zp) qin.push_back(Random(qt, ps));
    Check(opset13 ? "QuantizeLinear" : "QuantizeLinear-10", attrs, qin);
    // DequantizeLinear of uint8 / int8 / int32 x.
    const DType xt = iter % 6 == 0 ? DType::kInt32 : qt;
    std::vector<HostTensor> din = {Random(xt, s), scale};
    if (with_zp && xt != DType::kInt32) din.push_back(Random(qt, ps));
    Check(opset13 ? "DequantizeLinear" : "DequantizeLinear-10", attrs, din);
  }
}

TEST_F(QuantCudaTest, DynamicQuantizeLinear) {
  for (int iter = 0; iter < 20; ++iter) {
    const Shape s = RandomShape(0, 4);
    SCOPED_TRACE(ShapeToString(s));
    const float lo = iter % 3 == 0 ? 0.5f : -7.0f, hi = iter % 4 == 0 ? -0.5f : 9.0f;
    Check("DynamicQuantizeLinear", {}, {Floats(s, std::min(lo, hi), std::max(lo, hi))});
  }
  Check("DynamicQuantizeLinear", {}, {HostTensor::Zeros(DType::kFloat32, {5})});  // Scale 1.
  Check("DynamicQuantizeLinear", {}, {HostTensor::Zeros(DType::kFloat32, {0, 3})});
  Check("DynamicQuantizeLinear", {}, {Floats({70000}, -3.0f, 2.0f)});  // Many threads in the range.
}

TEST_F(QuantCudaTest, FusedQLinearAdd) {
  const DType types[] = {DType::kUint8, DType::kInt8};
  int iter = 0;
  for (DType at : types) {
    for (DType bt : types) {
      for (DType yt : types) {
        ++iter;
        const Shape s = RandomShape(1, 4);
        SCOPED_TRACE(ShapeToString(s) + " " + std::string(DTypeName(at)) + " " + std::string(DTypeName(bt)) + " -> " +
                     std::string(DTypeName(yt)));
        const Attributes attrs = iter % 2 ? Attrs({{"activation", std::string("Relu")}}) : Attributes{};
        Check("FusedQLinearAdd", attrs,
              {Random(at, s), Floats({}, 0.01f, 0.1f), Random(at, {}), Random(bt, s), Floats({}, 0.01f, 0.1f),
               Random(bt, {}), Floats({}, 0.02f, 0.2f), Random(yt, {})});
      }
    }
  }
}

TEST_F(QuantCudaTest, MatMulIntegerAndQLinearMatMul) {
  const DType types[] = {DType::kUint8, DType::kInt8};
  const std::pair<Shape, Shape> shapes[] = {{{3, 5}, {5, 4}},       {{2, 3, 5}, {5, 7}},    {{1, 4, 9}, {3, 9, 2}},
                                            {{3, 1, 6}, {2, 1, 6, 3}}, {{7}, {7, 3}},       {{4, 7}, {7}},
                                            {{33, 64}, {64, 17}},  {{2, 2, 1, 3, 4}, {2, 1, 4, 5}}};
  int iter = 0;
  for (const auto& [as, bs] : shapes) {
    for (DType at : types) {
      for (DType bt : types) {
        ++iter;
        const int64_t n = bs.size() == 1 ? 1 : bs.back();
        const bool per_column = bs.size() > 1 && iter % 2 == 0;
        const Shape bp = per_column ? Shape{n} : Shape{};
        SCOPED_TRACE(ShapeToString(as) + " x " + ShapeToString(bs) + " " + std::string(DTypeName(at)) + " " +
                     std::string(DTypeName(bt)));
        const HostTensor a = Random(at, as), b = Random(bt, bs);
        if (iter % 3 == 0) {
          Check("MatMulInteger", {}, {a, b});
        } else {
          Check("MatMulInteger", {}, {a, b, Random(at, {}), Random(bt, bp)});
        }
        const DType yt = iter % 2 ? DType::kUint8 : DType::kInt8;
        Check("QLinearMatMul", {},
              {a, Floats({}, 0.01f, 0.05f), Random(at, {}), b, Floats(bp, 0.01f, 0.05f), Random(bt, iter % 4 ? bp : Shape{}),
               Floats({}, 0.5f, 3.0f), Random(yt, {})});
        // The compiler's fusion of MatMulInteger, Cast, Mul by the scale and Add of the bias.
        std::vector<HostTensor> fused = {a, b, Random(at, {}), Random(bt, bp), Floats(bp, 0.01f, 0.05f)};
        if (iter % 3 != 1) fused.push_back(Floats({n}, -2.0f, 2.0f));
        const char* activation = iter % 4 == 0 ? "Relu" : iter % 4 == 1 ? "Gelu" : "";
        Check("FusedMatMulInteger", *activation ? Attrs({{"activation", std::string(activation)}}) : Attributes{},
              fused);
      }
    }
  }
}

TEST_F(QuantCudaTest, ConvIntegerAndQLinearConv) {
  struct Case {
    Shape x, w;
    Attributes attrs;
  };
  const Case cases[] = {
      {{1, 2, 5, 6}, {3, 2, 3, 3}, {}},
      {{2, 4, 7, 6},
       {4, 2, 3, 2},
       Attrs({{"strides", std::vector<int64_t>{2, 1}},
              {"pads", std::vector<int64_t>{1, 0, 2, 1}},
              {"dilations", std::vector<int64_t>{1, 2}},
              {"group", int64_t{2}}})},
      {{1, 3, 9}, {5, 3, 4}, Attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2}}})},
      {{1, 2, 4, 5, 3}, {2, 1, 2, 3, 2}, Attrs({{"group", int64_t{2}}, {"pads", std::vector<int64_t>{0, 1, 1, 1, 0, 0}}})},
      {{1, 6, 8, 8}, {6, 1, 3, 3}, Attrs({{"group", int64_t{6}}, {"auto_pad", std::string("SAME_LOWER")}})},
      {{1, 16, 12, 12}, {8, 16, 1, 1}, {}},
  };
  const DType types[] = {DType::kUint8, DType::kInt8};
  int iter = 0;
  for (const Case& c : cases) {
    for (DType xt : types) {
      for (DType wt : types) {
        ++iter;
        const int64_t m = c.w[0];
        const Shape wp = iter % 2 ? Shape{m} : Shape{};
        SCOPED_TRACE(ShapeToString(c.x) + " * " + ShapeToString(c.w) + " " + std::string(DTypeName(xt)) + " " +
                     std::string(DTypeName(wt)));
        const HostTensor x = Random(xt, c.x), w = Random(wt, c.w);
        if (iter % 3 == 0) {
          Check("ConvInteger", c.attrs, {x, w});
        } else {
          Check("ConvInteger", c.attrs, {x, w, Random(xt, {}), Random(wt, wp)});
        }
        std::vector<HostTensor> in = {x, Floats({}, 0.01f, 0.05f), Random(xt, {}), w, Floats(wp, 0.005f, 0.05f),
                                      Random(wt, iter % 4 ? wp : Shape{}), Floats({}, 0.2f, 2.0f),
                                      Random(iter % 2 ? DType::kInt8 : DType::kUint8, {})};
        if (iter % 2 == 0) in.push_back(Random(DType::kInt32, {m}));
        Check("QLinearConv", c.attrs, in);
      }
    }
  }
}

}  // namespace
}  // namespace remex::kernels
