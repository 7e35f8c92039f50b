// Differential tests of the misc group's CUDA kernels (Shape, Size, ConstantOfShape,
// Range, Dropout, TopK, LRN, OneHot, CumSum; each in its op family's cuda/ folder, see
// kernels/cuda/README.md#op-families) against the CPU kernels on random
// shapes (odd extents, extent-1 and empty dims, negative axes), several attribute
// settings and input forms and every dtype each kernel takes. Outputs must match bit
// for bit (NaNs match any NaN), except LRN's float outputs, which differ by the last
// bits of pow (tolerances below).
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration and
// the checks made before any CUDA call (attributes, dtypes, training mode, empty
// outputs) run everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
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
#include "kernels/cuda/visit_dtype.h"
#include "kernels/float16.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace {

using testing::Attrs;
using testing::CreateCudaKernel;
using testing::CudaRegistry;
using testing::UnreadDevicePointer;
using testing::DeviceBuffer;
using testing::HostTensor;

// |cuda - cpu| <= rel * |cpu| for float outputs; 0: bit for bit.
struct Tolerance {
  double f16 = 0, f32 = 0, f64 = 0;
};

constexpr DType kNumericTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                                   DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUint8,
                                   DType::kUint16,  DType::kUint32,  DType::kUint64};
constexpr DType kTopKTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32,
                                DType::kInt64};
constexpr DType kLrnTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64};

bool IsFloat(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kFloat64;
}

// One element of `dtype` from a double (integers truncated, floats rounded).
void PutValue(DType dtype, uint8_t* p, double v) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (dtype) {
    case DType::kFloat32:
      put(static_cast<float>(v));
      break;
    case DType::kFloat16:
      put(FloatToHalf(static_cast<float>(v)).bits);
      break;
    case DType::kFloat64:
      put(v);
      break;
    case DType::kInt8:
      put(static_cast<int8_t>(v));
      break;
    case DType::kInt16:
      put(static_cast<int16_t>(v));
      break;
    case DType::kInt32:
      put(static_cast<int32_t>(v));
      break;
    case DType::kInt64:
      put(static_cast<int64_t>(v));
      break;
    case DType::kUint8:
      put(static_cast<uint8_t>(v));
      break;
    case DType::kUint16:
      put(static_cast<uint16_t>(v));
      break;
    case DType::kUint32:
      put(static_cast<uint32_t>(v));
      break;
    case DType::kUint64:
      put(static_cast<uint64_t>(v));
      break;
    case DType::kBool:
      put(static_cast<uint8_t>(v != 0));
      break;
    default:
      std::abort();
  }
}

HostTensor FromDoubles(DType dtype, Shape shape, const std::vector<double>& v) {
  HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
  const size_t es = DTypeSize(dtype);
  for (size_t i = 0; i < v.size(); ++i) PutValue(dtype, t.bytes.data() + i * es, v[i]);
  return t;
}

HostTensor Scalar(DType dtype, double v) { return FromDoubles(dtype, {}, {v}); }

HostTensor I64(const std::vector<int64_t>& v) {
  return HostTensor::Of<int64_t>({static_cast<int64_t>(v.size())}, v);
}

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Shape RandomShape(std::mt19937& rng, size_t min_rank, size_t max_rank, int64_t min_extent = 1,
                  int64_t max_extent = 7) {
  Shape s(static_cast<size_t>(Uniform(rng, static_cast<int64_t>(min_rank), static_cast<int64_t>(max_rank))));
  for (int64_t& d : s) d = Uniform(rng, min_extent, max_extent);
  return s;
}

HostTensor RandomBytes(DType dtype, Shape shape, std::mt19937& rng) {
  HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(Uniform(rng, 0, 255));
  if (dtype == DType::kBool) {
    for (uint8_t& b : t.bytes) b &= 1;
  }
  return t;
}

// ---------------------------------------------------------------------------
// The differential runner.

