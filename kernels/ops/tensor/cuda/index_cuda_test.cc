// Differential tests of the index group's CUDA kernels (BitShift, in
// kernels/ops/elementwise/cuda/; GatherND, ScatterND, NonZero, Compress, in
// kernels/ops/tensor/cuda/) against the CPU kernels on random
// shapes (extent-1 and empty dims, broadcasting, negative indices and axes), every
// dtype each kernel takes and each attribute setting. Outputs must match bit for bit.
//
// Tests that run kernels skip themselves when no CUDA GPU is visible; registration and
// the checks made before any CUDA call (attributes, dtypes, empty outputs) run
// everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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
using testing::CreateCudaKernel;
using testing::CudaRegistry;
using testing::HostTensor;
using testing::UnreadDevicePointer;

constexpr DType kUintTypes[] = {DType::kUint8, DType::kUint16, DType::kUint32, DType::kUint64};
constexpr DType kAllTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                               DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUint8,
                               DType::kUint16,  DType::kUint32,  DType::kUint64,  DType::kBool};

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Shape RandomShape(std::mt19937& rng, size_t min_rank, size_t max_rank, int64_t min_extent = 1,
                  int64_t max_extent = 5) {
  Shape s(static_cast<size_t>(Uniform(rng, static_cast<int64_t>(min_rank), static_cast<int64_t>(max_rank))));
  for (int64_t& d : s) d = Uniform(rng, min_extent, max_extent);
  return s;
}

// Random bytes; floats as small integers (so that sums and products are exact or
// rounded alike), bool as 0/1, with some zeros.
HostTensor RandomValues(DType dtype, Shape shape, std::mt19937& rng) {
  HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
  const size_t es = DTypeSize(dtype);
  const size_t n = es ? t.bytes.size() / es : 0;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = t.bytes.data() + i * es;
    const bool zero = Uniform(rng, 0, 3) == 0;
    switch (dtype) {
      case DType::kFloat32: {
        const float v = zero ? 0.0f : static_cast<float>(Uniform(rng, -9, 9)) * 0.75f;
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kFloat64: {
        const double v = zero ? 0.0 : static_cast<double>(Uniform(rng, -9, 9)) * 0.375;
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kFloat16: {
        const Half h = FloatToHalf(zero ? 0.0f : static_cast<float>(Uniform(rng, -9, 9)) * 0.625f);
        std::memcpy(p, &h.bits, 2);
        break;
      }
      case DType::kBool:
        *p = zero ? 0 : static_cast<uint8_t>(Uniform(rng, 0, 1));
        break;
      default:
        for (size_t b = 0; b < es; ++b) p[b] = zero ? 0 : static_cast<uint8_t>(Uniform(rng, 0, 255));
        break;
    }
  }
  return t;
}

HostTensor Indices(const Shape& shape, const std::vector<int64_t>& v) {
  return HostTensor::Of<int64_t>(shape, v);
}

class IndexCudaTest : public testing::CudaStreamTest {
 protected:
  // Runs `op` on the CPU and on the GPU (kData inputs stay in host memory, as the VM
  // places them) and returns the CUDA kernel's status; on OK the outputs must match.
  Status RunBoth(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    REMEX_ASSIGN_OR_RETURN(
        testing::CpuAndCudaOutputs out,
        testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, std::nullopt, stream_, 0xCD));
    for (size_t i = 0; i < out.cpu.size(); ++i)
      testing::ExpectSameElements(op, out.cpu[i], out.cuda[i].bytes, i);
    return OkStatus();
  }

  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs) {
    Status st = RunBoth(op, attrs, std::move(inputs));
    EXPECT_TRUE(st.ok()) << op << " on cuda: " << st.ToString();
  }

  // Index tuples of `k` values for the dims `extents`, each in [-extent, extent), for
  // `tuples` tuples (shape tuple_shape + [k]). With `distinct`, no two tuples name the
  // same slice (the caller asks for at most as many as there are).
  HostTensor RandomTuples(const Shape& tuple_shape, const std::vector<int64_t>& extents, bool distinct) {
    const int64_t k = static_cast<int64_t>(extents.size());
    const int64_t n = *NumElements(tuple_shape);
    int64_t slices = 1;
    for (int64_t e : extents) slices *= e;
    // Flat slice numbers: shuffled for distinct tuples, drawn with repeats otherwise.
    std::vector<int64_t> flat(static_cast<size_t>(distinct ? slices : n));
    if (distinct) {
      for (int64_t i = 0; i < slices; ++i) flat[i] = i;
      std::shuffle(flat.begin(), flat.end(), rng_);
    } else {
      for (int64_t& f : flat) f = Uniform(rng_, 0, slices - 1);
    }
    std::vector<int64_t> v(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j) {
      int64_t rest = flat[j];
      for (int64_t t = k; t-- > 0;) {
        const int64_t c = rest % extents[t];
        rest /= extents[t];
        v[j * k + t] = Uniform(rng_, 0, 1) ? c : c - extents[t];  // Sometimes counted from the end.
      }
    }
    Shape s = tuple_shape;
    s.push_back(k);
    return Indices(s, v);
  }

  std::mt19937 rng_{20261126};
};

