// Differential tests of the CUDA data-movement kernels (kernels/ops/tensor/cuda/transform.cc)
// against the CPU kernels: random shapes (odd extents, extent-1 dims, negative axes),
// several attribute settings and dtypes; the outputs must match bit for bit (NaNs of
// float dtypes match any NaN). Tests that need a GPU skip themselves when none is
// visible; registration and the checks made before any CUDA call run everywhere.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
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
using testing::CreateCudaKernel;
using testing::CudaRegistry;
using testing::UnreadDevicePointer;
using testing::DeviceBuffer;
using testing::HostTensor;

// ---------------------------------------------------------------------------
// Random data.

constexpr DType kMoveTypes[] = {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kUint8, DType::kBool,
                                DType::kInt32,   DType::kInt8,    DType::kFloat64, DType::kUint16};

HostTensor RandomTensor(DType dtype, Shape shape, std::mt19937& rng) {
  HostTensor t = HostTensor::Zeros(dtype, std::move(shape));
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(byte(rng));
  if (dtype == DType::kBool) {
    for (uint8_t& b : t.bytes) b &= 1;
  }
  return t;
}

HostTensor Ints(const std::vector<int64_t>& v, DType dtype = DType::kInt64) {
  if (dtype == DType::kInt32) {
    std::vector<int32_t> w(v.begin(), v.end());
    return HostTensor::Of<int32_t>({static_cast<int64_t>(v.size())}, w);
  }
  return HostTensor::Of<int64_t>({static_cast<int64_t>(v.size())}, v);
}

int64_t Uniform(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

Shape RandomShape(std::mt19937& rng, size_t min_rank, size_t max_rank, int64_t max_extent = 7) {
  Shape s(static_cast<size_t>(Uniform(rng, static_cast<int64_t>(min_rank), static_cast<int64_t>(max_rank))));
  for (int64_t& d : s) d = Uniform(rng, 1, max_extent);
  return s;
}

DType RandomMoveType(std::mt19937& rng) {
  return kMoveTypes[Uniform(rng, 0, static_cast<int64_t>(std::size(kMoveTypes)) - 1)];
}

// ---------------------------------------------------------------------------
// The differential runner.

class TransformCudaTest : public testing::CudaStreamTest {
 protected:
  // Runs `op` on the CPU and on the GPU (kData inputs stay in host memory, as the VM
  // places them; output buffers start as 0xCD bytes) and returns the CUDA kernel's
  // status; on OK the outputs must match bit for bit.
  Status RunBoth(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs,
                 std::optional<size_t> num_outputs = std::nullopt) {
    REMEX_ASSIGN_OR_RETURN(
        testing::CpuAndCudaOutputs out,
        testing::RunOnCpuAndCuda(*registry_, op, attrs, inputs, num_outputs, stream_, 0xCD));
    for (size_t i = 0; i < out.cpu.size(); ++i)
      testing::ExpectSameElements(op, out.cpu[i], out.cuda[i].bytes, i);
    return OkStatus();
  }

  // Runs both and expects the CUDA kernel to succeed.
  void Check(const std::string& op, const Attributes& attrs, std::vector<HostTensor> inputs,
             std::optional<size_t> num_outputs = std::nullopt) {
    Status st = RunBoth(op, attrs, std::move(inputs), num_outputs);
    EXPECT_TRUE(st.ok()) << op << " on cuda: " << st.ToString();
  }

  std::mt19937 rng_{20240611};
};

// ---------------------------------------------------------------------------
// Without a GPU: registration, attribute checks and argument checks.

TEST(TransformCudaRegistration, RegistersEveryOp) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  for (const char* op : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Concat",
                         "Split", "Expand", "Tile", "Gather", "Pad", "Where", "Cast", "DepthToSpace",
                         "SpaceToDepth"}) {
    EXPECT_TRUE(registry->FindKernel(op, DeviceKind::kCuda)) << op;
  }
}

