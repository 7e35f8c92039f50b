#include "rpc/frame.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "rpc/test_data.h"

#include "rpc/remex.capnp.h"

namespace remex::rpc {
namespace frame_test {

using testing::Compressible;
using testing::Random;
using testing::SmoothFloats;

OutFrame PingFrame(uint64_t request_id, uint64_t payload) {
  OutFrame f;
  f.request_id = request_id;
  f.message = std::make_unique<capnp::MallocMessageBuilder>();
  f.message->initRoot<wire::Request>().initPing().setPayload(payload);
  return f;
}

std::vector<std::byte> EncodeToBytes(OutFrame& f, EncodeOptions options = {}) {
  StatusOr<EncodedFrame> e = EncodeFrame(f, options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  std::vector<std::byte> bytes = Flatten(*e);
  EXPECT_EQ(bytes.size(), e->size());
  return bytes;
}

TEST(FrameTest, HeaderRoundTrip) {
  FrameHeader h;
  h.flags = 0xdeadbeef;
  h.request_id = 0x0102030405060708;
  h.message_bytes = 64;
  h.attachment_count = 3;
  auto bytes = EncodeFrameHeader(h);
  EXPECT_EQ(std::memcmp(bytes.data(), "RMXF", 4), 0);
  EXPECT_EQ(bytes[16], std::byte{0x08});  // little-endian request id
  StatusOr<FrameHeader> d = DecodeFrameHeader(bytes);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->major, kProtocolMajor);
  EXPECT_EQ(d->minor, kProtocolMinor);
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->request_id, h.request_id);
  EXPECT_EQ(d->message_bytes, h.message_bytes);
  EXPECT_EQ(d->attachment_count, h.attachment_count);
  EXPECT_TRUE(CheckFrameHeader(*d, Limits()).ok());
}

TEST(FrameTest, FrameRoundTrip) {
  std::vector<std::byte> small = Random(100, 1);
  std::vector<std::byte> big = Compressible(1 << 20);
  OutFrame f = PingFrame(42, 1234);
  f.flags = 5;
  f.attachments.push_back({small.data(), small.size(), true, nullptr});
  f.attachments.push_back({big.data(), big.size(), true, nullptr});
  f.attachments.push_back(OwnedAttachment({}, false));
  std::vector<std::byte> bytes = EncodeToBytes(f);
  EXPECT_LT(bytes.size(), big.size() / 10);  // the big attachment went compressed

  StatusOr<Frame> d = DecodeFrame(bytes, Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->request_id, 42u);
  EXPECT_EQ(d->flags, 5u);
  EXPECT_EQ(d->major, kProtocolMajor);
  ASSERT_EQ(d->attachments.size(), 3u);
  EXPECT_EQ(d->attachments[0], small);
  EXPECT_EQ(d->attachments[1], big);
  EXPECT_TRUE(d->attachments[2].empty());
  capnp::FlatArrayMessageReader reader = d->Reader();
  wire::Request::Reader request = reader.getRoot<wire::Request>();
  ASSERT_TRUE(request.isPing());
  EXPECT_EQ(request.getPing().getPayload(), 1234u);
}

TEST(FrameTest, AttachmentsSentRawWhenNotAskedOrNotSmaller) {
  std::vector<std::byte> noise = Random(1 << 16, 3);
  std::vector<std::byte> text = Compressible(1 << 16);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({noise.data(), noise.size(), true, nullptr});
  f.attachments.push_back({text.data(), text.size(), false, nullptr});
  std::vector<std::byte> bytes = EncodeToBytes(f);
  EXPECT_GE(bytes.size(), noise.size() + text.size() + 2 * kAttachmentHeaderSize);

  EncodeOptions off;
  off.compression = false;
  OutFrame g = PingFrame(1, 0);
  g.attachments.push_back({text.data(), text.size(), true, nullptr});
  EXPECT_GE(EncodeToBytes(g, off).size(), text.size());

  StatusOr<Frame> d = DecodeFrame(bytes, Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], noise);
  EXPECT_EQ(d->attachments[1], text);
}