// ---------------------------------------------------------------------------
// Without a GPU: registration, attribute checks and the checks before any launch.

constexpr const char* kIndexOps[] = {"BitShift", "GatherND",   "ScatterND",   "NonZero",
                                     "Unique",   "Compress-9", "Compress-11"};

TEST(IndexCudaRegistration, RegistersEveryOp) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : kIndexOps) {
    EXPECT_TRUE(testing::FindVersionedKernel(*registry, op, DeviceKind::kCuda)) << op;
  }
}

TEST(IndexCudaRegistration, RejectsBadAttributesAtCreationAsTheCpuDoes) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  struct Case {
    const char* op;
    Attributes attrs;
    bool ok;
  };
  const Case cases[] = {
      {"BitShift", {}, false},
      {"BitShift", Attrs({{"direction", std::string("UP")}}), false},
      {"BitShift", Attrs({{"direction", int64_t{1}}}), false},
      {"BitShift", Attrs({{"direction", std::string("RIGHT")}}), true},
      {"ScatterND", Attrs({{"reduction", std::string("max")}}), false},
      {"ScatterND", Attrs({{"reduction", std::string("mul")}}), true},
  };
  for (const Case& c : cases) {
    for (DeviceKind device : {DeviceKind::kCpu, DeviceKind::kCuda}) {
      auto k = (*registry->FindKernel(c.op, device))(c.attrs);
      EXPECT_EQ(k.ok(), c.ok) << c.op << " on " << DeviceKindName(device) << ": " << k.status().ToString();
    }
  }
}