TEST(TransformCudaRegistration, RejectsBadAttributesAtCreation) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  auto create = [&](const char* op, const Attributes& attrs) {
    return (*registry->FindKernel(op, DeviceKind::kCuda))(attrs).status();
  };
  EXPECT_EQ(create("Concat", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("Pad", Attrs({{"mode", std::string("wrap")}})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("DepthToSpace", Attrs({{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(create("SpaceToDepth", Attrs({{"blocksize", int64_t{0}}})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(create("SpaceToDepth", Attrs({{"blocksize", int64_t{2}}, {"layout", std::string("NC")}})).code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(create("Cast", Attrs({{"to", int64_t{8}}})).code(), StatusCode::kOk);  // string
  EXPECT_NE(create("Cast", Attrs({{"to", int64_t{999}}})).code(), StatusCode::kOk);
  EXPECT_TRUE(create("Cast", Attrs({{"to", int64_t{10}}})).ok());
  EXPECT_TRUE(create("DepthToSpace", Attrs({{"blocksize", int64_t{2}}, {"layout", std::string("NHWC")}})).ok());
}

TEST(TransformCudaRegistration, RejectsBadCallsBeforeLaunch) {
  auto registry = CudaRegistry({});
  ASSERT_TRUE(registry);
  void* fake = UnreadDevicePointer();  // the checks fail before anything reads it
  auto transpose = (*registry->FindKernel("Transpose", DeviceKind::kCuda))(Attrs({{"perm", std::vector<int64_t>{1, 0}}}));
  ASSERT_TRUE(transpose.ok());
  TensorRef x{fake, DType::kFloat32, {2, 3}};
  TensorRef wrong{fake, DType::kFloat32, {2, 3}};
  EXPECT_EQ((*transpose)->Compute({&x, 1}, {&wrong, 1}).code(), StatusCode::kInvalidArgument);
  TensorRef wrong_dtype{fake, DType::kFloat16, {3, 2}};
  EXPECT_EQ((*transpose)->Compute({&x, 1}, {&wrong_dtype, 1}).code(), StatusCode::kInvalidArgument);

  auto gather = (*registry->FindKernel("Gather", DeviceKind::kCuda))(Attributes());
  ASSERT_TRUE(gather.ok());
  TensorRef data{fake, DType::kFloat32, {4, 3}};
  TensorRef float_indices{fake, DType::kFloat32, {2}};
  TensorRef out{fake, DType::kFloat32, {2, 3}};
  std::vector<TensorRef> ins = {data, float_indices};
  EXPECT_EQ((*gather)->Compute(ins, {&out, 1}).code(), StatusCode::kInvalidArgument);

  // Empty outputs: nothing to launch, OK without a GPU.
  TensorRef empty_in{nullptr, DType::kFloat32, {0, 3}};
  TensorRef empty_out{nullptr, DType::kFloat32, {3, 0}};
  EXPECT_TRUE((*transpose)->Compute({&empty_in, 1}, {&empty_out, 1}).ok());
}

// ---------------------------------------------------------------------------
// With a GPU.

TEST_F(TransformCudaTest, Transpose) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 0, 6);
    const DType dtype = RandomMoveType(rng_);
    std::vector<int64_t> perm(s.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    Attributes attrs;
    if (iter % 5 != 0) attrs.Set("perm", perm);  // Every fifth: the default (reversed).
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    Check("Transpose", attrs, {RandomTensor(dtype, s, rng_)});
  }
  // Larger tensors, odd extents, the common NCHW <-> NHWC permutations.
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kUint8}) {
    Check("Transpose", Attrs({{"perm", std::vector<int64_t>{0, 2, 3, 1}}}), {RandomTensor(dtype, {2, 33, 17, 65}, rng_)});
    Check("Transpose", Attrs({{"perm", std::vector<int64_t>{0, 3, 1, 2}}}), {RandomTensor(dtype, {3, 31, 9, 40}, rng_)});
    Check("Transpose", {}, {RandomTensor(dtype, {257, 129}, rng_)});
  }
  // Empty input.
  Check("Transpose", {}, {RandomTensor(DType::kFloat32, {3, 0, 2}, rng_)});
}

TEST_F(TransformCudaTest, TransposeBeyondEightMergedDimsIsUnimplemented) {
  const Shape s(9, 2);
  std::vector<int64_t> perm = {8, 7, 6, 5, 4, 3, 2, 1, 0};
  Status st = RunBoth("Transpose", Attrs({{"perm", perm}}), {RandomTensor(DType::kFloat32, s, rng_)});
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  // Nine dims that merge to fewer run.
  Check("Transpose", Attrs({{"perm", std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 8, 7}}}),
        {RandomTensor(DType::kFloat32, s, rng_)});
}

TEST_F(TransformCudaTest, Slice) {
  for (int iter = 0; iter < 80; ++iter) {
    const Shape s = RandomShape(rng_, 1, 5, 9);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    const DType index_type = iter % 2 ? DType::kInt32 : DType::kInt64;
    std::vector<int64_t> axes(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
    std::shuffle(axes.begin(), axes.end(), rng_);
    axes.resize(static_cast<size_t>(Uniform(rng_, 1, rank)));
    std::vector<int64_t> starts, ends, steps;
    for (int64_t& a : axes) {
      const int64_t dim = s[a];
      if (Uniform(rng_, 0, 1)) a -= rank;  // Negative axis.
      int64_t step = Uniform(rng_, 1, 3) * (Uniform(rng_, 0, 2) == 0 ? -1 : 1);
      starts.push_back(Uniform(rng_, -dim - 2, dim + 2));
      ends.push_back(Uniform(rng_, 0, 6) == 0 ? (step > 0 ? std::numeric_limits<int64_t>::max()
                                                          : std::numeric_limits<int64_t>::min())
                                              : Uniform(rng_, -dim - 2, dim + 2));
      steps.push_back(step);
    }
    std::vector<HostTensor> in = {RandomTensor(dtype, s, rng_), Ints(starts, index_type), Ints(ends, index_type)};
    const int form = iter % 3;  // 0: axes and steps, 1: axes only, 2: neither (axes 0..n-1).
    if (form == 0) {
      in.push_back(Ints(axes, index_type));
      in.push_back(Ints(steps, index_type));
    } else if (form == 1) {
      in.push_back(Ints(axes, index_type));
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    Check("Slice", {}, std::move(in));
  }
  // Absent axes with present steps; a reversal of a whole dim.
  Check("Slice", {},
        {RandomTensor(DType::kFloat16, {5, 7}, rng_), Ints({-1, 0}), Ints({std::numeric_limits<int64_t>::min(), 7}),
         HostTensor::Absent(), Ints({-1, 2})});
  // Axes that keep one element with steps whose product with the stride would overflow.
  Check("Slice", {},
        {RandomTensor(DType::kFloat32, {5, 7, 3}, rng_), Ints({2, 4}), Ints({3, 0}), Ints({0, 1}),
         Ints({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})});
}

TEST_F(TransformCudaTest, SliceWithOffsetsBeyond32Bits) {
  // Only a few elements are copied, from offsets past 2^31: the 64-bit index path.
#if defined(REMEX_CUDA_EMULATION)
  // The emulated device's memory is the host's: the 3 GiB input and its copies take
  // over 10 GiB of host memory, more than CI machines can spare.
  GTEST_SKIP() << "needs 3 GiB host copies of the input: runs on a real GPU only (label cuda); "
                  "SliceWithOffsetsBeyond32BitsOnTheDevice covers the path here";
#endif
  const Shape s = {3, int64_t{1} << 30};
  HostTensor x = HostTensor::Zeros(DType::kUint8, s);
  for (size_t i = x.bytes.size() - 5000; i < x.bytes.size(); ++i) x.bytes[i] = static_cast<uint8_t>(i * 31);
  Check("Slice", {}, {std::move(x), Ints({2, -1000}), Ints({3, -1}), Ints({0, 1}), Ints({1, 3})});
}

// The same 64-bit index path with the input left on the device: only the bytes the
// slice reads are written and compared, so no 3 GiB host copies (this one also runs
// under the host emulation, whose device memory is host memory).
TEST_F(TransformCudaTest, SliceWithOffsetsBeyond32BitsOnTheDevice) {
  constexpr int64_t kCols = int64_t{1} << 30;
  const size_t bytes = static_cast<size_t>(3 * kCols);
  void* x = nullptr;
  if (cudaMalloc(&x, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "3 GiB of device memory are not available";
  }
  // The last 5000 bytes of row 2 (offsets beyond 2^31) hold a pattern.
  std::vector<uint8_t> tail(5000);
  for (size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<uint8_t>(i * 31 + 7);
  const size_t tail_at = bytes - tail.size();
  ASSERT_EQ(cudaMemcpy(static_cast<uint8_t*>(x) + tail_at, tail.data(), tail.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  // x[2:3, -1000:-1:3]: 333 bytes from offset 3 * 2^30 - 1000.
  constexpr int64_t kOut = 333;
  void* y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, kOut), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0xCD, kOut), cudaSuccess);
  auto kernel = testing::CreateCudaKernel(*registry_, "Slice", {});
  ASSERT_TRUE(kernel);
  HostTensor starts = Ints({2, -1000}), ends = Ints({3, -1}), axes = Ints({0, 1}), steps = Ints({1, 3});
  const std::vector<TensorRef> in = {TensorRef{x, DType::kUint8, {3, kCols}}, starts.Ref(), ends.Ref(), axes.Ref(),
                                     steps.Ref()};
  const std::vector<TensorRef> out = {TensorRef{y, DType::kUint8, {1, kOut}}};
  Status st = kernel->Compute(in, out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::vector<uint8_t> got(kOut);
  ASSERT_EQ(cudaMemcpy(got.data(), y, kOut, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t j = 0; j < kOut; ++j) {
    const size_t offset = bytes - 1000 + static_cast<size_t>(3 * j);
    ASSERT_EQ(got[j], tail[offset - tail_at]) << "element " << j;
  }
  cudaFree(x);
  cudaFree(y);
}

TEST_F(TransformCudaTest, Concat) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 1, 5);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    std::vector<HostTensor> in;
    const int64_t count = Uniform(rng_, 1, 4);
    for (int64_t k = 0; k < count; ++k) {
      Shape t = s;
      t[a] = Uniform(rng_, 0, 5);  // Empty inputs included.
      in.push_back(RandomTensor(dtype, t, rng_));
    }
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis));
    Check("Concat", Attrs({{"axis", axis}}), std::move(in));
  }
  // Rows of 16-byte multiples (the widened copy) and odd rows.
  Check("Concat", Attrs({{"axis", int64_t{1}}}),
        {RandomTensor(DType::kFloat16, {3, 8, 16}, rng_), RandomTensor(DType::kFloat16, {3, 24, 16}, rng_)});
  Check("Concat", Attrs({{"axis", int64_t{-1}}}),
        {RandomTensor(DType::kFloat32, {5, 3}, rng_), RandomTensor(DType::kFloat32, {5, 7}, rng_)});
}

TEST_F(TransformCudaTest, Split) {
  for (int iter = 0; iter < 40; ++iter) {
    Shape s = RandomShape(rng_, 1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis));
    if (iter % 2 == 0) {
      // Explicit parts (some empty) as an input.
      std::vector<int64_t> parts;
      int64_t left = s[a];
      while (left > 0) {
        const int64_t p = Uniform(rng_, 0, left);
        parts.push_back(p);
        left -= p;
      }
      parts.push_back(0);
      Check("Split", Attrs({{"axis", axis}}), {RandomTensor(dtype, s, rng_), Ints(parts)});
    } else {
      const int64_t n = Uniform(rng_, 1, 3);
      s[a] = n * Uniform(rng_, 1, 3);
      Check("Split", Attrs({{"axis", axis}, {"num_outputs", n}}), {RandomTensor(dtype, s, rng_)});
    }
  }
}

TEST_F(TransformCudaTest, Gather) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    const bool default_axis = iter % 4 == 0;  // Every fourth: the default axis 0.
    const int64_t axis = default_axis ? 0 : Uniform(rng_, -rank, rank - 1);
    const int64_t n = s[axis < 0 ? axis + rank : axis];
    const Shape index_shape = RandomShape(rng_, 0, 2, 5);
    std::vector<int64_t> idx(static_cast<size_t>(*NumElements(index_shape)));
    for (int64_t& v : idx) v = Uniform(rng_, -n, n - 1);
    HostTensor indices = iter % 2 ? HostTensor::Of<int64_t>(index_shape, idx)
                                  : HostTensor::Of<int32_t>(index_shape, std::vector<int32_t>(idx.begin(), idx.end()));
    Attributes attrs;
    if (!default_axis) attrs.Set("axis", axis);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis));
    Check("Gather", attrs, {RandomTensor(dtype, s, rng_), std::move(indices)});
  }
  // Embedding-like rows (widened to 16-byte units) and an empty index list.
  Check("Gather", {}, {RandomTensor(DType::kFloat32, {50, 64}, rng_), HostTensor::Of<int64_t>({3, 2}, {0, 49, -1, 7, 7, -50})});
  Check("Gather", Attrs({{"axis", int64_t{1}}}),
        {RandomTensor(DType::kFloat16, {2, 5, 3}, rng_), HostTensor::Of<int64_t>({0}, std::vector<int64_t>{})});
}