TEST(FrameTest, BadMagic) {
  OutFrame f = PingFrame(7, 0);
  std::vector<std::byte> bytes = EncodeToBytes(f);
  bytes[0] = std::byte{'X'};
  EXPECT_EQ(DecodeFrame(bytes, Limits()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeFrameHeader(bytes).status().code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, WrongMajorVersion) {
  OutFrame f = PingFrame(7, 0);
  std::vector<std::byte> bytes = EncodeToBytes(f);
  bytes[4] = std::byte{2};  // major = 2
  StatusOr<FrameHeader> h = DecodeFrameHeader(bytes);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->request_id, 7u);
  Status s = DecodeFrame(bytes, Limits()).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  std::string minor = "." + std::to_string(kProtocolMinor);
  EXPECT_NE(s.message().find("peer speaks 2" + minor), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("this side speaks 1" + minor), std::string::npos) << s.message();

  bytes[4] = std::byte{1};
  bytes[6] = std::byte{9};  // a newer minor version is accepted
  EXPECT_TRUE(DecodeFrame(bytes, Limits()).ok());
}

TEST(FrameTest, Oversize) {
  FrameHeader h;
  Limits limits;
  h.message_bytes = limits.max_message_bytes + 8;
  EXPECT_EQ(CheckFrameHeader(h, limits).code(), StatusCode::kResourceExhausted);
  h.message_bytes = 12;
  EXPECT_EQ(CheckFrameHeader(h, limits).code(), StatusCode::kInvalidArgument);
  h.message_bytes = 8;
  h.attachment_count = limits.max_attachments + 1;
  EXPECT_EQ(CheckFrameHeader(h, limits).code(), StatusCode::kResourceExhausted);

  AttachmentHeader a;
  a.raw_size = limits.max_attachment_raw_size + 1;
  a.wire_size = a.raw_size;
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kResourceExhausted);

  // Limits of the receiver apply to a whole frame too.
  std::vector<std::byte> payload = Random(1000, 4);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({payload.data(), payload.size(), false, nullptr});
  std::vector<std::byte> bytes = EncodeToBytes(f);
  Limits tight;
  tight.max_attachment_raw_size = 999;
  EXPECT_EQ(DecodeFrame(bytes, tight).status().code(), StatusCode::kResourceExhausted);
  tight = Limits();
  tight.max_message_bytes = 8;
  EXPECT_EQ(DecodeFrame(bytes, tight).status().code(), StatusCode::kResourceExhausted);

  // And the sender refuses what its limits refuse.
  EncodeOptions options;
  options.limits.max_attachments = 0;
  OutFrame g = PingFrame(1, 0);
  g.attachments.push_back({payload.data(), payload.size(), false, nullptr});
  EXPECT_EQ(EncodeFrame(g, options).status().code(), StatusCode::kResourceExhausted);
}

TEST(FrameTest, BadAttachmentHeaders) {
  Limits limits;
  AttachmentHeader a;
  a.raw_size = 100;
  a.wire_size = 99;  // raw must match
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  a.codec = Codec::kZstd;
  a.wire_size = 1 << 20;  // more than any zstd frame of 100 bytes
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  a.wire_size = 0;
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  auto bytes = EncodeAttachmentHeader({100, 100, Codec::kRaw});
  bytes[16] = std::byte{7};  // unknown codec
  EXPECT_EQ(DecodeAttachmentHeader(bytes, limits).status().code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, DecompressionRatioCapAppliesToCompressedAttachmentsOnly) {
  Limits limits;
  limits.max_decompression_ratio = 100;
  AttachmentHeader a{uint64_t{1} << 20, 10000, Codec::kZstd};  // about 105:1
  auto over = DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("max_decompression_ratio"), std::string::npos);
  a.wire_size = 11000;  // about 95:1
  EXPECT_TRUE(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).ok());
  // A chunked attachment's chunks are checked on its table (ChunkedTest below): fill
  // chunks make the attachment's own ratio meaningless.
  a.codec = Codec::kChunked;
  a.wire_size = 9000;
  EXPECT_TRUE(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).ok());
  a.codec = Codec::kRaw;
  a.wire_size = a.raw_size;
  EXPECT_TRUE(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).ok());
  limits.max_decompression_ratio = 0;  // no cap
  a = {uint64_t{1} << 20, 40, Codec::kZstd};
  EXPECT_TRUE(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).ok());
}

