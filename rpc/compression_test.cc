#include "rpc/compression.h"

#include <zstd.h>

#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace remex::rpc {
namespace {

std::vector<std::byte> Compressible(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i / 16) % 7);
  return v;
}

std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(gen());
  return v;
}

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

}  // namespace
}  // namespace remex::rpc