TEST_F(TransformCudaTest, GatherElements) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    const int64_t axis = iter % 4 == 0 ? 0 : Uniform(rng_, -rank, rank - 1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    // Indices of data's rank: each dim at most data's, any extent along the axis.
    Shape index_shape = s;
    for (int64_t d = 0; d < rank; ++d) index_shape[d] = d == a ? Uniform(rng_, 1, 6) : Uniform(rng_, 1, s[d]);
    std::vector<int64_t> idx(static_cast<size_t>(*NumElements(index_shape)));
    for (int64_t& v : idx) v = Uniform(rng_, -s[a], s[a] - 1);
    HostTensor indices = iter % 2 ? HostTensor::Of<int64_t>(index_shape, idx)
                                  : HostTensor::Of<int32_t>(index_shape, std::vector<int32_t>(idx.begin(), idx.end()));
    Attributes attrs;
    if (iter % 4 != 0) attrs.Set("axis", axis);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis));
    Check("GatherElements", attrs, {RandomTensor(dtype, s, rng_), std::move(indices)});
  }
}

TEST_F(TransformCudaTest, ScatterElements) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = RandomShape(rng_, 1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const int64_t axis = Uniform(rng_, -rank, rank - 1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    // Indices within data's dims; along the axis a permutation prefix, so that "none"
    // has no duplicate targets (ONNX leaves their winner undefined).
    Shape is = s;
    for (int64_t d = 0; d < rank; ++d) is[d] = Uniform(rng_, 1, s[d]);
    std::vector<int64_t> idx(static_cast<size_t>(*NumElements(is)));
    const int64_t inner = *NumElements(Shape(is.begin() + a + 1, is.end()));
    for (size_t i = 0; i < idx.size(); ++i) {
      const int64_t k = (static_cast<int64_t>(i) / inner) % is[a];
      idx[i] = iter % 3 == 0 ? k - s[a] : k;  // negative indices every third iteration
    }
    const char* reductions[] = {"none", "add", "mul"};
    const std::string reduction = reductions[iter % 3];
    const DType dtype = reduction == "none" ? RandomMoveType(rng_) : (iter % 2 ? DType::kFloat32 : DType::kInt64);
    Attributes attrs = Attrs({{"axis", axis}, {"reduction", reduction}});
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " axis " + std::to_string(axis) + " " + reduction);
    HostTensor indices = iter % 2 ? HostTensor::Of<int64_t>(is, idx)
                                  : HostTensor::Of<int32_t>(is, std::vector<int32_t>(idx.begin(), idx.end()));
    Check("ScatterElements", attrs, {RandomTensor(dtype, s, rng_), std::move(indices), RandomTensor(dtype, is, rng_)});
  }
  // Duplicate targets with add: the updates accumulate in order on both devices.
  Check("ScatterElements", Attrs({{"reduction", std::string("add")}}),
        {RandomTensor(DType::kFloat32, {4}, rng_), HostTensor::Of<int64_t>({6}, {1, 1, 3, 1, 0, 3}),
         RandomTensor(DType::kFloat32, {6}, rng_)});
  Check("Scatter-10", {}, {RandomTensor(DType::kFloat16, {3, 3}, rng_), HostTensor::Of<int64_t>({2, 3}, {1, 0, 2, 0, 2, 1}),
                           RandomTensor(DType::kFloat16, {2, 3}, rng_)});
}