TEST(FrameTest, TruncatedAtEveryLength) {
  std::vector<std::byte> payload = Compressible(20000);
  std::vector<std::byte> raw = Random(50, 5);
  OutFrame f = PingFrame(3, 99);
  f.attachments.push_back({payload.data(), payload.size(), true, nullptr});
  f.attachments.push_back({raw.data(), raw.size(), false, nullptr});
  std::vector<std::byte> bytes = EncodeToBytes(f);
  ASSERT_TRUE(DecodeFrame(bytes, Limits()).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Status s = DecodeFrame(std::span<const std::byte>(bytes).first(n), Limits()).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << n;
  }
  bytes.push_back(std::byte{0});
  EXPECT_EQ(DecodeFrame(bytes, Limits()).status().code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, GarbageMessageAndPayload) {
  // A valid header over a message of random words.
  FrameHeader h;
  h.message_bytes = 64;
  auto header = EncodeFrameHeader(h);
  std::vector<std::byte> bytes(header.begin(), header.end());
  std::vector<std::byte> junk = Random(64, 6);
  std::fill(junk.begin(), junk.begin() + 8, std::byte{0});  // one segment...
  junk[4] = std::byte{200};                                 // ...claiming 200 words
  bytes.insert(bytes.end(), junk.begin(), junk.end());
  Status s = DecodeFrame(bytes, Limits()).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("malformed message"), std::string::npos) << s.message();

  // A zstd attachment whose payload is not zstd.
  OutFrame f = PingFrame(3, 0);
  std::vector<std::byte> good = EncodeToBytes(f);
  good[28] = std::byte{1};  // attachment_count = 1
  auto ah = EncodeAttachmentHeader({5000, 100, Codec::kZstd});
  good.insert(good.end(), ah.begin(), ah.end());
  std::vector<std::byte> not_zstd = Random(100, 7);
  good.insert(good.end(), not_zstd.begin(), not_zstd.end());
  s = DecodeFrame(good, Limits()).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, EncodeRequiresMessage) {
  OutFrame f;
  EXPECT_EQ(EncodeFrame(f, EncodeOptions()).status().code(), StatusCode::kInvalidArgument);
  OutFrame g = PingFrame(1, 0);
  g.attachments.push_back({nullptr, 10, false, nullptr});
  EXPECT_EQ(EncodeFrame(g, EncodeOptions()).status().code(), StatusCode::kInvalidArgument);
}

TEST(FrameTest, EncodedFrameSurvivesMove) {
  std::vector<std::byte> payload = Compressible(10000);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back(OwnedAttachment(payload, true));
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok());
  f = OutFrame();  // the keepalive moved into the encoded frame
  EncodedFrame moved = std::move(e).value();
  StatusOr<Frame> d = DecodeFrame(Flatten(moved), Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], payload);
}

// Where an encoded attachment sits in a flattened frame.
struct WireAttachment {
  AttachmentHeader header;
  size_t header_offset = 0;   // of its 24-byte header
  size_t payload_offset = 0;  // of its payload
};

std::vector<WireAttachment> WalkAttachments(const std::vector<std::byte>& bytes) {
  StatusOr<FrameHeader> h = DecodeFrameHeader(bytes);
  EXPECT_TRUE(h.ok());
  std::vector<WireAttachment> out;
  size_t at = kFrameHeaderSize + h->message_bytes;
  for (uint32_t i = 0; i < h->attachment_count; ++i) {
    WireAttachment a;
    a.header_offset = at;
    StatusOr<AttachmentHeader> ah =
        DecodeAttachmentHeader(std::span<const std::byte>(bytes).subspan(at), Limits());
    EXPECT_TRUE(ah.ok()) << ah.status().ToString();
    a.header = *ah;
    a.payload_offset = at + kAttachmentHeaderSize;
    at = a.payload_offset + ah->wire_size;
    out.push_back(a);
  }
  return out;
}

ChunkEntry TableEntry(const std::vector<std::byte>& bytes, const WireAttachment& a, size_t chunk) {
  const std::byte* p = bytes.data() + a.payload_offset + chunk * kChunkEntrySize;
  ChunkEntry e;
  std::memcpy(&e.wire_size, p, 4);  // little-endian host
  e.codec = static_cast<ChunkCodec>(p[4]);
  return e;
}

