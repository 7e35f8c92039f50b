#include "rpc/frame.h"

#include <algorithm>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "rpc/remex.capnp.h"

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
  EXPECT_NE(s.message().find("2.0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1.0"), std::string::npos) << s.message();

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

}  // namespace
}  // namespace remex::rpc