TEST(IndexCudaRegistration, RejectsBadCallsBeforeLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  void* fake = UnreadDevicePointer();  // the checks fail before anything reads it
  // BitShift on signed integers; GatherND with int32 indices; Compress with a true
  // condition entry past the extent (host memory, checked as on the CPU).
  auto shift = CreateCudaKernel(*registry, "BitShift", Attrs({{"direction", std::string("LEFT")}}));
  std::vector<TensorRef> ins = {{fake, DType::kInt32, {2}}, {fake, DType::kInt32, {2}}};
  std::vector<TensorRef> outs = {{fake, DType::kInt32, {2}}};
  EXPECT_EQ(shift->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  auto gather = CreateCudaKernel(*registry, "GatherND", {});
  ins = {{fake, DType::kFloat32, {2, 2}}, {fake, DType::kInt32, {1, 2}}};
  outs = {{fake, DType::kFloat32, {1}}};
  EXPECT_EQ(gather->Compute(ins, outs).code(), StatusCode::kInvalidArgument);
  auto compress = CreateCudaKernel(*registry, "Compress", {});
  uint8_t cond[3] = {0, 0, 1};
  ins = {{fake, DType::kFloat32, {2}}, {cond, DType::kBool, {3}}};
  outs = {{fake, DType::kFloat32, {1}}};
  Status st = compress->Compute(ins, outs);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out of range"), std::string::npos) << st.ToString();
}

TEST(IndexCudaRegistration, EmptyOutputsNeedNoLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto run = [&](const char* op, const Attributes& attrs, std::vector<TensorRef> ins,
                 std::vector<TensorRef> outs) {
    auto k = (*testing::FindVersionedKernel(*registry, op, DeviceKind::kCuda))(attrs);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    Status st = (*k)->Compute(ins, outs);
    EXPECT_TRUE(st.ok()) << op << ": " << st.ToString();
  };
  uint8_t zeros[4] = {0, 0, 0, 0};
  run("NonZero", {}, {{zeros, DType::kUint8, {2, 2}}}, {{nullptr, DType::kInt64, {2, 0}}});
  run("Compress", {}, {{UnreadDevicePointer(), DType::kFloat32, {4}}, {zeros, DType::kBool, {4}}},
      {{nullptr, DType::kFloat32, {0}}});
  run("GatherND", {}, {{nullptr, DType::kFloat32, {3, 0}}, {UnreadDevicePointer(), DType::kInt64, {2, 1}}},
      {{nullptr, DType::kFloat32, {2, 0}}});
  run("BitShift", Attrs({{"direction", std::string("LEFT")}}),
      {{nullptr, DType::kUint8, {0, 3}}, {UnreadDevicePointer(), DType::kUint8, {3}}},
      {{nullptr, DType::kUint8, {0, 3}}});
}

// ---------------------------------------------------------------------------
// On the GPU.

TEST_F(IndexCudaTest, BitShift) {
  for (int iter = 0; iter < 48; ++iter) {
    const DType dtype = kUintTypes[iter % std::size(kUintTypes)];
    const Shape out = RandomShape(rng_, 0, 4);
    // Each input drops leading dims or sets some dims to 1 (broadcasting).
    auto operand = [&]() {
      Shape s(out.begin() + Uniform(rng_, 0, static_cast<int64_t>(out.size())), out.end());
      for (int64_t& d : s) {
        if (Uniform(rng_, 0, 2) == 0) d = 1;
      }
      return s;
    };
    HostTensor x = RandomValues(dtype, operand(), rng_);
    HostTensor y = RandomValues(dtype, operand(), rng_);
    // Shift amounts from 0 to past the bit width.
    const size_t es = DTypeSize(dtype);
    for (size_t i = 0; i * es < y.bytes.size(); ++i) {
      std::memset(y.bytes.data() + i * es, 0, es);
      y.bytes[i * es] = static_cast<uint8_t>(Uniform(rng_, 0, static_cast<int64_t>(es * 8 + 3)));
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(x.shape) + ShapeToString(y.shape));
    Check("BitShift", Attrs({{"direction", std::string(iter % 2 ? "LEFT" : "RIGHT")}}), {x, y});
  }
}

TEST_F(IndexCudaTest, GatherNd) {
  for (int iter = 0; iter < 60; ++iter) {
    const DType dtype = kAllTypes[iter % std::size(kAllTypes)];
    const Shape data_shape = RandomShape(rng_, 1, 4);
    const int64_t r = static_cast<int64_t>(data_shape.size());
    const int64_t batch_dims = Uniform(rng_, 0, r - 1);
    const int64_t k = Uniform(rng_, 1, r - batch_dims);
    Shape tuple_shape(data_shape.begin(), data_shape.begin() + batch_dims);
    const Shape more = RandomShape(rng_, 0, 2);  // Empty: indices of rank 1 (one tuple per batch entry).
    tuple_shape.insert(tuple_shape.end(), more.begin(), more.end());
    const std::vector<int64_t> extents(data_shape.begin() + batch_dims, data_shape.begin() + batch_dims + k);
    HostTensor indices = RandomTuples(tuple_shape, extents, false);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(data_shape) + " indices " +
                 ShapeToString(indices.shape) + " batch_dims " + std::to_string(batch_dims));
    Check("GatherND", Attrs({{"batch_dims", batch_dims}}), {RandomValues(dtype, data_shape, rng_), indices});
  }
}