TEST(ChunkedTest, RoundTripEverySizeElementSizeAndMode) {
  for (size_t n : {kMinCompressBytes, kAttachmentChunkBytes - 3, kAttachmentChunkBytes,
                   kAttachmentChunkBytes + 1, 3 * kAttachmentChunkBytes + 5}) {
    std::vector<std::byte> data = SmoothFloats(n);
    for (uint8_t element_size : {0, 1, 2, 4, 8}) {
      for (CompressionMode mode : {CompressionMode::kAuto, CompressionMode::kZstd}) {
        SCOPED_TRACE(std::to_string(n) + " bytes, element size " + std::to_string(element_size) +
                     ", mode " + std::to_string(static_cast<int>(mode)));
        OutFrame f = PingFrame(1, 0);
        f.attachments.push_back({data.data(), data.size(), true, nullptr, element_size});
        EncodeOptions options;
        options.compression = mode;
        std::vector<std::byte> bytes = EncodeToBytes(f, options);
        std::vector<WireAttachment> wire = WalkAttachments(bytes);
        ASSERT_EQ(wire.size(), 1u);
        EXPECT_EQ(wire[0].header.codec, Codec::kChunked);
        EXPECT_EQ(wire[0].header.element_size, element_size > 1 ? element_size : 0);
        EXPECT_EQ(static_cast<uint8_t>(bytes[wire[0].header_offset + 17]),
                  element_size > 1 ? element_size : 0);
        ChunkEntry first = TableEntry(bytes, wire[0], 0);
        EXPECT_EQ(first.codec, element_size > 1 ? ChunkCodec::kShuffledZstd : ChunkCodec::kZstd);
        StatusOr<Frame> d = DecodeFrame(bytes, Limits());
        ASSERT_TRUE(d.ok()) << d.status().ToString();
        EXPECT_EQ(d->attachments[0], data);
        EXPECT_EQ(d->attachment_in_place, std::vector<bool>{false});
      }
    }
  }
}

TEST(ChunkedTest, AutoSendsIncompressibleChunksRaw) {
  // Chunks 0-1 compress, chunks 2-3 are noise, chunk 4 (half a chunk) compresses.
  std::vector<std::byte> data = Compressible(2 * kAttachmentChunkBytes);
  std::vector<std::byte> noise = Random(2 * kAttachmentChunkBytes, 11);
  data.insert(data.end(), noise.begin(), noise.end());
  std::vector<std::byte> more = Compressible(kAttachmentChunkBytes / 2);
  data.insert(data.end(), more.begin(), more.end());

  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({data.data(), data.size(), true, nullptr});
  StatusOr<EncodedFrame> e = EncodeFrame(f, EncodeOptions());
  ASSERT_TRUE(e.ok());
  std::vector<std::byte> bytes = Flatten(*e);
  std::vector<WireAttachment> wire = WalkAttachments(bytes);
  ASSERT_EQ(wire[0].header.codec, Codec::kChunked);
  std::vector<ChunkCodec> codecs;
  for (size_t c = 0; c < 5; ++c) codecs.push_back(TableEntry(bytes, wire[0], c).codec);
  EXPECT_EQ(codecs, (std::vector<ChunkCodec>{ChunkCodec::kZstd, ChunkCodec::kZstd, ChunkCodec::kRaw,
                                             ChunkCodec::kRaw, ChunkCodec::kZstd}));
  EXPECT_EQ(TableEntry(bytes, wire[0], 2).wire_size, kAttachmentChunkBytes);
  // Noise costs nothing in size: only the table and the compressed chunks are added.
  EXPECT_LT(wire[0].header.wire_size, noise.size() + 64 * 1024);
  EXPECT_EQ(e->attachment_raw_bytes(), data.size());
  EXPECT_EQ(e->attachment_wire_bytes(), wire[0].header.wire_size);
  StatusOr<Frame> d = DecodeFrame(bytes, Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], data);
}

TEST(ChunkedTest, ModesOnNoise) {
  std::vector<std::byte> noise = Random(3 * kAttachmentChunkBytes / 2, 12);
  auto encode = [&](CompressionMode mode) {
    OutFrame f = PingFrame(1, 0);
    f.attachments.push_back({noise.data(), noise.size(), true, nullptr, 4});
    EncodeOptions options;
    options.compression = mode;
    std::vector<std::byte> bytes = EncodeToBytes(f, options);
    StatusOr<Frame> d = DecodeFrame(bytes, Limits());
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) EXPECT_EQ(d->attachments[0], noise);
    return WalkAttachments(bytes)[0].header;
  };
  // kAuto: no chunk is worth it, so the attachment goes plain raw.
  AttachmentHeader h = encode(CompressionMode::kAuto);
  EXPECT_EQ(h.codec, Codec::kRaw);
  EXPECT_EQ(h.wire_size, noise.size());
  h = encode(CompressionMode::kNone);
  EXPECT_EQ(h.codec, Codec::kRaw);
  // kZstd: every chunk compressed, whatever it costs.
  h = encode(CompressionMode::kZstd);
  EXPECT_EQ(h.codec, Codec::kChunked);
  EXPECT_GT(h.wire_size, noise.size());
}