TEST_F(TransformCudaTest, TriluAndEyeLike) {
  for (int iter = 0; iter < 40; ++iter) {
    const Shape s = RandomShape(rng_, 2, 4);
    const DType dtype = RandomMoveType(rng_);
    const int64_t k = Uniform(rng_, -8, 8);
    Attributes attrs;
    if (iter % 2) attrs.Set("upper", int64_t{0});
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " k " + std::to_string(k));
    std::vector<HostTensor> in = {RandomTensor(dtype, s, rng_)};
    if (iter % 3) in.push_back(HostTensor::Of<int64_t>({}, {k}));  // k stays on the host (kData).
    Check("Trilu", attrs, in);
    const Shape m = {s[0], s[1]};
    Attributes eye = Attrs({{"k", k % 4}});
    if (iter % 2) eye.Set("dtype", int64_t{iter % 4 == 1 ? 10 : 7});  // float16, int64
    Check("EyeLike", eye, {RandomTensor(dtype, m, rng_)});
  }
}

TEST_F(TransformCudaTest, GatherOutOfRangeIndexWritesZeros) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  DeviceBuffer x(data.size() * 4), idx(2 * 8), out(2 * 3 * 4);
  const int64_t indices[2] = {1, 2};  // 2 is out of range for extent 2.
  ASSERT_EQ(cudaMemcpy(x.data(), data.data(), x.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(idx.data(), indices, idx.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  auto gather = (*registry_->FindKernel("Gather", DeviceKind::kCuda))(Attributes());
  ASSERT_TRUE(gather.ok());
  std::vector<TensorRef> ins = {{x.data(), DType::kFloat32, {2, 3}}, {idx.data(), DType::kInt64, {2}}};
  TensorRef y{out.data(), DType::kFloat32, {2, 3}};
  ASSERT_TRUE((*gather)->Compute(ins, {&y, 1}).ok());
  std::vector<float> got(6);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, (std::vector<float>{4, 5, 6, 0, 0, 0}));
}

TEST_F(TransformCudaTest, Pad) {
  const char* modes[] = {"constant", "reflect", "edge"};
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kUint8, DType::kInt64,
                         DType::kBool};
  for (int iter = 0; iter < 90; ++iter) {
    const Shape s = RandomShape(rng_, 0, 4, 6);
    const size_t rank = s.size();
    const std::string mode = modes[iter % 3];
    const DType dtype = types[Uniform(rng_, 0, std::size(types) - 1)];
    std::vector<int64_t> pads(2 * rank);
    for (size_t d = 0; d < rank; ++d) {
      // Negative pads crop; reflect pads past the extent wrap around the mirror.
      pads[d] = Uniform(rng_, -1, mode == "reflect" ? s[d] + 1 : 3);
      pads[d + rank] = Uniform(rng_, -1, 3);
      if (s[d] + pads[d] + pads[d + rank] < 0) pads[d] = pads[d + rank] = 0;
    }
    Attributes attrs = Attrs({{"mode", mode}});
    std::vector<HostTensor> in = {RandomTensor(dtype, s, rng_)};
    const int form = Uniform(rng_, 0, 2);
    if (form == 0) {  // Opset < 11: pads and value as attributes.
      attrs.Set("pads", pads);
      attrs.Set("value", dtype == DType::kUint8 ? 300.0f : -2.5f);  // 300 saturates to 255.
    } else {
      in.push_back(Ints(pads, iter % 2 ? DType::kInt32 : DType::kInt64));
      if (form == 2 && mode == "constant") {
        HostTensor c = RandomTensor(dtype, {}, rng_);  // constant_value on the device.
        in.push_back(std::move(c));
      }
    }
    SCOPED_TRACE(mode + " " + std::string(DTypeName(dtype)) + ShapeToString(s));
    Check("Pad", attrs, std::move(in));
  }
}

