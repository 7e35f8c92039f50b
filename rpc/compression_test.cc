#include "rpc/compression.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "rpc/test_data.h"

namespace remex::rpc {
namespace compression_test {

using testing::Compressible;
using testing::Random;
using testing::SmoothFloats;

TEST(CompressionTest, RoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 20}) {
    std::vector<std::byte> src = Compressible(n);
    StatusOr<std::vector<std::byte>> z = ZstdCompress(src, kDefaultCompressionLevel);
    ASSERT_TRUE(z.ok()) << z.status().ToString();
    std::vector<std::byte> out(n);
    Status s = ZstdDecompress(*z, out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(out, src);
  }
}

TEST(CompressionTest, CompressesRepetitiveData) {
  std::vector<std::byte> src = Compressible(1 << 20);
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 3);
  ASSERT_TRUE(z.ok());
  EXPECT_LT(z->size(), src.size() / 10);
}

TEST(CompressionTest, RejectsContentSizeLie) {
  std::vector<std::byte> src = Compressible(10000);
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 1);
  ASSERT_TRUE(z.ok());
  for (size_t declared : {size_t{9999}, size_t{10001}, size_t{0}}) {
    std::vector<std::byte> out(declared);
    Status s = ZstdDecompress(*z, out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << declared;
    EXPECT_NE(s.message().find("content size"), std::string::npos) << s.message();
  }
}

TEST(CompressionTest, RejectsMissingContentSize) {
  std::vector<std::byte> src = Compressible(10000);
  std::vector<std::byte> z(ZSTD_compressBound(src.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ASSERT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0)));
  size_t n = ZSTD_compress2(cctx, z.data(), z.size(), src.data(), src.size());
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(n));
  z.resize(n);
  std::vector<std::byte> out(src.size());
  Status s = ZstdDecompress(z, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("content size"), std::string::npos) << s.message();
}

TEST(CompressionTest, RejectsCorruptData) {
  std::vector<std::byte> src = Random(100000, 1);
  // Half random, half repetitive, so the frame has real compressed blocks.
  std::vector<std::byte> tail = Compressible(100000);
  src.insert(src.end(), tail.begin(), tail.end());
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 1);
  ASSERT_TRUE(z.ok());
  std::vector<std::byte> out(src.size());

  std::vector<std::byte> corrupt = *z;
  corrupt[corrupt.size() / 2] ^= std::byte{0x5a};
  Status s = ZstdDecompress(corrupt, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();

  std::vector<std::byte> truncated(z->begin(), z->end() - 10);
  s = ZstdDecompress(truncated, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();

  std::vector<std::byte> garbage = Random(1000, 2);
  s = ZstdDecompress(garbage, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

TEST(CompressionTest, StreamRoundTripInChunks) {
  std::vector<std::byte> src = Compressible(3 << 20);
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 1);
  ASSERT_TRUE(z.ok());
  ZstdStreamDecompressor d;
  std::vector<std::byte> out;
  ASSERT_TRUE(d.Begin(src.size(), &out).ok());
  std::span<const std::byte> in(*z);
  while (!in.empty()) {
    size_t n = std::min<size_t>(in.size(), 1000);
    Status s = d.Feed(in.first(n));
    ASSERT_TRUE(s.ok()) << s.ToString();
    in = in.subspan(n);
  }
  Status s = d.Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, src);

  // The decompressor is reusable.
  ASSERT_TRUE(d.Begin(src.size(), &out).ok());
  ASSERT_TRUE(d.Feed(*z).ok());
  ASSERT_TRUE(d.Finish().ok());
  EXPECT_EQ(out, src);
}

TEST(CompressionTest, StreamRejections) {
  std::vector<std::byte> src = Compressible(100000);
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 1);
  ASSERT_TRUE(z.ok());
  std::vector<std::byte> out;
  {
    ZstdStreamDecompressor d;  // content size lie
    ASSERT_TRUE(d.Begin(src.size() + 1, &out).ok());
    EXPECT_EQ(d.Feed(*z).code(), StatusCode::kInvalidArgument);
  }
  {
    ZstdStreamDecompressor d;  // truncated
    ASSERT_TRUE(d.Begin(src.size(), &out).ok());
    ASSERT_TRUE(d.Feed(std::span<const std::byte>(*z).first(z->size() - 8)).ok());
    EXPECT_EQ(d.Finish().code(), StatusCode::kInvalidArgument);
  }
  {
    ZstdStreamDecompressor d;  // trailing bytes
    std::vector<std::byte> padded = *z;
    padded.push_back(std::byte{0});
    ASSERT_TRUE(d.Begin(src.size(), &out).ok());
    EXPECT_EQ(d.Feed(padded).code(), StatusCode::kInvalidArgument);
  }
}

TEST(CompressionTest, SenderPolicy) {
  EXPECT_FALSE(ShouldCompress(kMinCompressBytes - 1, true));
  EXPECT_TRUE(ShouldCompress(kMinCompressBytes, true));
  EXPECT_FALSE(ShouldCompress(1 << 20, false));
}