TEST(ChunkedTest, MinorZeroPeerGetsWholeZstd) {
  std::vector<std::byte> data = SmoothFloats(3 * kAttachmentChunkBytes);
  std::vector<std::byte> noise = Random(1 << 16, 13);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
  f.attachments.push_back({noise.data(), noise.size(), true, nullptr, 4});
  EncodeOptions options;
  options.peer_minor = 0;
  std::vector<std::byte> bytes = EncodeToBytes(f, options);
  std::vector<WireAttachment> wire = WalkAttachments(bytes);
  EXPECT_EQ(wire[0].header.codec, Codec::kZstd);
  EXPECT_EQ(static_cast<uint8_t>(bytes[wire[0].header_offset + 17]), 0);  // reserved
  EXPECT_EQ(wire[1].header.codec, Codec::kRaw);
  StatusOr<Frame> d = DecodeFrame(bytes, Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], data);
  EXPECT_EQ(d->attachments[1], noise);
}

TEST(ChunkedTest, EncodeRejectsBadElementSize) {
  std::vector<std::byte> data = Compressible(1 << 16);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({data.data(), data.size(), true, nullptr, 3});
  EXPECT_EQ(EncodeFrame(f, EncodeOptions()).status().code(), StatusCode::kInvalidArgument);
  // Not compressed: the element size does not matter.
  OutFrame g = PingFrame(1, 0);
  g.attachments.push_back({data.data(), data.size(), false, nullptr, 3});
  EXPECT_TRUE(EncodeFrame(g, EncodeOptions()).ok());
}

// A valid frame with one chunked attachment (two chunks: zstd, raw) to corrupt.
struct ChunkedFrame {
  std::vector<std::byte> data;
  std::vector<std::byte> bytes;
  WireAttachment wire;
};

ChunkedFrame MakeChunkedFrame() {
  ChunkedFrame c;
  c.data = SmoothFloats(kAttachmentChunkBytes);
  std::vector<std::byte> noise = Random(1000, 14);
  c.data.insert(c.data.end(), noise.begin(), noise.end());
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({c.data.data(), c.data.size(), true, nullptr, 4});
  c.bytes = EncodeToBytes(f);
  c.wire = WalkAttachments(c.bytes)[0];
  EXPECT_EQ(c.wire.header.codec, Codec::kChunked);
  EXPECT_EQ(TableEntry(c.bytes, c.wire, 0).codec, ChunkCodec::kShuffledZstd);
  EXPECT_EQ(TableEntry(c.bytes, c.wire, 1).codec, ChunkCodec::kRaw);
  return c;
}

TEST(ChunkedTest, BadHeadersAndTables) {
  Limits limits;
  AttachmentHeader a;
  a.codec = Codec::kChunked;
  a.raw_size = 3 * kAttachmentChunkBytes;
  a.wire_size = 3 * kChunkEntrySize;  // no room for any chunk
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  a.wire_size = 4 * kAttachmentChunkBytes;  // more than 3 chunks can take
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  a.wire_size = kAttachmentChunkBytes;
  EXPECT_TRUE(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).ok());
  a.element_size = 3;
  EXPECT_EQ(DecodeAttachmentHeader(EncodeAttachmentHeader(a), limits).status().code(),
            StatusCode::kInvalidArgument);
  // The element-size byte is reserved, and ignored, for the other codecs.
  auto raw = EncodeAttachmentHeader({100, 100, Codec::kRaw});
  raw[17] = std::byte{3};
  StatusOr<AttachmentHeader> decoded = DecodeAttachmentHeader(raw, limits);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->element_size, 0);

  ChunkedFrame good = MakeChunkedFrame();
  ASSERT_TRUE(DecodeFrame(good.bytes, Limits()).ok());
  auto expect_invalid = [](std::vector<std::byte> bytes, const std::string& what) {
    Status s = DecodeFrame(bytes, Limits()).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
  };
  size_t table = good.wire.payload_offset;
  {
    std::vector<std::byte> b = good.bytes;  // raw chunk that claims another size
    b[table + 8] = static_cast<std::byte>(static_cast<uint8_t>(b[table + 8]) + 1);
    expect_invalid(b, "raw chunk size");
  }
  {
    std::vector<std::byte> b = good.bytes;  // unknown chunk codec
    b[table + 4] = std::byte{9};
    expect_invalid(b, "chunk codec");
  }
  {
    std::vector<std::byte> b = good.bytes;  // shuffled chunk without an element size
    b[good.wire.header_offset + 17] = std::byte{0};
    expect_invalid(b, "element size");
  }
  {
    std::vector<std::byte> b = good.bytes;  // empty zstd chunk
    std::fill(b.begin() + table, b.begin() + table + 4, std::byte{0});
    expect_invalid(b, "empty chunk");
  }
  {
    std::vector<std::byte> b = good.bytes;  // chunk sizes that do not add up
    b[table] = static_cast<std::byte>(static_cast<uint8_t>(b[table]) ^ 1);
    expect_invalid(b, "table sum");
  }
  {
    std::vector<std::byte> b = good.bytes;  // a corrupt compressed chunk
    size_t chunk0 = table + 2 * kChunkEntrySize;
    for (size_t i = 20; i < 40; ++i) b[chunk0 + i] ^= std::byte{0xff};
    expect_invalid(b, "corrupt chunk");
  }
}