class MiscCudaTest : public testing::CudaStreamTest {
 protected:
  // Runs `op` on the CPU and on the GPU (kData inputs stay in host memory, as the VM
  // places them; the others are uploaded) and returns the CUDA kernel's status; on OK
  // the outputs must match within `tol`.
  Status RunBoth(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs,
                 std::optional<size_t> num_outputs = std::nullopt, Tolerance tol = {}) {
    REMEX_ASSIGN_OR_RETURN(
        testing::CpuAndCudaOutputs out,
        testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, num_outputs, stream_, 0xCD));
    for (size_t i = 0; i < out.cpu.size(); ++i) {
      const DType dtype = out.cpu[i].dtype;
      const double rel = dtype == DType::kFloat32   ? tol.f32
                         : dtype == DType::kFloat16 ? tol.f16
                         : dtype == DType::kFloat64 ? tol.f64
                                                    : 0;
      testing::ExpectSameElements(op, out.cpu[i], out.cuda[i].bytes, i, rel);
    }
    return OkStatus();
  }

  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs,
             std::optional<size_t> num_outputs = std::nullopt, Tolerance tol = {}) {
    Status st = RunBoth(op, attrs, std::move(inputs), num_outputs, tol);
    EXPECT_TRUE(st.ok()) << op << " on cuda: " << st.ToString();
  }

  std::mt19937 rng_{20240613};
};

// ---------------------------------------------------------------------------
// Without a GPU: registration, attribute checks and the checks before any launch.

constexpr const char* kMiscOps[] = {"Shape", "Size", "ConstantOfShape", "Range", "Dropout", "TopK", "LRN", "CumSum", "OneHot"};

// The one host-side dtype dispatch of the CUDA launchers: f runs with the element type
// of the dtype when it is among the listed ones, else not at all.
TEST(CudaVisitDType, CallsFWithTheDTypesElementType) {
  auto size_of = [](auto tag) { return sizeof(tag); };
  EXPECT_EQ((cuda::VisitDType<float, Half, double>(DType::kFloat16, size_of)), std::optional<size_t>(2));
  EXPECT_EQ((cuda::VisitDType<float, Half, double>(DType::kFloat64, size_of)), std::optional<size_t>(8));
  EXPECT_EQ((cuda::VisitDType<int32_t, int64_t, bool>(DType::kBool, size_of)), std::optional<size_t>(1));
  EXPECT_EQ((cuda::VisitDType<float, Half, double>(DType::kInt32, size_of)), std::nullopt);
  EXPECT_EQ((cuda::VisitDType<float, Half, double>(DType::kUndefined, size_of)), std::nullopt);
  int calls = 0;
  auto dtype_of = [&](auto tag) {
    ++calls;
    return cuda::kDTypeOf<decltype(tag)>;
  };
  for (DType d : {DType::kUint8, DType::kInt8, DType::kUint16, DType::kInt16, DType::kInt32, DType::kInt64,
                  DType::kUint32, DType::kUint64, DType::kFloat32, DType::kFloat16, DType::kFloat64,
                  DType::kBool, DType::kBFloat16}) {
    EXPECT_EQ((cuda::VisitDType<uint8_t, int8_t, uint16_t, int16_t, int32_t, int64_t, uint32_t, uint64_t,
                                float, Half, double, bool, BFloat16>(d, dtype_of)),
              std::optional<DType>(d))
        << DTypeName(d);
  }
  EXPECT_EQ(calls, 13);
}

TEST(MiscCudaRegistration, RegistersEveryOp) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : kMiscOps) EXPECT_TRUE(registry->FindKernel(op, DeviceKind::kCuda)) << op;
}