TEST(CompressionTest, PolicyModes) {
  EXPECT_TRUE(ShouldCompress(1 << 20, true, CompressionMode::kAuto));
  EXPECT_TRUE(ShouldCompress(1 << 20, true, CompressionMode::kZstd));
  EXPECT_FALSE(ShouldCompress(1 << 20, true, CompressionMode::kNone));
  EXPECT_FALSE(ShouldCompress(kMinCompressBytes - 1, true, CompressionMode::kZstd));
  // kAuto keeps compressed data at 90 % of raw or less.
  EXPECT_TRUE(WorthCompressing(1000, 900));
  EXPECT_FALSE(WorthCompressing(1000, 901));
  EXPECT_FALSE(WorthCompressing(1000, 1200));
  EXPECT_TRUE(WorthCompressing(uint64_t{8} << 30, uint64_t{7} << 30));  // no overflow

  // The setting takes both the mode and the bool of the first API.
  CompressionSetting setting;
  EXPECT_EQ(static_cast<CompressionMode>(setting), CompressionMode::kAuto);
  setting = false;
  EXPECT_EQ(static_cast<CompressionMode>(setting), CompressionMode::kNone);
  EXPECT_FALSE(setting);
  setting = true;
  EXPECT_EQ(static_cast<CompressionMode>(setting), CompressionMode::kAuto);
  setting = CompressionMode::kZstd;
  EXPECT_EQ(static_cast<CompressionMode>(setting), CompressionMode::kZstd);
  EXPECT_TRUE(setting);
}

TEST(CompressionTest, ShuffleLayout) {
  // Three 2-byte elements and a 1-byte tail: bytes grouped by significance, tail in place.
  std::vector<std::byte> src;
  for (int b : {0xa0, 0xa1, 0xb0, 0xb1, 0xc0, 0xc1, 0xee}) src.push_back(std::byte(b));
  std::vector<std::byte> shuffled(src.size());
  ByteShuffle(src, shuffled, 2);
  std::vector<std::byte> want;
  for (int b : {0xa0, 0xb0, 0xc0, 0xa1, 0xb1, 0xc1, 0xee}) want.push_back(std::byte(b));
  EXPECT_EQ(shuffled, want);

  // Two 4-byte elements.
  std::vector<std::byte> four;
  for (int b = 0; b < 8; ++b) four.push_back(std::byte(b));
  std::vector<std::byte> out(8);
  ByteShuffle(four, out, 4);
  std::vector<std::byte> want4;
  for (int b : {0, 4, 1, 5, 2, 6, 3, 7}) want4.push_back(std::byte(b));
  EXPECT_EQ(out, want4);
}

TEST(CompressionTest, ShuffleRoundTripsEverySizeAndTail) {
  for (size_t element_size : {0, 1, 2, 4, 8}) {
    for (size_t n : {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1001, 4099}) {
      std::vector<std::byte> src = Random(n, static_cast<uint32_t>(n * 10 + element_size));
      std::vector<std::byte> shuffled(n), back(n);
      ByteShuffle(src, shuffled, element_size);
      ByteUnshuffle(shuffled, back, element_size);
      EXPECT_EQ(back, src) << "element size " << element_size << ", " << n << " bytes";
      size_t tail = IsShuffleElementSize(element_size) ? n % element_size : n;
      // The tail that is not a whole element is left where it was.
      EXPECT_TRUE(std::equal(src.end() - tail, src.end(), shuffled.end() - tail))
          << "element size " << element_size << ", " << n << " bytes";
      if (element_size <= 1) EXPECT_EQ(shuffled, src);
    }
  }
}

TEST(CompressionTest, ShuffleHelpsSmoothFloats) {
  std::vector<float> values(1 << 18);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + 1e-4f * static_cast<float>(i);
  std::span<const std::byte> bytes = std::as_bytes(std::span<const float>(values));
  std::vector<std::byte> shuffled(bytes.size());
  ByteShuffle(bytes, shuffled, sizeof(float));
  StatusOr<std::vector<std::byte>> plain = ZstdCompress(bytes, 1);
  StatusOr<std::vector<std::byte>> with_shuffle = ZstdCompress(shuffled, 1);
  ASSERT_TRUE(plain.ok() && with_shuffle.ok());
  EXPECT_LT(with_shuffle->size() * 2, plain->size());
}

TEST(CompressionTest, CodecReusesContexts) {
  ZstdCodec codec;
  for (size_t n : {size_t{100}, size_t{1} << 20, size_t{5000}, size_t{0}}) {
    std::vector<std::byte> src = Compressible(n);
    std::vector<std::byte> z(ZstdBound(n));
    StatusOr<size_t> size = codec.Compress(src, 3, z);
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    z.resize(*size);
    std::vector<std::byte> out(n);
    ASSERT_TRUE(codec.Decompress(z, out).ok());
    EXPECT_EQ(out, src);
    // Frames from the codec are ordinary zstd frames, and sizes are still checked.
    std::vector<std::byte> other(n);
    EXPECT_TRUE(ZstdDecompress(z, other).ok());
    std::vector<std::byte> wrong(n + 1);
    EXPECT_EQ(codec.Decompress(z, wrong).code(), StatusCode::kInvalidArgument);
  }
}

TEST(CompressionTest, StreamIntoFixedDestination) {
  std::vector<std::byte> src = Compressible(3 << 20);
  StatusOr<std::vector<std::byte>> z = ZstdCompress(src, 1);
  ASSERT_TRUE(z.ok());
  std::vector<std::byte> dst(src.size());
  ZstdStreamDecompressor d;
  ASSERT_TRUE(d.Begin(dst).ok());
  for (size_t at = 0; at < z->size(); at += 1000) {
    size_t n = std::min<size_t>(1000, z->size() - at);
    ASSERT_TRUE(d.Feed(std::span<const std::byte>(*z).subspan(at, n)).ok());
  }
  ASSERT_TRUE(d.Finish().ok());
  EXPECT_EQ(dst, src);

  // A destination of another size than the frame's content is refused.
  std::vector<std::byte> small(src.size() - 1);
  ASSERT_TRUE(d.Begin(small).ok());
  EXPECT_EQ(d.Feed(*z).code(), StatusCode::kInvalidArgument);
}

}  // namespace compression_test
}  // namespace remex::rpc