TEST_F(TransformCudaTest, Where) {
  for (int iter = 0; iter < 60; ++iter) {
    const Shape out = RandomShape(rng_, 0, 5, 6);
    auto input_shape = [&]() {
      const size_t keep = static_cast<size_t>(Uniform(rng_, 0, static_cast<int64_t>(out.size())));
      Shape s(out.end() - static_cast<std::ptrdiff_t>(keep), out.end());
      for (int64_t& d : s) {
        if (Uniform(rng_, 0, 2) == 0) d = 1;
      }
      return s;
    };
    const DType dtype = RandomMoveType(rng_);
    // One input keeps the full output shape so that the broadcast yields `out`.
    std::vector<Shape> shapes = {input_shape(), input_shape(), input_shape()};
    shapes[Uniform(rng_, 0, 2)] = out;
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(out));
    Check("Where", {},
          {RandomTensor(DType::kBool, shapes[0], rng_), RandomTensor(dtype, shapes[1], rng_),
           RandomTensor(dtype, shapes[2], rng_)});
  }
}

// Values that exercise Cast's rounding, saturation and NaN rules.
HostTensor CastInput(DType dtype, std::mt19937& rng) {
  std::vector<double> v = {0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.0, 128.0, -129.0, 255.0, 256.0, 65504.0,
                           65519.0, 65520.0, 1e-8, -1e-5, 3.0e-5, 1e10, -1e20, 2147483647.0, 2147483648.0,
                           -2147483649.0, 9.3e18, -9.3e18, 1.9e19, 0.1, 1.0 / 3.0};
  std::uniform_real_distribution<double> real(-70000.0, 70000.0);
  for (int i = 0; i < 60; ++i) v.push_back(real(rng));
  for (int i = 0; i < 20; ++i) v.push_back(std::ldexp(real(rng), -static_cast<int>(Uniform(rng, 10, 30))));
  const bool is_float = dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
                        dtype == DType::kBFloat16;
  if (is_float) {
    v.push_back(std::numeric_limits<double>::quiet_NaN());
    v.push_back(-std::numeric_limits<double>::infinity());
    v.push_back(std::numeric_limits<double>::infinity());
  }
  const Shape shape = {static_cast<int64_t>(v.size())};
  switch (dtype) {
    case DType::kFloat32: return HostTensor::Of<float>(shape, std::vector<float>(v.begin(), v.end()));
    case DType::kFloat64: return HostTensor::Of<double>(shape, v);
    case DType::kFloat16: {
      std::vector<Half> h;
      for (double d : v) h.push_back(DoubleToHalf(d));
      return HostTensor::Of<Half>(shape, h);
    }
    case DType::kBFloat16: {
      std::vector<BFloat16> h;
      for (double d : v) h.push_back(FloatToBFloat16(static_cast<float>(d)));
      return HostTensor::Of<BFloat16>(shape, h);
    }
    case DType::kBool: {
      HostTensor t = RandomTensor(DType::kBool, shape, rng);
      return t;
    }
    default: {
      // Integers: random bytes (every bit pattern, extremes included) plus small values.
      HostTensor t = RandomTensor(dtype, shape, rng);
      const size_t es = DTypeSize(dtype);
      for (size_t i = 0; i < 20 && (i + 1) * es <= t.bytes.size(); ++i) {
        const int64_t small = static_cast<int64_t>(i) - 10;
        std::memcpy(t.bytes.data() + i * es, &small, es);
      }
      return t;
    }
  }
}