TEST(MiscCudaRegistration, RejectsBadAttributesAtCreationAsTheCpuDoes) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  struct Case {
    const char* op;
    Attributes attrs;
    bool ok;
  };
  const Case cases[] = {
      {"TopK", Attrs({{"largest", int64_t{2}}}), false},
      {"TopK", Attrs({{"sorted", int64_t{-1}}}), false},
      {"TopK", Attrs({{"axis", std::string("x")}}), false},
      {"TopK", Attrs({{"k", 1.5f}}), false},
      {"TopK", Attrs({{"axis", int64_t{0}}, {"largest", int64_t{0}}, {"sorted", int64_t{0}}}), true},
      {"LRN", {}, false},
      {"LRN", Attrs({{"size", int64_t{0}}}), false},
      {"LRN", Attrs({{"size", int64_t{3}}, {"alpha", std::string("a")}}), false},
      {"LRN", Attrs({{"size", int64_t{3}}, {"beta", 0.5f}}), true},
      {"ConstantOfShape", Attrs({{"value", std::vector<int64_t>{9, 256}}}), false},  // bool bits
      {"ConstantOfShape", Attrs({{"value", std::vector<int64_t>{999, 0}}}), false},
      {"ConstantOfShape", Attrs({{"value", std::vector<int64_t>{1}}}), false},
      {"ConstantOfShape", Attrs({{"value", std::string("v")}}), false},
      {"ConstantOfShape", Attrs({{"value", std::vector<int64_t>{10, 0x3c00}}}), true},
      {"Shape", Attrs({{"start", 1.0f}}), false},
      {"Shape", Attrs({{"start", int64_t{-1}}, {"end", int64_t{100}}}), true},
  };
  for (const Case& c : cases) {
    const Status cuda = (*registry->FindKernel(c.op, DeviceKind::kCuda))(c.attrs).status();
    const Status cpu = (*registry->FindKernel(c.op, DeviceKind::kCpu))(c.attrs).status();
    EXPECT_EQ(cuda.ok(), c.ok) << c.op << ": " << cuda.ToString();
    EXPECT_EQ(cuda.code(), cpu.code()) << c.op << ": cuda " << cuda.ToString() << ", cpu " << cpu.ToString();
  }
}