// Decodes `bytes` (one frame) under a ratio cap, with a reader as the server uses it.
StatusOr<Frame> DecodeCapped(const std::vector<std::byte>& bytes, uint32_t ratio) {
  Limits limits;
  limits.max_decompression_ratio = ratio;
  return DecodeFrame(bytes, limits);
}

TEST(ChunkedTest, RepeatedPatternsGoAsFillChunks) {
  // Zeros, a repeated float32 (1.5f) with a tail shorter than an element, and a chunk
  // of data between them.
  std::vector<std::byte> data(3 * kAttachmentChunkBytes + 6, std::byte{0});
  const float v = 1.5f;
  for (size_t i = kAttachmentChunkBytes; i + 4 <= 2 * kAttachmentChunkBytes; i += 4) std::memcpy(&data[i], &v, 4);
  std::vector<std::byte> smooth = SmoothFloats(kAttachmentChunkBytes);
  std::copy(smooth.begin(), smooth.end(), data.begin() + 2 * kAttachmentChunkBytes);
  std::memcpy(&data[3 * kAttachmentChunkBytes], &v, 4);  // last chunk: 1.5f then 2 bytes of 1.5f's pattern
  std::memcpy(&data[3 * kAttachmentChunkBytes + 4], &v, 2);
  OutFrame f = PingFrame(1, 0);
  f.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
  std::vector<std::byte> bytes = EncodeToBytes(f);
  std::vector<WireAttachment> wire = WalkAttachments(bytes);
  ASSERT_EQ(wire[0].header.codec, Codec::kChunked);
  EXPECT_EQ(TableEntry(bytes, wire[0], 0).codec, ChunkCodec::kFill);
  EXPECT_EQ(TableEntry(bytes, wire[0], 0).wire_size, 4u);
  EXPECT_EQ(TableEntry(bytes, wire[0], 1).codec, ChunkCodec::kFill);
  EXPECT_EQ(TableEntry(bytes, wire[0], 2).codec, ChunkCodec::kShuffledZstd);
  EXPECT_EQ(TableEntry(bytes, wire[0], 3).codec, ChunkCodec::kFill);
  StatusOr<Frame> d = DecodeCapped(bytes, kMaxCompressionRatio);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], data);
  // A peer of minor 2 does not know fill chunks: it gets zstd.
  EncodeOptions old;
  old.peer_minor = kMinorFillChunks - 1;
  std::vector<std::byte> old_bytes = EncodeToBytes(f, old);
  EXPECT_NE(TableEntry(old_bytes, WalkAttachments(old_bytes)[0], 0).codec, ChunkCodec::kFill);
  d = DecodeFrame(old_bytes, Limits());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->attachments[0], data);
}

TEST(ChunkedTest, ASenderStaysWithinTheRatioCap) {
  // A strictly periodic, non-constant chunk compresses far past the cap: it goes raw,
  // and the server's default cap admits every chunk the sender makes.
  std::vector<std::byte> data(2 * kAttachmentChunkBytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i % 61);
  for (CompressionMode mode : {CompressionMode::kAuto, CompressionMode::kZstd}) {
    OutFrame f = PingFrame(1, 0);
    f.attachments.push_back({data.data(), data.size(), true, nullptr, 0});
    EncodeOptions options;
    options.compression = mode;
    std::vector<std::byte> bytes = EncodeToBytes(f, options);
    std::vector<WireAttachment> wire = WalkAttachments(bytes);
    for (size_t c = 0; wire[0].header.codec == Codec::kChunked && c < 2; ++c) {
      ChunkEntry e = TableEntry(bytes, wire[0], c);
      EXPECT_TRUE(e.codec == ChunkCodec::kRaw || kAttachmentChunkBytes / kMaxCompressionRatio <= e.wire_size)
          << "chunk " << c << ": " << e.wire_size << " bytes";
    }
    StatusOr<Frame> d = DecodeCapped(bytes, kMaxCompressionRatio);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->attachments[0], data);
  }
}