TEST_F(TransformCudaTest, Cast) {
  const DType types[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,  DType::kInt16,
                         DType::kInt32,   DType::kInt64,   DType::kUint8,   DType::kUint16, DType::kUint32,
                         DType::kUint64,  DType::kBool,    DType::kBFloat16};
  const std::pair<DType, int64_t> onnx[] = {{DType::kFloat32, 1}, {DType::kUint8, 2},   {DType::kInt8, 3},
                                            {DType::kUint16, 4},  {DType::kInt16, 5},   {DType::kInt32, 6},
                                            {DType::kInt64, 7},   {DType::kBool, 9},    {DType::kFloat16, 10},
                                            {DType::kFloat64, 11}, {DType::kUint32, 12}, {DType::kUint64, 13},
                                            {DType::kBFloat16, 16}};
  for (DType from : types) {
    for (const auto& [to, code] : onnx) {
      SCOPED_TRACE(std::string(DTypeName(from)) + " -> " + std::string(DTypeName(to)));
      Check("Cast", Attrs({{"to", code}}), {CastInput(from, rng_)});
    }
  }
  // CastLike takes the second input's dtype.
  for (const auto& [to, code] : onnx) {
    Check("CastLike", {}, {CastInput(DType::kFloat32, rng_), RandomTensor(to, {2}, rng_)});
  }
  // Shapes other than 1-D, and an empty tensor.
  Check("Cast", Attrs({{"to", int64_t{10}}}), {RandomTensor(DType::kFloat32, {3, 1, 5}, rng_)});
  Check("Cast", Attrs({{"to", int64_t{1}}}), {RandomTensor(DType::kFloat16, {0, 4}, rng_)});
}