TEST(MiscCudaRegistration, RejectsBadCallsBeforeLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto create = [&](const char* op, const Attributes& attrs) { return CreateCudaKernel(*registry, op, attrs); };
  void* fake = UnreadDevicePointer();  // the checks fail before anything reads it

  // Dropout in training mode (training_mode in host memory) with a ratio outside
  // [0, 1), or integer data, is refused, as on the CPU.
  auto dropout = create("Dropout", {});
  uint8_t yes = 1;
  float ratio = 1.5f;
  std::vector<TensorRef> ins = {
      {fake, DType::kFloat32, {2, 3}}, {&ratio, DType::kFloat32, {}}, {&yes, DType::kBool, {}}};
  std::vector<TensorRef> outs = {{fake, DType::kFloat32, {2, 3}}, {fake, DType::kBool, {2, 3}}};
  EXPECT_EQ(dropout->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  ratio = 0.5f;
  ins[0].dtype = DType::kInt32;
  outs[0].dtype = DType::kInt32;
  EXPECT_EQ(dropout->Compute(ins, outs).code(), StatusCode::kInvalidArgument);

  // TopK: a dtype the CPU takes but the CUDA kernel does not; a bool input; a wrong k.
  auto topk = create("TopK", {});
  int64_t k = 2;
  ins = {{fake, DType::kUint8, {3, 4}}, {&k, DType::kInt64, {1}}};
  outs = {{fake, DType::kUint8, {3, 2}}, {fake, DType::kInt64, {3, 2}}};
  Status st = topk->Compute(ins, outs);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("TopK on cuda"), std::string::npos) << st.ToString();
  ins = {{fake, DType::kBool, {3, 4}}, {&k, DType::kInt64, {1}}};
  outs = {{fake, DType::kBool, {3, 2}}, {fake, DType::kInt64, {3, 2}}};
  EXPECT_EQ(topk->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  k = 5;
  ins = {{fake, DType::kFloat32, {3, 4}}, {&k, DType::kInt64, {1}}};
  outs = {{fake, DType::kFloat32, {3, 5}}, {fake, DType::kInt64, {3, 5}}};
  EXPECT_EQ(topk->Compute(ins, outs).code(), StatusCode::kInvalidArgument);

  // LRN on integers is refused by the shape function.
  auto lrn = create("LRN", Attrs({{"size", int64_t{3}}}));
  ins = {{fake, DType::kInt32, {1, 3, 2}}};
  outs = {{fake, DType::kInt32, {1, 3, 2}}};
  EXPECT_EQ(lrn->Compute(ins, outs).code(), StatusCode::kInvalidArgument);

  // Range with mixed dtypes.
  auto range = create("Range", {});
  int32_t i0 = 0, i5 = 5;
  int64_t l1 = 1;
  ins = {{&i0, DType::kInt32, {}}, {&i5, DType::kInt32, {}}, {&l1, DType::kInt64, {}}};
  outs = {{fake, DType::kInt32, {5}}};
  EXPECT_EQ(range->Compute(ins, outs).code(), StatusCode::kInvalidArgument);

  // A wrong output shape.
  auto shape = create("Shape", {});
  ins = {{nullptr, DType::kFloat32, {2, 3}}};
  outs = {{fake, DType::kInt64, {3}}};
  EXPECT_EQ(shape->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
}

TEST(MiscCudaRegistration, EmptyOutputsNeedNoLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto run = [&](const char* op, const Attributes& attrs, std::vector<TensorRef> ins,
                 std::vector<TensorRef> outs) {
    auto k = (*registry->FindKernel(op, DeviceKind::kCuda))(attrs);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    Status st = (*k)->Compute(ins, outs);
    EXPECT_TRUE(st.ok()) << op << ": " << st.ToString();
  };
  int64_t dims[] = {2, 0};
  run("ConstantOfShape", {}, {{dims, DType::kInt64, {2}}}, {{nullptr, DType::kFloat32, {2, 0}}});
  int32_t a = 5, b = 1, d = 1;
  run("Range", {}, {{&a, DType::kInt32, {}}, {&b, DType::kInt32, {}}, {&d, DType::kInt32, {}}},
      {{nullptr, DType::kInt32, {0}}});
  run("Shape", Attrs({{"start", int64_t{2}}}), {{nullptr, DType::kFloat32, {4, 5}}},
      {{nullptr, DType::kInt64, {0}}});
  int64_t k0 = 0;
  run("TopK", {}, {{nullptr, DType::kFloat32, {3, 0}}, {&k0, DType::kInt64, {1}}},
      {{nullptr, DType::kFloat32, {3, 0}}, {nullptr, DType::kInt64, {3, 0}}});
  run("TopK", {},
      {{UnreadDevicePointer(), DType::kFloat32, {3, 4}}, {&k0, DType::kInt64, {1}}},
      {{nullptr, DType::kFloat32, {3, 0}}, {nullptr, DType::kInt64, {3, 0}}});
  run("Dropout", {}, {{nullptr, DType::kFloat16, {0, 7}}},
      {{nullptr, DType::kFloat16, {0, 7}}, {nullptr, DType::kBool, {0, 7}}});
  run("LRN", Attrs({{"size", int64_t{3}}}), {{nullptr, DType::kFloat32, {2, 0, 3}}},
      {{nullptr, DType::kFloat32, {2, 0, 3}}});
}

// ---------------------------------------------------------------------------
// With a GPU.

TEST_F(MiscCudaTest, ShapeAndSize) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 0, 6, 0, 5);
    Attributes attrs;
    if (iter % 3 != 0) attrs.Set("start", Uniform(rng_, -8, 8));
    if (iter % 4 != 0) attrs.Set("end", Uniform(rng_, -8, 8));
    SCOPED_TRACE(ShapeToString(s));
    const DType dtype = kNumericTypes[iter % std::size(kNumericTypes)];
    Check("Shape", attrs, {RandomBytes(dtype, s, rng_)});
    Check("Size", {}, {RandomBytes(dtype, s, rng_)});
  }
  // Beyond one launch's worth of values (32 per launch), and large extents.
  Shape wide(70, 1);
  for (size_t i = 0; i < wide.size(); i += 7) wide[i] = 2;
  Check("Shape", {}, {RandomBytes(DType::kUint8, wide, rng_)});
  Check("Shape", Attrs({{"start", int64_t{-40}}}), {RandomBytes(DType::kUint8, wide, rng_)});
  Check("Size", {}, {RandomBytes(DType::kUint8, wide, rng_)});
}