TEST(ChunkedTest, AZstdChunkPastTheRatioCapIsRefusedOnTheTable) {
  // A hand-made bomb: one chunk table entry naming 1 MiB of zeros as a zstd frame of a
  // few dozen bytes.
  std::vector<std::byte> zeros(kAttachmentChunkBytes, std::byte{0});
  StatusOr<std::vector<std::byte>> z = ZstdCompress(zeros, 1);
  ASSERT_TRUE(z.ok());
  ASSERT_LT(z->size() * kMaxCompressionRatio, zeros.size());
  OutFrame f = PingFrame(1, 0);
  std::vector<std::byte> bytes = EncodeToBytes(f);
  // Patch in one chunked attachment.
  std::array<std::byte, kFrameHeaderSize> fh;
  std::copy(bytes.begin(), bytes.begin() + kFrameHeaderSize, fh.begin());
  StatusOr<FrameHeader> h = DecodeFrameHeader(fh);
  ASSERT_TRUE(h.ok());
  h->attachment_count = 1;
  auto nh = EncodeFrameHeader(*h);
  std::copy(nh.begin(), nh.end(), bytes.begin());
  AttachmentHeader ah{kAttachmentChunkBytes, kChunkEntrySize + z->size(), Codec::kChunked};
  auto ahb = EncodeAttachmentHeader(ah);
  bytes.insert(bytes.end(), ahb.begin(), ahb.end());
  std::array<std::byte, kChunkEntrySize> entry{};
  const uint32_t n = static_cast<uint32_t>(z->size());
  std::memcpy(entry.data(), &n, 4);  // little-endian host
  entry[4] = static_cast<std::byte>(ChunkCodec::kZstd);
  bytes.insert(bytes.end(), entry.begin(), entry.end());
  bytes.insert(bytes.end(), z->begin(), z->end());
  StatusOr<Frame> uncapped = DecodeCapped(bytes, 0);
  ASSERT_TRUE(uncapped.ok()) << uncapped.status().ToString();
  EXPECT_EQ(uncapped->attachments[0], zeros);
  StatusOr<Frame> capped = DecodeCapped(bytes, kMaxCompressionRatio);
  EXPECT_EQ(capped.status().code(), StatusCode::kResourceExhausted) << capped.status().ToString();
  EXPECT_NE(capped.status().message().find("max_decompression_ratio"), std::string::npos);
  // The same chunk as a fill chunk of the wrong pattern length: refused.
  entry[4] = static_cast<std::byte>(ChunkCodec::kFill);
  std::memcpy(entry.data(), &n, 4);
  std::vector<std::byte> fill = bytes;
  std::copy(entry.begin(), entry.end(), fill.end() - static_cast<std::ptrdiff_t>(z->size() + kChunkEntrySize));
  EXPECT_EQ(DecodeCapped(fill, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(AttachmentReaderTest, ACancelFlagStopsADecompressionInProgress) {
  // 512 MiB of zeros as one zstd frame (about 16 KB), decoded into a growing vector;
  // the flag is set from another thread while the decoder runs.
  const uint64_t raw = uint64_t{512} << 20;
  const std::vector<std::byte> bomb = testing::ZeroZstdFrame(raw);
  const std::vector<std::byte>* z = &bomb;
  AttachmentHeader h{raw, z->size(), Codec::kZstd};
  std::atomic<bool> cancel{false};
  AttachmentReader reader;
  reader.SetCancel(&cancel);
  std::vector<std::byte> out;
  ASSERT_TRUE(reader.Begin(h, &out).ok());
  EXPECT_TRUE(reader.HeavyCommit());
  std::span<std::byte> buf = reader.NextBuffer();
  ASSERT_EQ(buf.size(), z->size());
  std::memcpy(buf.data(), z->data(), buf.size());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = reader.Commit();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  canceller.join();
  std::printf("Commit returned %s after %.1f ms, %zu bytes decoded\n", s.ToString().c_str(), ms, out.size());
  if (s.ok()) {
    GTEST_SKIP() << "the whole frame decoded within 2 ms: nothing to cancel on this machine";
  }
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_LT(out.size(), raw);
  // Set from the start: nothing is decoded.
  AttachmentReader again;
  again.SetCancel(&cancel);
  std::vector<std::byte> none;
  ASSERT_TRUE(again.Begin(h, &none).ok());
  buf = again.NextBuffer();
  std::memcpy(buf.data(), z->data(), buf.size());
  EXPECT_EQ(again.Commit().code(), StatusCode::kCancelled);
  EXPECT_TRUE(none.empty());
}

TEST(ChunkedTest, TruncatedAtManyLengths) {
  ChunkedFrame good = MakeChunkedFrame();
  // Every length through the headers and the table, then a stride through the chunks.
  size_t dense = good.wire.payload_offset + 2 * kChunkEntrySize + 64;
  for (size_t n = 0; n < good.bytes.size(); n += (n < dense ? 1 : 997)) {
    Status s = DecodeFrame(std::span<const std::byte>(good.bytes).first(n), Limits()).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << n;
  }
  Status s = DecodeFrame(std::span<const std::byte>(good.bytes).first(good.bytes.size() - 1),
                         Limits())
                 .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

// Feeds the payload of `wire` from `bytes` to `reader` as a socket would.
Status Feed(AttachmentReader& reader, const std::vector<std::byte>& bytes,
            const WireAttachment& wire) {
  size_t at = wire.payload_offset;
  while (!reader.done()) {
    std::span<std::byte> buf = reader.NextBuffer();
    if (at + buf.size() > bytes.size()) return InvalidArgument("out of bytes");
    std::memcpy(buf.data(), bytes.data() + at, buf.size());
    at += buf.size();
    REMEX_RETURN_IF_ERROR(reader.Commit());
  }
  return OkStatus();
}

TEST(AttachmentReaderTest, DecodesEveryCodecIntoAFixedDestination) {
  std::vector<std::byte> data = SmoothFloats(2 * kAttachmentChunkBytes + 12345);
  for (uint16_t peer_minor : {uint16_t{0}, kProtocolMinor}) {
    for (CompressionMode mode :
         {CompressionMode::kNone, CompressionMode::kAuto, CompressionMode::kZstd}) {
      OutFrame f = PingFrame(1, 0);
      f.attachments.push_back({data.data(), data.size(), true, nullptr, 4});
      EncodeOptions options;
      options.compression = mode;
      options.peer_minor = peer_minor;
      std::vector<std::byte> bytes = EncodeToBytes(f, options);
      WireAttachment wire = WalkAttachments(bytes)[0];
      Codec want = mode == CompressionMode::kNone ? Codec::kRaw
                   : peer_minor == 0              ? Codec::kZstd
                                                  : Codec::kChunked;
      EXPECT_EQ(wire.header.codec, want);

      std::vector<std::byte> destination(data.size(), std::byte{0x11});
      AttachmentReader reader;
      ASSERT_TRUE(reader.Begin(wire.header, std::span<std::byte>(destination)).ok());
      Status s = Feed(reader, bytes, wire);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(destination, data) << "codec " << static_cast<int>(want);

      std::vector<std::byte> wrong(data.size() - 1);
      EXPECT_EQ(reader.Begin(wire.header, std::span<std::byte>(wrong)).code(),
                StatusCode::kInvalidArgument);
    }
  }
}

TEST(AttachmentReaderTest, ChunkedIntoVectorGrowsWithTheData) {
  ChunkedFrame good = MakeChunkedFrame();
  std::vector<std::byte> out;
  AttachmentReader reader;
  ASSERT_TRUE(reader.Begin(good.wire.header, &out).ok());
  size_t reads = 0;
  size_t at = good.wire.payload_offset;
  while (!reader.done()) {
    std::span<std::byte> buf = reader.NextBuffer();
    EXPECT_LE(buf.size(), ZstdBound(kAttachmentChunkBytes));  // bounded scratch
    std::memcpy(buf.data(), good.bytes.data() + at, buf.size());
    at += buf.size();
    ASSERT_TRUE(reader.Commit().ok());
    ++reads;
    if (reads == 1) EXPECT_TRUE(out.empty());  // the table: no output yet
  }
  EXPECT_EQ(reads, 3u);  // table, chunk 0, chunk 1
  EXPECT_EQ(out, good.data);
}

}  // namespace frame_test
}  // namespace remex::rpc