TEST_F(TransformCudaTest, ReshapingCopies) {
  for (int iter = 0; iter < 20; ++iter) {
    const Shape s = RandomShape(rng_, 1, 4);
    const int64_t rank = static_cast<int64_t>(s.size());
    const DType dtype = RandomMoveType(rng_);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s));
    Check("Identity", {}, {RandomTensor(dtype, s, rng_)});
    Check("Reshape", {}, {RandomTensor(dtype, s, rng_), Ints({0, -1})});
    Check("Flatten", Attrs({{"axis", Uniform(rng_, -rank, rank)}}), {RandomTensor(dtype, s, rng_)});
    Shape with_ones = s;
    with_ones.insert(with_ones.begin(), 1);
    with_ones.push_back(1);
    Check("Squeeze", {}, {RandomTensor(dtype, with_ones, rng_)});                        // Every extent-1 dim.
    Check("Squeeze", {}, {RandomTensor(dtype, with_ones, rng_), Ints({-1})});            // Input form.
    Check("Squeeze", Attrs({{"axes", std::vector<int64_t>{0}}}), {RandomTensor(dtype, with_ones, rng_)});
    Check("Unsqueeze", {}, {RandomTensor(dtype, s, rng_), Ints({0, -1})});
    Check("Unsqueeze", Attrs({{"axes", std::vector<int64_t>{1}}}), {RandomTensor(dtype, s, rng_)});
  }
}