TEST_F(MiscCudaTest, ShapeAndSizeReadNoData) {
  // reads_shapes_only: the input may come without data.
  for (const char* op : {"Shape", "Size"}) {
    auto kernel = (*registry_->FindKernel(op, DeviceKind::kCuda))(Attributes());
    ASSERT_TRUE(kernel.ok());
    const Shape s = {3, 5, 7};
    DeviceBuffer out(3 * sizeof(int64_t));
    TensorRef in{nullptr, DType::kFloat32, s};
    TensorRef o{out.data(), DType::kInt64, std::string(op) == "Shape" ? Shape{3} : Shape{}};
    ASSERT_TRUE((*kernel)->Compute({&in, 1}, {&o, 1}).ok()) << op;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<int64_t> got(3);
    ASSERT_EQ(cudaMemcpy(got.data(), out.data(), o.shape.empty() ? 8 : 24, cudaMemcpyDeviceToHost),
              cudaSuccess);
    if (o.shape.empty()) {
      EXPECT_EQ(got[0], 105);
    } else {
      EXPECT_EQ(got, (std::vector<int64_t>{3, 5, 7}));
    }
  }
}

TEST_F(MiscCudaTest, ConstantOfShape) {
  const std::pair<DType, int> onnx_types[] = {
      {DType::kFloat32, 1},  {DType::kUint8, 2},    {DType::kInt8, 3},    {DType::kUint16, 4},
      {DType::kInt16, 5},    {DType::kInt32, 6},    {DType::kInt64, 7},   {DType::kBool, 9},
      {DType::kFloat16, 10}, {DType::kFloat64, 11}, {DType::kUint32, 12}, {DType::kUint64, 13}};
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 0, 5, iter % 10 == 0 ? 0 : 1, 9);
    Attributes attrs;
    switch (iter % 4) {
      case 0:
        break;  // float32 zero
      case 1:
        attrs.Set("value", static_cast<float>(Uniform(rng_, -1000, 1000)) / 7.0f);
        break;
      case 2:
        attrs.Set("value",
                  Uniform(rng_, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
        break;
      default: {
        const auto [dtype, onnx] = onnx_types[Uniform(rng_, 0, std::size(onnx_types) - 1)];
        const size_t bytes = DTypeSize(dtype);
        uint64_t bits = std::uniform_int_distribution<uint64_t>()(rng_);
        if (bytes < 8) bits &= (uint64_t{1} << (8 * bytes)) - 1;
        if (dtype == DType::kBool) bits &= 1;
        attrs.Set("value", std::vector<int64_t>{onnx, static_cast<int64_t>(bits)});
      }
    }
    SCOPED_TRACE(ShapeToString(s));
    Check("ConstantOfShape", attrs, {I64(std::vector<int64_t>(s.begin(), s.end()))});
  }
  Check("ConstantOfShape", Attrs({{"value", 2.5f}}), {I64({1000, 1001})});
}

