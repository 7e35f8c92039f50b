// Transpose, Squeeze, Unsqueeze, Flatten, Expand, Tile, Gather, Split, Pad, Range,
// ConstantOfShape, Size, DepthToSpace, SpaceToDepth.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/kernels.h"
#include "kernels/ops/tensor/transpose_tiles.h"
#include "kernels/test_util.h"

namespace remex::kernels {
namespace transform_test {

using testing::Attrs;
using testing::HostTensor;
using testing::Iota;
using testing::OpRunner;

HostTensor I64(std::vector<int64_t> v) {
  return HostTensor::Of<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// Multi-index of flat index `i` in `shape`.
std::vector<int64_t> Unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t Ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

StatusCode CodeOf(const StatusOr<std::vector<HostTensor>>& r) { return r.status().code(); }

// ---------------------------------------------------------------------------

TEST(TransformOpsTest, RegisteredWithKernelsAndDataDependence) {
  OpRunner r;
  const auto& reg = r.registry();
  struct Want {
    const char* op;
    std::vector<ShapeDep> deps;
  };
  const ShapeDep S = ShapeDep::kShape, D = ShapeDep::kData;
  for (const Want& w : std::vector<Want>{{"Transpose", {S}},
                                         {"Squeeze", {S, D}},
                                         {"Unsqueeze", {S, D}},
                                         {"Flatten", {S}},
                                         {"Expand", {S, D}},
                                         {"Tile", {S, D}},
                                         {"Gather", {S, S}},
                                         {"Split", {S, D}},
                                         {"Pad", {S, D, S}},
                                         {"Range", {D, D, D}},
                                         {"ConstantOfShape", {D}},
                                         {"Size", {S}},
                                         {"DepthToSpace", {S}},
                                         {"SpaceToDepth", {S}}}) {
    const OpDef* def = reg.FindOp(w.op);
    ASSERT_NE(def, nullptr) << w.op;
    EXPECT_NE(reg.FindKernel(w.op, DeviceKind::kCpu), nullptr) << w.op;
    for (size_t i = 0; i < w.deps.size(); ++i) EXPECT_EQ(def->DepOf(i), w.deps[i]) << w.op << i;
    EXPECT_EQ(def->reads_shapes_only, std::string(w.op) == "Size") << w.op;
  }
}

// ---------------------------------------------------------------------------
// Transpose.

template <typename T>
std::vector<T> NaiveTranspose(const std::vector<T>& x, const Shape& s,
                              const std::vector<int64_t>& perm) {
  Shape os(s.size());
  for (size_t i = 0; i < s.size(); ++i) os[i] = s[perm[i]];
  std::vector<T> y(x.size());
  for (int64_t o = 0; o < static_cast<int64_t>(y.size()); ++o) {
    std::vector<int64_t> oi = Unravel(o, os), ii(s.size());
    for (size_t i = 0; i < s.size(); ++i) ii[perm[i]] = oi[i];
    y[o] = x[Ravel(ii, s)];
  }
  return y;
}

TEST(TransposeTest, Every4DPermutationMatchesTheReference) {
  OpRunner r;
  // {1, 17, 33, 3} and {2, 3, 19, 23}: one RGB image and a batch of two, to and from
  // channels-last (TransposeMatrices' three-channel shuffles, with edges off their blocks).
  for (const Shape& s : {Shape{2, 3, 4, 5}, Shape{1, 17, 33, 3}, Shape{2, 40, 1, 70}, Shape{2, 3, 19, 23}}) {
    const int64_t n = *NumElements(s);
    std::vector<int32_t> x(n);
    std::iota(x.begin(), x.end(), 0);
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      auto out = r.Run("Transpose", Attrs({{"perm", perm}}), {HostTensor::Of<int32_t>(s, x)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ((*out)[0].Values<int32_t>(), NaiveTranspose(x, s, perm))
          << ShapeToString(s) << " perm " << perm[0] << perm[1] << perm[2] << perm[3];
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

// TransposeMatrices, the convolutions' NCHW <-> channels-last moves (conv_common.h):
// bytes in 16 x 16 register blocks and 4-byte elements in 4 x 4 ones (three channels:
// shuffles of four pixels), with edges that
// are not multiples of either block or of the tile, over batches, and split among the
// compute threads along either side (the last two sizes: over 64 KiB a part).
template <typename E>
void ExpectMatricesTransposed(int64_t batches, int64_t rows, int64_t cols) {
  SCOPED_TRACE(std::to_string(sizeof(E)) + "-byte elements, " + std::to_string(batches) + " x " +
               std::to_string(rows) + " x " + std::to_string(cols));
  std::vector<E> x(static_cast<size_t>(batches * rows * cols)), y(x.size(), E{0});
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<E>(i * 2654435761u >> 7);
  internal::TransposeMatrices(x.data(), y.data(), batches, rows, cols);
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        ASSERT_EQ(y[(b * cols + j) * rows + i], x[(b * rows + i) * cols + j]) << b << " " << i << " " << j;
      }
    }
  }
}

TEST(TransposeTest, MatricesOfBytesAndWordsInRegisterBlocks) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{16, 16},
                                                                    {3, 50},
                                                                    {50, 3},
                                                                    {3, 7},
                                                                    {7, 3},
                                                                    {37, 49},
                                                                    {64, 196},
                                                                    {130, 100},
                                                                    {256, 49},
                                                                    {49, 256},
                                                                    {256, 3136},
                                                                    {3136, 96},
                                                                    {3, 50177},
                                                                    {50177, 3}}) {
    ExpectMatricesTransposed<uint8_t>(2, rows, cols);
    ExpectMatricesTransposed<uint32_t>(2, rows, cols);
  }
}

TEST(TransposeTest, DtypesDefaultPermAndLargeTiles) {
  OpRunner r;
  // Default perm reverses the dims.
  auto out = r.Run("Transpose", {}, {HostTensor::Of<float>({2, 3}, {0, 1, 2, 3, 4, 5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // Every element size, with extents that are not multiples of the tile.
  const Shape s = {3, 70, 45};
  const std::vector<int64_t> perm = {2, 0, 1};
  const int64_t n = *NumElements(s);
  {
    std::vector<uint8_t> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<uint8_t>(i * 7);
    out = r.Run("Transpose", Attrs({{"perm", perm}}), {HostTensor::Of<uint8_t>(s, x)});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].Values<uint8_t>(), NaiveTranspose(x, s, perm));
  }
  {
    std::vector<Half> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = FloatToHalf(static_cast<float>(i % 1000));
    out = r.Run("Transpose", Attrs({{"perm", perm}}), {HostTensor::Of<Half>(s, x)});
    ASSERT_TRUE(out.ok());
    auto got = (*out)[0].Values<Half>();
    auto want = NaiveTranspose(x, s, perm);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i].bits, want[i].bits) << i;
  }
  {
    std::vector<double> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = i * 0.5;
    out = r.Run("Transpose", Attrs({{"perm", perm}}), {HostTensor::Of<double>(s, x)});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].Values<double>(), NaiveTranspose(x, s, perm));
  }
  {
    std::vector<bool> xb(n);
    for (int64_t i = 0; i < n; ++i) xb[i] = i % 3 == 0;
    std::vector<bool> want(n);
    auto wi = NaiveTranspose(std::vector<int>(xb.begin(), xb.end()), s, perm);
    out = r.Run("Transpose", Attrs({{"perm", perm}}), {HostTensor::Of<bool>(s, xb)});
    ASSERT_TRUE(out.ok());
    auto got = (*out)[0].Values<uint8_t>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], wi[i]) << i;
  }
  // Scalars and empty tensors.
  out = r.Run("Transpose", {}, {HostTensor::Of<int64_t>({}, {42})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{42}));
  out = r.Run("Transpose", Attrs({{"perm", std::vector<int64_t>{1, 0, 2}}}),
              {HostTensor::Zeros(DType::kFloat32, {2, 0, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0, 2, 3}));
}