TEST_F(TransformCudaTest, ExpandAndTile) {
  for (int iter = 0; iter < 40; ++iter) {
    const Shape out = RandomShape(rng_, 0, 5, 5);
    const size_t keep = static_cast<size_t>(Uniform(rng_, 0, static_cast<int64_t>(out.size())));
    Shape s(out.end() - static_cast<std::ptrdiff_t>(keep), out.end());
    for (int64_t& d : s) {
      if (Uniform(rng_, 0, 2) == 0) d = 1;
    }
    // `shape` may itself hold 1s where the input is larger (bidirectional).
    std::vector<int64_t> target(out.begin(), out.end());
    for (size_t i = 0; i < keep; ++i) {
      if (Uniform(rng_, 0, 3) == 0) target[out.size() - keep + i] = 1;
    }
    const DType dtype = RandomMoveType(rng_);
    SCOPED_TRACE(std::string(DTypeName(dtype)) + ShapeToString(s) + " -> " + ShapeToString(out));
    Check("Expand", {}, {RandomTensor(dtype, s, rng_), Ints(target)});

    const Shape t = RandomShape(rng_, 1, 4, 5);
    std::vector<int64_t> repeats(t.size());
    for (int64_t& r : repeats) r = Uniform(rng_, 1, 3);
    Check("Tile", {}, {RandomTensor(dtype, t, rng_), Ints(repeats)});
  }
  Check("Tile", {}, {RandomTensor(DType::kFloat32, {2, 3}, rng_), Ints({0, 2})});  // Empty output.
}

TEST_F(TransformCudaTest, DepthToSpaceAndSpaceToDepth) {
  for (int iter = 0; iter < 48; ++iter) {
    const int64_t b = Uniform(rng_, 1, 3);
    const bool nhwc = iter % 2;
    const bool crd = (iter / 2) % 2;
    const DType dtype = RandomMoveType(rng_);
    const int64_t n = Uniform(rng_, 1, 2), c = Uniform(rng_, 1, 5), h = Uniform(rng_, 1, 5), w = Uniform(rng_, 1, 6);
    const std::string layout = nhwc ? "NHWC" : "NCHW";
    SCOPED_TRACE(layout + (crd ? " CRD " : " DCR ") + std::string(DTypeName(dtype)) + " b=" + std::to_string(b));
    const Shape depth = nhwc ? Shape{n, h, w, c * b * b} : Shape{n, c * b * b, h, w};
    Attributes d2s = Attrs({{"blocksize", b}, {"layout", layout}});
    if (crd || iter % 8 < 4) d2s.Set("mode", std::string(crd ? "CRD" : "DCR"));  // Else the default DCR.
    Check("DepthToSpace", d2s, {RandomTensor(dtype, depth, rng_)});
    const Shape space = nhwc ? Shape{n, h * b, w * b, c} : Shape{n, c, h * b, w * b};
    Attributes s2d = Attrs({{"blocksize", b}});
    if (nhwc || iter % 4 == 0) s2d.Set("layout", layout);
    Check("SpaceToDepth", s2d, {RandomTensor(dtype, space, rng_)});
  }
}

}  // namespace
}  // namespace remex::kernels