TEST_F(MiscCudaTest, Range) {
  for (DType dtype : kNumericTypes) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const bool is_unsigned = dtype == DType::kUint8 || dtype == DType::kUint16 || dtype == DType::kUint32 ||
                             dtype == DType::kUint64;
    const bool small = DTypeSize(dtype) == 1;
    for (int iter = 0; iter < 25; ++iter) {
      double start, delta, limit;
      if (IsFloat(dtype)) {
        start = static_cast<double>(Uniform(rng_, -4000, 4000)) / 16.0;
        delta = static_cast<double>(Uniform(rng_, 1, 400)) / 37.0 * (Uniform(rng_, 0, 1) ? 1 : -1);
        limit = start + delta * static_cast<double>(Uniform(rng_, -3, 700)) +
                static_cast<double>(Uniform(rng_, -3, 3)) / 5.0;
        if (dtype == DType::kFloat16) {  // Within float16's range and precision for counts.
          start /= 8;
          limit = start + delta * static_cast<double>(Uniform(rng_, -3, 60));
        }
      } else {
        // Values inside the dtype's range.
        const size_t size = DTypeSize(dtype);
        const double tmax = size >= 4 ? 1e9 : (is_unsigned ? 255.0 : 127.0) * (size == 2 ? 257.0 : 1.0);
        const double tmin = is_unsigned ? 0.0 : -tmax - 1;
        const int64_t span = small ? 100 : (size == 2 ? 10000 : 100000);
        start = static_cast<double>(is_unsigned ? Uniform(rng_, 0, span) : Uniform(rng_, -span, span));
        delta = static_cast<double>(Uniform(rng_, 1, small ? 9 : 900)) *
                (is_unsigned || Uniform(rng_, 0, 1) ? 1 : -1);
        limit = start + delta * static_cast<double>(Uniform(rng_, -2, small ? 12 : 3000)) +
                static_cast<double>(Uniform(rng_, -2, 2));
        limit = std::clamp(limit, tmin, tmax);
      }
      Check("Range", {}, {Scalar(dtype, start), Scalar(dtype, limit), Scalar(dtype, delta)});
    }
  }
  // Wrapping int64 arithmetic.
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Check("Range", {},
        {HostTensor::Of<int64_t>({}, {lo}), HostTensor::Of<int64_t>({}, {hi}),
         HostTensor::Of<int64_t>({}, {hi})});
  Check("Range", {},
        {HostTensor::Of<int32_t>({}, {-5}), HostTensor::Of<int32_t>({}, {1 << 20}),
         HostTensor::Of<int32_t>({}, {3})});
  // Large float ranges: i * delta rounds in float.
  Check("Range", {},
        {Scalar(DType::kFloat32, 0.1), Scalar(DType::kFloat32, 3e5), Scalar(DType::kFloat32, 0.3)});
  Check("Range", {},
        {Scalar(DType::kFloat64, -1e3), Scalar(DType::kFloat64, 1e3), Scalar(DType::kFloat64, 0.01)});
}

TEST_F(MiscCudaTest, Dropout) {
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32,
                         DType::kInt64,   DType::kUint8,   DType::kBool,    DType::kInt8};
  for (int iter = 0; iter < 40; ++iter) {
    const DType dtype = types[iter % std::size(types)];
    const Shape s = RandomShape(rng_, 0, 5, iter % 9 == 0 ? 0 : 1, 9);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    const int64_t version = iter % 3 == 0 ? 7 : (iter % 3 == 1 ? 10 : 13);
    const std::string op = "Dropout-" + std::to_string(version);
    Attributes attrs;
    std::vector<HostTensor> inputs = {RandomBytes(dtype, s, rng_)};
    if (version == 13 && iter % 2 == 0) {
      inputs.push_back(Scalar(DType::kFloat32, 0.25));
      inputs.push_back(HostTensor::Of<bool>({}, {false}));
    } else if (version < 13) {
      attrs.Set("ratio", 0.3f);
    }
    Check(op, attrs, inputs);     // output and mask
    Check(op, attrs, inputs, 1);  // output only
  }
  // Absent ratio, training_mode false.
  Check("Dropout", {},
        {RandomBytes(DType::kFloat32, {3, 1000}, rng_), HostTensor::Absent(),
         HostTensor::Of<bool>({}, {false})});
}