// Large 4-byte transposes of batches of matrices (TransposeMatrices shared out over the
// compute threads), to and from channels-last and a plain 2-D one, float32 whose bits
// include signalling and quiet NaNs with payloads: every bit as given.
TEST(TransposeTest, LargeFourByteTransposesCopyEveryBit) {
  OpRunner r;
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  for (const Case& c : {Case{{2, 37, 23, 31}, {0, 2, 3, 1}}, Case{{2, 23, 31, 37}, {0, 3, 1, 2}},
                        Case{{130, 140}, {1, 0}}, Case{{1, 3, 151, 113}, {0, 2, 3, 1}}}) {
    SCOPED_TRACE(ShapeToString(c.shape));
    const int64_t n = *NumElements(c.shape);
    std::vector<uint32_t> bits(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint32_t>(i * 2654435761u);
    bits[5] = 0x7f800001u;   // a signalling NaN
    bits[77] = 0xffc01234u;  // a quiet NaN with a payload
    std::vector<float> x(bits.size());
    std::memcpy(x.data(), bits.data(), bits.size() * 4);
    auto out = r.Run("Transpose", Attrs({{"perm", c.perm}}), {HostTensor::Of<float>(c.shape, x)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const std::vector<float> got = (*out)[0].Values<float>();
    std::vector<uint32_t> got_bits(got.size());
    std::memcpy(got_bits.data(), got.data(), got.size() * 4);
    EXPECT_EQ(got_bits, NaiveTranspose(bits, c.shape, c.perm));
  }
}

TEST(TransposeTest, BadPermIsRefused) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {2, 3, 4});
  for (std::vector<int64_t> perm : {std::vector<int64_t>{0, 1}, std::vector<int64_t>{0, 1, 1},
                                    std::vector<int64_t>{0, 1, 3}, std::vector<int64_t>{-1, 0, 1}}) {
    auto s = r.Infer("Transpose", Attrs({{"perm", perm}}), {x});
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("Transpose"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------
// Squeeze, Unsqueeze, Flatten.

TEST(SqueezeTest, AttributeInputAndDefault) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({1, 3, 1, 2}, Iota(6));
  auto out = r.Run("Squeeze", Attrs({{"axes", std::vector<int64_t>{0, -2}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ((*out)[0].Values<float>(), Iota(6));
  out = r.Run("Squeeze", {}, {x, I64({2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 2}));
  out = r.Run("Squeeze", {}, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  out = r.Run("Squeeze", {}, {x, HostTensor::Absent()});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 2}));
  EXPECT_EQ(CodeOf(r.Run("Squeeze", {}, {x, I64({1})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Squeeze", {}, {x, I64({4})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Squeeze", {}, {x, I64({0, -4})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Squeeze", {}, {x, HostTensor::Of<float>({1}, {0})})),
            StatusCode::kInvalidArgument);
}

TEST(UnsqueezeTest, AxesIndexTheOutput) {
  OpRunner r;
  HostTensor x = HostTensor::Of<int8_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = r.Run("Unsqueeze", Attrs({{"axes", std::vector<int64_t>{0, 3}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 2, 1}));
  EXPECT_EQ((*out)[0].Values<int8_t>(), (std::vector<int8_t>{1, 2, 3, 4, 5, 6}));
  out = r.Run("Unsqueeze", {}, {x, HostTensor::Of<int32_t>({3}, {-1, 2, 0})});  // Unsorted.
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1, 3, 1, 2, 1}));
  out = r.Run("Unsqueeze", {}, {HostTensor::Of<float>({}, {7}), I64({0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{1}));
  EXPECT_EQ(CodeOf(r.Run("Unsqueeze", {}, {x, I64({1, 1})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Unsqueeze", {}, {x, I64({4})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Unsqueeze", {}, {x})), StatusCode::kInvalidArgument);
}

TEST(FlattenTest, AxisRangeAndVersions) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({2, 3, 4}, Iota(24));
  struct Case {
    int64_t axis;
    Shape want;
  };
  for (const Case& c : {Case{0, {1, 24}}, Case{1, {2, 12}}, Case{2, {6, 4}}, Case{3, {24, 1}},
                        Case{-1, {6, 4}}, Case{-3, {1, 24}}}) {
    auto out = r.Run("Flatten", Attrs({{"axis", c.axis}}), {x});
    ASSERT_TRUE(out.ok()) << c.axis;
    EXPECT_EQ((*out)[0].shape, c.want) << c.axis;
    EXPECT_EQ((*out)[0].Values<float>(), Iota(24));
  }
  auto out = r.Run("Flatten", {}, {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 12}));
  EXPECT_EQ(CodeOf(r.Run("Flatten", Attrs({{"axis", int64_t{4}}}), {x})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Flatten", Attrs({{"axis", int64_t{-4}}}), {x})),
            StatusCode::kInvalidArgument);
  // Negative axes arrive with Flatten-11.
  EXPECT_EQ(CodeOf(r.Run("Flatten-10", Attrs({{"axis", int64_t{-1}}}), {x})), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.Run("Flatten-10", Attrs({{"axis", int64_t{1}}}), {x}).ok());
  EXPECT_TRUE(r.Run("Flatten-11", Attrs({{"axis", int64_t{-1}}}), {x}).ok());
}

// ---------------------------------------------------------------------------
// Expand and Tile.

TEST(ExpandTest, BidirectionalBroadcast) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({3, 1}, {1, 2, 3});
  auto out = r.Run("Expand", {}, {x, I64({2, 1, 4})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3, 4}));
  std::vector<float> want;
  for (int rep = 0; rep < 2; ++rep) {
    for (float v : {1.f, 2.f, 3.f}) want.insert(want.end(), 4, v);
  }
  EXPECT_EQ((*out)[0].Values<float>(), want);
  // A smaller target keeps the input's extents.
  out = r.Run("Expand", {}, {x, I64({1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 1}));
  // Middle-dim broadcast against a naive reference.
  HostTensor y = HostTensor::Of<int16_t>({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  out = r.Run("Expand", {}, {y, I64({2, 2, 5, 3})});
  ASSERT_TRUE(out.ok());
  const Shape os = {2, 2, 5, 3};
  auto got = (*out)[0].Values<int16_t>();
  for (int64_t o = 0; o < 60; ++o) {
    auto i = Unravel(o, os);
    EXPECT_EQ(got[o], 1 + i[1] * 3 + i[3]) << o;
  }
  EXPECT_EQ(CodeOf(r.Run("Expand", {}, {x, I64({3, 4, 2})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Expand", {}, {x, I64({-1, 1})})), StatusCode::kInvalidArgument);
  out = r.Run("Expand", {}, {x, I64({0, 3, 2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0, 3, 2}));
}

TEST(TileTest, MatchesNaiveReference) {
  OpRunner r;
  auto out = r.Run("Tile", {}, {HostTensor::Of<float>({2, 2}, {1, 2, 3, 4}), I64({1, 2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{2, 4}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  const Shape s = {2, 1, 3};
  const std::vector<int64_t> rep = {2, 3, 2};
  std::vector<uint64_t> x(6);
  std::iota(x.begin(), x.end(), 10);
  out = r.Run("Tile", {}, {HostTensor::Of<uint64_t>(s, x), I64(rep)});
  ASSERT_TRUE(out.ok());
  const Shape os = {4, 3, 6};
  ASSERT_EQ((*out)[0].shape, os);
  auto got = (*out)[0].Values<uint64_t>();
  for (int64_t o = 0; o < 72; ++o) {
    auto i = Unravel(o, os);
    for (size_t d = 0; d < 3; ++d) i[d] %= s[d];
    EXPECT_EQ(got[o], x[Ravel(i, s)]) << o;
  }
  out = r.Run("Tile", {}, {HostTensor::Of<float>({2}, {1, 2}), I64({0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0}));
  EXPECT_EQ(CodeOf(r.Run("Tile", {}, {HostTensor::Of<float>({2}, {1, 2}), I64({1, 1})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Tile", {}, {HostTensor::Of<float>({2}, {1, 2}), I64({-1})})),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Gather.

TEST(GatherTest, AxesNegativeIndicesAndIndexTypes) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({3, 4}, Iota(12));
  auto out = r.Run("Gather", {}, {x, HostTensor::Of<int64_t>({2, 2}, {0, 1, 2, -1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 2, 4}));
  EXPECT_EQ((*out)[0].Values<float>(),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11}));
  out = r.Run("Gather", Attrs({{"axis", int64_t{-1}}}),
              {x, HostTensor::Of<int32_t>({3}, {3, -4, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3, 3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 0, 1, 7, 4, 5, 11, 8, 9}));
  out = r.Run("Gather", Attrs({{"axis", int64_t{1}}}), {x, HostTensor::Of<int64_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{3}));
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 6, 10}));
  // Out-of-range indices are an error, not a read past the data.
  auto bad = r.Run("Gather", {}, {x, HostTensor::Of<int64_t>({1}, {3})});
  EXPECT_EQ(CodeOf(bad), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos);
  EXPECT_EQ(CodeOf(r.Run("Gather", {}, {x, HostTensor::Of<int32_t>({1}, {-4})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Gather", {}, {x, HostTensor::Of<float>({1}, {0})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Gather", Attrs({{"axis", int64_t{2}}}), {x, I64({0})})),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Split.

TEST(SplitTest, AttributeInputAndEqualParts) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({2, 6}, Iota(12));
  auto out = r.Run("Split", Attrs({{"axis", int64_t{1}}, {"split", std::vector<int64_t>{1, 5}}}),
                   {x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{0, 6}));
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));
  out = r.Run("Split", Attrs({{"axis", int64_t{-1}}}), {x, I64({2, 0, 4})});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[1].shape, (Shape{2, 0}));
  EXPECT_EQ((*out)[2].Values<float>(), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  out = r.Run("Split", Attrs({{"axis", int64_t{1}}, {"num_outputs", int64_t{3}}}), {x});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[2].Values<float>(), (std::vector<float>{4, 5, 10, 11}));
  out = r.Run("Split", Attrs({{"num_outputs", int64_t{2}}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].Values<float>(), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(CodeOf(r.Run("Split", Attrs({{"axis", int64_t{1}}}), {x, I64({2, 3})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Split", Attrs({{"axis", int64_t{1}}, {"num_outputs", int64_t{4}}}), {x})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Split", {}, {x})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Split", {}, {x, I64({3, -1})})), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Pad.

// Reference: per dim, output index o reads input o - begin, mirrored or clamped.
std::vector<float> NaivePad(const std::vector<float>& x, const Shape& s,
                            const std::vector<int64_t>& pads, const std::string& mode, float c) {
  const size_t rank = s.size();
  Shape os(rank);
  for (size_t d = 0; d < rank; ++d) os[d] = s[d] + pads[d] + pads[d + rank];
  std::vector<float> y(static_cast<size_t>(*NumElements(os)));
  for (int64_t o = 0; o < static_cast<int64_t>(y.size()); ++o) {
    auto idx = Unravel(o, os);
    bool constant = false;
    for (size_t d = 0; d < rank; ++d) {
      int64_t i = idx[d] - pads[d];
      const int64_t n = s[d];
      if (mode == "edge") {
        i = std::clamp<int64_t>(i, 0, n - 1);
      } else if (mode == "reflect") {
        if (i < 0) i = -i;
        if (i >= n) i = 2 * (n - 1) - i;
      } else if (i < 0 || i >= n) {
        constant = true;
      }
      idx[d] = i;
    }
    y[o] = constant ? c : x[Ravel(idx, s)];
  }
  return y;
}

TEST(PadTest, HandCheckedModes) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({3}, {1, 2, 3});
  auto out = r.Run("Pad", Attrs({{"mode", std::string("reflect")}}), {x, I64({2, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  out = r.Run("Pad", Attrs({{"mode", std::string("edge")}}), {x, I64({2, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  out = r.Run("Pad", {}, {x, I64({1, 0}), HostTensor::Of<float>({}, {9})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{9, 1, 2, 3}));
  // Attribute form (before opset 11) with a float value.
  out = r.Run("Pad", Attrs({{"pads", std::vector<int64_t>{0, 2}}, {"value", 1.5f}}), {x});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 2, 3, 1.5f, 1.5f}));
  // Negative pads crop.
  out = r.Run("Pad", {}, {x, I64({-1, 1})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2, 3, 0}));
  // Integer data with the attribute value converted to the dtype.
  out = r.Run("Pad", Attrs({{"pads", std::vector<int64_t>{1, 1}}, {"value", -2.f}}),
              {HostTensor::Of<int32_t>({2}, {5, 6})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-2, 5, 6, -2}));
}

TEST(PadTest, MultiDimMatchesReference) {
  OpRunner r;
  const Shape s = {2, 3, 4};
  const std::vector<float> x = Iota(24);
  struct Case {
    std::string mode;
    std::vector<int64_t> pads;
  };
  for (const Case& c : {Case{"constant", {1, 0, 2, 0, 2, 1}}, Case{"constant", {0, -1, 1, 1, 0, -2}},
                        Case{"reflect", {1, 2, 3, 1, 1, 2}}, Case{"edge", {2, 3, 1, 0, 4, 5}},
                        Case{"edge", {0, -1, 2, -1, 1, -3}}, Case{"reflect", {0, 0, -1, 1, 2, 3}}}) {
    auto out = r.Run("Pad", Attrs({{"mode", c.mode}}),
                     {HostTensor::Of<float>(s, x), I64(c.pads), HostTensor::Of<float>({1}, {-7})});
    ASSERT_TRUE(out.ok()) << c.mode << " " << out.status().ToString();
    EXPECT_EQ((*out)[0].Values<float>(), NaivePad(x, s, c.pads, c.mode, -7)) << c.mode;
  }
}

TEST(PadTest, BadInputsAreRefused) {
  OpRunner r;
  HostTensor x = HostTensor::Of<float>({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(CodeOf(r.Run("Pad", {}, {x, I64({1, 1})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Pad", {}, {x, I64({-2, 0, -1, 0})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Pad", Attrs({{"mode", std::string("wrap")}}), {x, I64({0, 0, 0, 0})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Pad", {}, {x, I64({0, 0, 0, 0}), HostTensor::Of<double>({}, {1})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Pad", {}, {x})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Pad", Attrs({{"mode", std::string("edge")}}),
                         {HostTensor::Zeros(DType::kFloat32, {0, 2}), I64({1, 0, 0, 0})})),
            StatusCode::kInvalidArgument);
  auto factory = r.registry().FindKernel("Pad", DeviceKind::kCpu);
  EXPECT_EQ((*factory)(Attrs({{"mode", std::string("wrap")}})).status().code(),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Range, ConstantOfShape, Size.

TEST(RangeTest, NumericTypes) {
  OpRunner r;
  auto f = [](float v) { return HostTensor::Of<float>({}, {v}); };
  auto out = r.Run("Range", {}, {f(1), f(2.5f), f(0.5f)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{1, 1.5f, 2}));
  auto i = [](int32_t v) { return HostTensor::Of<int32_t>({}, {v}); };
  out = r.Run("Range", {}, {i(10), i(6), i(-3)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{10, 7}));
  out = r.Run("Range", {}, {i(10), i(6), i(3)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{0}));
  auto l = [](int64_t v) { return HostTensor::Of<int64_t>({}, {v}); };
  out = r.Run("Range", {}, {l(INT64_MIN), l(INT64_MAX), l(INT64_MAX)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
  auto d = [](double v) { return HostTensor::Of<double>({}, {v}); };
  out = r.Run("Range", {}, {d(0), d(1), d(0.25)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  out = r.Run("Range", {}, {HostTensor::Of<int16_t>({}, {-5}), HostTensor::Of<int16_t>({}, {0}),
                            HostTensor::Of<int16_t>({}, {2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<int16_t>(), (std::vector<int16_t>{-5, -3, -1}));
  EXPECT_EQ(CodeOf(r.Run("Range", {}, {i(0), i(5), i(0)})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Range", {}, {i(0), l(5), i(1)})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Range", {}, {f(0), f(NAN), f(1)})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("Range", {}, {HostTensor::Of<float>({2}, {0, 1}), f(5), f(1)})),
            StatusCode::kInvalidArgument);
}

TEST(ConstantOfShapeTest, ValueEncodings) {
  OpRunner r;
  auto out = r.Run("ConstantOfShape", {}, {I64({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].dtype, DType::kFloat32);
  EXPECT_EQ((*out)[0].Values<float>(), std::vector<float>(6, 0.f));
  // The frontend's form of a one-element tensor: {onnx dtype, element bits}.
  int32_t seven = -7;
  int64_t bits = 0;
  std::memcpy(&bits, &seven, sizeof(seven));
  out = r.Run("ConstantOfShape", Attrs({{"value", std::vector<int64_t>{6, bits}}}), {I64({3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kInt32);
  EXPECT_EQ((*out)[0].Values<int32_t>(), (std::vector<int32_t>{-7, -7, -7}));
  double half = 0.5;
  std::memcpy(&bits, &half, sizeof(half));
  out = r.Run("ConstantOfShape", Attrs({{"value", std::vector<int64_t>{11, bits}}}), {I64({})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  EXPECT_EQ((*out)[0].Values<double>(), (std::vector<double>{0.5}));
  out = r.Run("ConstantOfShape", Attrs({{"value", 2.5f}}), {I64({2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<float>(), (std::vector<float>{2.5f, 2.5f}));
  out = r.Run("ConstantOfShape", Attrs({{"value", int64_t{-3}}}), {I64({1, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_EQ((*out)[0].shape, (Shape{1, 0}));
  out = r.Run("ConstantOfShape", Attrs({{"value", std::vector<int64_t>{9, 1}}}), {I64({2})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].Values<uint8_t>(), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(CodeOf(r.Run("ConstantOfShape", {}, {I64({2, -1})})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("ConstantOfShape", Attrs({{"value", std::vector<int64_t>{9, 256}}}),
                         {I64({2})})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("ConstantOfShape", Attrs({{"value", std::vector<int64_t>{8, 0}}}),
                         {I64({2})})),
            StatusCode::kInvalidArgument);
}

TEST(SizeTest, ReadsOnlyTheShape) {
  OpRunner r;
  auto out = r.Run("Size", {}, {HostTensor::Zeros(DType::kFloat16, {3, 4, 5})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{60}));
  // The kernel runs without the input's data.
  auto factory = r.registry().FindKernel("Size", DeviceKind::kCpu);
  auto kernel = (*factory)({});
  ASSERT_TRUE(kernel.ok());
  TensorRef in{nullptr, DType::kFloat32, {2, 7}};
  int64_t result = 0;
  TensorRef o{&result, DType::kInt64, {}};
  ASSERT_TRUE((*kernel)->Compute({&in, 1}, {&o, 1}).ok());
  EXPECT_EQ(result, 14);
}

// ---------------------------------------------------------------------------
// DepthToSpace and SpaceToDepth.

// DCR: [N, b, b, C', H, W] -> transpose [0, 3, 4, 1, 5, 2]; CRD: [N, C', b, b, H, W] ->
// [0, 1, 4, 2, 5, 3] (ONNX's definition via reshapes).
std::vector<float> NaiveDepthToSpace(const std::vector<float>& x, const Shape& s, int64_t b,
                                     bool crd) {
  const int64_t c = s[1] / (b * b);
  Shape six = crd ? Shape{s[0], c, b, b, s[2], s[3]} : Shape{s[0], b, b, c, s[2], s[3]};
  std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3}
                                  : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  return NaiveTranspose(x, six, perm);
}

TEST(DepthToSpaceTest, ModesMatchTheReshapeDefinition) {
  OpRunner r;
  for (int64_t b : {2, 3}) {
    const Shape s = {2, 2 * b * b, 3, 4};
    const std::vector<float> x = Iota(*NumElements(s));
    for (bool crd : {false, true}) {
      Attributes a = Attrs({{"blocksize", b}});
      if (crd) a.Set("mode", std::string("CRD"));
      auto out = r.Run("DepthToSpace", a, {HostTensor::Of<float>(s, x)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ((*out)[0].shape, (Shape{2, 2, 3 * b, 4 * b}));
      EXPECT_EQ((*out)[0].Values<float>(), NaiveDepthToSpace(x, s, b, crd)) << b << crd;
    }
  }
  // ONNX's example (DCR, blocksize 2, 1x8x2x3): first output row.
  auto out = r.Run("DepthToSpace", Attrs({{"blocksize", int64_t{2}}}),
                   {HostTensor::Of<float>({1, 8, 2, 3}, Iota(48))});
  ASSERT_TRUE(out.ok());
  auto y = (*out)[0].Values<float>();
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 6), (std::vector<float>{0, 12, 1, 13, 2, 14}));
}

TEST(SpaceToDepthTest, InvertsDepthToSpace) {
  OpRunner r;
  const Shape s = {2, 3, 4, 6};
  const std::vector<float> x = Iota(*NumElements(s));
  auto out = r.Run("SpaceToDepth", Attrs({{"blocksize", int64_t{2}}}), {HostTensor::Of<float>(s, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{2, 12, 2, 3}));
  // output[n, (i*b + j) * C + c, h, w] = input[n, c, h*b + i, w*b + j].
  auto y = (*out)[0].Values<float>();
  const Shape os = {2, 12, 2, 3};
  for (int64_t o = 0; o < 144; ++o) {
    auto i = Unravel(o, os);
    const int64_t blk = i[1] / 3, c = i[1] % 3;
    EXPECT_EQ(y[o], x[Ravel({i[0], c, i[2] * 2 + blk / 2, i[3] * 2 + blk % 2}, s)]) << o;
  }
  auto back = r.Run("DepthToSpace", Attrs({{"blocksize", int64_t{2}}}), {(*out)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].Values<float>(), x);
  // Half data moves bit-exactly.
  std::vector<Half> h(16);
  for (int i = 0; i < 16; ++i) h[i] = FloatToHalf(static_cast<float>(i));
  out = r.Run("SpaceToDepth", Attrs({{"blocksize", int64_t{2}}}), {HostTensor::Of<Half>({1, 1, 4, 4}, h)});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(HalfToFloat((*out)[0].Values<Half>()[4]), 1.f);  // Channel 1 = (i 0, j 1).
}

TEST(SpaceToDepthTest, BlocksizeThreeOnManyRowsInvertsDepthToSpace) {
  // Blocksize 3 (not the two-row fast path), in both directions, on enough rows
  // (32 channels x 384) that the compute threads split them.
  OpRunner r;
  const Shape s = {1, 32, 384, 6};
  const std::vector<float> x = Iota(*NumElements(s));
  auto out = r.Run("SpaceToDepth", Attrs({{"blocksize", int64_t{3}}}), {HostTensor::Of<float>(s, x)});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Shape os = {1, 288, 128, 2};
  ASSERT_EQ((*out)[0].shape, os);
  auto y = (*out)[0].Values<float>();
  for (int64_t o = 0; o < *NumElements(os); o += 7) {
    auto i = Unravel(o, os);
    const int64_t blk = i[1] / 32, c = i[1] % 32;
    ASSERT_EQ(y[o], x[Ravel({i[0], c, i[2] * 3 + blk / 3, i[3] * 3 + blk % 3}, s)]) << o;
  }
  auto back = r.Run("DepthToSpace", Attrs({{"blocksize", int64_t{3}}}), {(*out)[0]});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].Values<float>(), x);
}

TEST(DepthToSpaceTest, BadAttributesAndShapes) {
  OpRunner r;
  HostTensor x = HostTensor::Zeros(DType::kFloat32, {1, 8, 2, 3});
  EXPECT_EQ(CodeOf(r.Run("DepthToSpace", {}, {x})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("DepthToSpace", Attrs({{"blocksize", int64_t{0}}}), {x})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("DepthToSpace", Attrs({{"blocksize", int64_t{3}}}), {x})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("DepthToSpace",
                         Attrs({{"blocksize", int64_t{2}}, {"mode", std::string("XYZ")}}), {x})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.Run("SpaceToDepth", Attrs({{"blocksize", int64_t{2}}}), {x})),
            StatusCode::kInvalidArgument);  // W = 3.
  EXPECT_EQ(CodeOf(r.Run("SpaceToDepth", Attrs({{"blocksize", int64_t{2}}}),
                         {HostTensor::Zeros(DType::kFloat32, {4, 4})})),
            StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Channels-last (`layout` NHWC) DepthToSpace and SpaceToDepth against the NCHW kernels
// between transposes, on random shapes.

namespace nhwc {

Shape ToNhwc(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

TEST(BlockNhwcTest, MatchesNchwBetweenTransposes) {
  OpRunner r;
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t b = pick(1, 3), n = pick(1, 2), c = pick(1, 5), h = pick(1, 6), w = pick(1, 7);
    for (const char* op : {"DepthToSpace", "SpaceToDepth"}) {
      const bool d2s = std::string(op) == "DepthToSpace";
      const Shape nchw = d2s ? Shape{n, c * b * b, h, w} : Shape{n, c, h * b, w * b};
      const std::vector<float> x = Iota(*NumElements(nchw));
      const std::vector<float> x_nhwc = NaiveTranspose(x, nchw, {0, 2, 3, 1});
      for (const char* mode : {"DCR", "CRD"}) {
        if (!d2s && std::string(mode) == "CRD") continue;
        Attributes a = Attrs({{"blocksize", b}});
        if (d2s) a.Set("mode", std::string(mode));
        auto want = r.Run(op, a, {HostTensor::Of<float>(nchw, x)});
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        a.Set("layout", std::string("NHWC"));
        auto got = r.Run(op, a, {HostTensor::Of<float>(ToNhwc(nchw), x_nhwc)});
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        const Shape out_nchw = (*want)[0].shape;
        ASSERT_EQ((*got)[0].shape, ToNhwc(out_nchw)) << op << " " << mode;
        EXPECT_EQ((*got)[0].Values<float>(), NaiveTranspose((*want)[0].Values<float>(), out_nchw, {0, 2, 3, 1}))
            << op << " " << mode << " b " << b << " " << ShapeToString(nchw);
      }
    }
  }
}

TEST(BlockNhwcTest, OtherElementSizesAndBadLayouts) {
  OpRunner r;
  // int64 data through the channels-last CRD path: [1, 1, 1, 4] -> [1, 2, 2, 1].
  Attributes a = Attrs({{"blocksize", int64_t{2}}});
  a.Set("mode", std::string("CRD"));
  a.Set("layout", std::string("NHWC"));
  auto out = r.Run("DepthToSpace", a, {HostTensor::Of<int64_t>({1, 1, 1, 4}, {10, 11, 12, 13})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{1, 2, 2, 1}));
  EXPECT_EQ((*out)[0].Values<int64_t>(), (std::vector<int64_t>{10, 11, 12, 13}));
  // NHWC channels not divisible by b^2 name the channels.
  auto bad = r.Infer("DepthToSpace", a, {HostTensor::Zeros(DType::kFloat32, {1, 2, 2, 6})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("channels 6"), std::string::npos) << bad.status().ToString();
  Attributes wrong = Attrs({{"blocksize", int64_t{2}}});
  wrong.Set("layout", std::string("NCWH"));
  auto refused = r.Infer("SpaceToDepth", wrong, {HostTensor::Zeros(DType::kFloat32, {1, 1, 2, 2})});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("layout"), std::string::npos);
}

}  // namespace nhwc

}  // namespace transform_test
}  // namespace remex::kernels