TEST_F(IndexCudaTest, ScatterNd) {
  const char* reductions[] = {"none", "add", "mul"};
  for (int iter = 0; iter < 72; ++iter) {
    const std::string reduction = reductions[iter % 3];
    DType dtype = kAllTypes[(iter / 3) % std::size(kAllTypes)];
    if (reduction != "none" && dtype == DType::kBool) dtype = DType::kInt32;
    const Shape data_shape = RandomShape(rng_, 1, 4);
    const int64_t r = static_cast<int64_t>(data_shape.size());
    const int64_t k = Uniform(rng_, 1, r);
    const std::vector<int64_t> extents(data_shape.begin(), data_shape.begin() + k);
    // "none" with distinct tuples (duplicates are undefined); add and mul with repeats.
    int64_t targets = 1;
    for (int64_t e : extents) targets *= e;
    const int64_t tuples =
        reduction == "none" ? Uniform(rng_, 0, targets) : Uniform(rng_, 0, 2 * targets + 1);
    HostTensor indices = RandomTuples({tuples}, extents, reduction == "none");
    Shape updates_shape = {tuples};
    updates_shape.insert(updates_shape.end(), data_shape.begin() + k, data_shape.end());
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(data_shape) + " indices " +
                 ShapeToString(indices.shape) + " " + reduction);
    Check("ScatterND", Attrs({{"reduction", reduction}}),
          {RandomValues(dtype, data_shape, rng_), indices, RandomValues(dtype, updates_shape, rng_)});
  }
}

TEST_F(IndexCudaTest, NonZero) {
  for (int iter = 0; iter < 36; ++iter) {
    const DType dtype = kAllTypes[iter % std::size(kAllTypes)];
    HostTensor x = RandomValues(dtype, RandomShape(rng_, 0, 4, 0, 5), rng_);
    if (dtype == DType::kFloat32 && !x.bytes.empty()) {  // -0.0 is zero.
      const float negative_zero = -0.0f;
      std::memcpy(x.bytes.data(), &negative_zero, 4);
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(x.shape));
    Check("NonZero", {}, {x});
  }
}

// Unique with and without axis, sorted and in order of first occurrence, every output;
// values from a small range so that there are repeats.
TEST_F(IndexCudaTest, Unique) {
  for (int iter = 0; iter < 36; ++iter) {
    const DType dtype = kAllTypes[iter % std::size(kAllTypes)];
    const Shape s = RandomShape(rng_, 1, 3, 1, 4);
    HostTensor x = RandomValues(dtype, s, rng_);
    const size_t es = DTypeSize(dtype);
    for (size_t i = es; i < x.bytes.size(); i += 2 * es) {
      std::memcpy(x.bytes.data() + i, x.bytes.data(), es);  // Repeats of the first value.
    }
    Attributes attrs = Attrs({{"sorted", int64_t{iter % 2}}});
    if (iter % 3 != 0) {
      const int64_t rank = static_cast<int64_t>(s.size());
      attrs.Set("axis", Uniform(rng_, -rank, rank - 1));
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    Check("Unique", attrs, {x});
  }
}

TEST_F(IndexCudaTest, Compress) {
  for (int iter = 0; iter < 48; ++iter) {
    const DType dtype = kAllTypes[iter % std::size(kAllTypes)];
    const Shape s = RandomShape(rng_, 1, 4, 1, 5);
    const int64_t rank = static_cast<int64_t>(s.size());
    const bool with_axis = iter % 3 != 0;
    const bool opset11 = iter % 2 == 0;
    Attributes attrs;
    int64_t extent = *NumElements(s);
    if (with_axis) {
      const int64_t axis = Uniform(rng_, opset11 ? -rank : 0, rank - 1);
      attrs.Set("axis", axis);
      extent = s[axis < 0 ? axis + rank : axis];
    }
    // Shorter than the extent, or longer with false entries past it.
    const int64_t len = Uniform(rng_, 0, extent + 2);
    HostTensor cond = HostTensor::Zeros(DType::kBool, {len});
    for (int64_t i = 0; i < std::min(len, extent); ++i)
      cond.bytes[i] = static_cast<uint8_t>(Uniform(rng_, 0, 1));
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " condition " + std::to_string(len));
    Check(opset11 ? "Compress-11" : "Compress-9", attrs, {RandomValues(dtype, s, rng_), cond});
  }
}

}  // namespace
}  // namespace remex::kernels