// TopK data with many ties, NaNs and signed zeros (floats), or small ranges (ints).
HostTensor TopKData(DType dtype, const Shape& s, std::mt19937& rng, int64_t distinct) {
  const int64_t n = NumElements(s).value_or(0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = static_cast<double>(Uniform(rng, -distinct, distinct));
  HostTensor t = FromDoubles(dtype, s, v);
  if (IsFloat(dtype)) {
    const size_t es = DTypeSize(dtype);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = Uniform(rng, 0, 40);
      if (r == 0) PutValue(dtype, t.bytes.data() + i * es, std::numeric_limits<double>::quiet_NaN());
      if (r == 1) PutValue(dtype, t.bytes.data() + i * es, -0.0);
      if (r == 2) PutValue(dtype, t.bytes.data() + i * es, -std::numeric_limits<double>::infinity());
      if (r == 3)
        PutValue(dtype, t.bytes.data() + i * es, static_cast<double>(Uniform(rng, -1000, 1000)) / 3.0);
    }
  }
  return t;
}

TEST_F(MiscCudaTest, OneHot) {
  const DType index_types[] = {DType::kInt64, DType::kInt32, DType::kFloat32, DType::kFloat16, DType::kFloat64};
  for (int iter = 0; iter < 30; ++iter) {
    const Shape s = RandomShape(rng_, 0, 3, 1, 6);
    const int64_t rank = static_cast<int64_t>(s.size()) + 1;
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    const int64_t depth = Uniform(rng_, 1, 7);
    const DType it = index_types[iter % std::size(index_types)];
    std::vector<double> idx(static_cast<size_t>(*NumElements(s)));
    for (double& v : idx) v = static_cast<double>(Uniform(rng_, -depth - 2, depth + 2));  // some out of range
    SCOPED_TRACE(std::string(DTypeName(it)) + ShapeToString(s) + " axis " + std::to_string(axis));
    HostTensor indices = HostTensor::Zeros(it, s);
    for (size_t i = 0; i < idx.size(); ++i) {
      switch (it) {
        case DType::kInt64: reinterpret_cast<int64_t*>(indices.bytes.data())[i] = static_cast<int64_t>(idx[i]); break;
        case DType::kInt32: reinterpret_cast<int32_t*>(indices.bytes.data())[i] = static_cast<int32_t>(idx[i]); break;
        case DType::kFloat32: reinterpret_cast<float*>(indices.bytes.data())[i] = static_cast<float>(idx[i]); break;
        case DType::kFloat16: reinterpret_cast<Half*>(indices.bytes.data())[i] = FloatToHalf(static_cast<float>(idx[i])); break;
        default: reinterpret_cast<double*>(indices.bytes.data())[i] = idx[i]; break;
      }
    }
    const HostTensor values = iter % 2 ? HostTensor::Of<float>({2}, {-1.5f, 7}) : HostTensor::Of<int64_t>({2}, {3, 9});
    Check("OneHot", Attrs({{"axis", axis}}), {indices, I64({depth}), values});
  }
}

// CumSum adds in the CPU kernel's order and type: the results are the same bits.
TEST_F(MiscCudaTest, CumSum) {
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32, DType::kInt64};
  for (int iter = 0; iter < 60; ++iter) {
    const DType dtype = types[iter % std::size(types)];
    const Shape s = RandomShape(rng_, 1, 4, 1, 9);
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    Attributes attrs = Attrs({{"exclusive", Uniform(rng_, 0, 1)}, {"reverse", Uniform(rng_, 0, 1)}});
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis));
    HostTensor x = TopKData(dtype, s, rng_, 50);
    if (iter % 2) {
      Check("CumSum", attrs, {x, I64({axis})});
    } else {
      Check("CumSum", attrs, {x, HostTensor::Of<int32_t>({}, {static_cast<int32_t>(axis)})});
    }
  }
}

TEST_F(MiscCudaTest, TopK) {
  for (int iter = 0; iter < 120; ++iter) {
    const DType dtype = kTopKTypes[iter % std::size(kTopKTypes)];
    const Shape s = RandomShape(rng_, 1, 4, 1, 9);
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    const int64_t n = s[axis < 0 ? axis + rank : axis];
    const int64_t k = Uniform(rng_, 0, n);
    Attributes attrs =
        Attrs({{"axis", axis}, {"largest", Uniform(rng_, 0, 1)}, {"sorted", Uniform(rng_, 0, 1)}});
    if (iter % 2 == 0 && iter % 4 != 0) attrs.Set("axis", axis < 0 ? axis + rank : axis);
    if (iter % 7 == 0) attrs = Attrs({});  // Defaults: last axis, largest.
    const int64_t k_used = iter % 7 == 0 ? Uniform(rng_, 0, s.back()) : k;
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis) + " k " +
                 std::to_string(k_used));
    HostTensor x = TopKData(dtype, s, rng_, iter % 3 == 0 ? 2 : 50);
    if (iter % 5 == 0) {
      attrs.Set("k", k_used);  // Opset 1: k as an attribute.
      Check("TopK", attrs, {x});
    } else if (iter % 5 == 1) {
      Check("TopK", attrs, {x, HostTensor::Of<int32_t>({1}, {static_cast<int32_t>(k_used)})});
    } else {
      Check("TopK", attrs, {x, I64({k_used})}, iter % 5 == 2 ? std::optional<size_t>(1) : std::nullopt);
    }
  }
  // Rows longer than one tile (256), several tiles, strided rows.
  for (DType dtype : kTopKTypes) {
    for (const auto& [shape, axis, k] : {std::tuple<Shape, int64_t, int64_t>{{3, 1000}, -1, 17},
                                         {{2, 700, 3}, 1, 700},
                                         {{4097}, 0, 1},
                                         {{5, 300, 2}, -2, 299},
                                         {{600, 1}, 0, 600}}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(shape));
      for (int64_t largest : {0, 1}) {
        Check("TopK", Attrs({{"axis", axis}, {"largest", largest}}),
              {TopKData(dtype, shape, rng_, 100), I64({k})});
      }
    }
  }
}

TEST_F(MiscCudaTest, Lrn) {
  const Tolerance tol{2e-3, 1e-5, 1e-13};
  for (int iter = 0; iter < 60; ++iter) {
    const DType dtype = kLrnTypes[iter % std::size(kLrnTypes)];
    const Shape s = RandomShape(rng_, 2, 5, 1, 9);
    Attributes attrs = Attrs({{"size", Uniform(rng_, 1, 8)}});
    if (iter % 2 == 0) {
      attrs.Set("alpha", static_cast<float>(Uniform(rng_, 1, 1000)) * 1e-4f);
      attrs.Set("beta", static_cast<float>(Uniform(rng_, 1, 200)) / 100.0f);
      attrs.Set("bias", static_cast<float>(Uniform(rng_, 1, 40)) / 10.0f);
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    const int64_t count = NumElements(s).value_or(0);
    std::vector<double> v(static_cast<size_t>(count));
    for (double& x : v) x = static_cast<double>(Uniform(rng_, -3000, 3000)) / 1000.0;
    Check("LRN", attrs, {FromDoubles(dtype, s, v)}, std::nullopt, tol);
  }
  // A larger tensor with a wide window.
  std::vector<double> v(2 * 64 * 33 * 17);
  for (double& x : v) x = static_cast<double>(Uniform(rng_, -3000, 3000)) / 300.0;
  for (DType dtype : kLrnTypes) {
    Check("LRN", Attrs({{"size", int64_t{5}}, {"alpha", 1e-3f}}), {FromDoubles(dtype, {2, 64, 33, 17}, v)},
          std::nullopt, tol);
  }
}

}  // namespace
}  // namespace remex::kernels
