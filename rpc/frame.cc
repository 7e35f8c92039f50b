#include "rpc/frame.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include <capnp/any.h>
#include <kj/exception.h>

namespace remex::rpc {
namespace {

template <typename T>
void PutLe(std::byte* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

template <typename T>
T GetLe(const std::byte* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(std::to_integer<uint8_t>(p[i])) << (8 * i);
  return v;
}

std::string VersionString(uint16_t major, uint16_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace

capnp::ReaderOptions WireReaderOptions() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = uint64_t{64} << 20;
  options.nestingLimit = 64;
  return options;
}

std::array<std::byte, kFrameHeaderSize> EncodeFrameHeader(const FrameHeader& h) {
  std::array<std::byte, kFrameHeaderSize> out{};
  std::memcpy(out.data(), kFrameMagic.data(), kFrameMagic.size());
  PutLe<uint16_t>(&out[4], h.major);
  PutLe<uint16_t>(&out[6], h.minor);
  PutLe<uint32_t>(&out[8], h.flags);
  PutLe<uint32_t>(&out[12], 0);  // reserved
  PutLe<uint64_t>(&out[16], h.request_id);
  PutLe<uint32_t>(&out[24], h.message_bytes);
  PutLe<uint32_t>(&out[28], h.attachment_count);
  return out;
}

StatusOr<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes) {
  if (bytes.size() < kFrameHeaderSize) {
    return InvalidArgument("truncated frame header: " + std::to_string(bytes.size()) + " of " +
                           std::to_string(kFrameHeaderSize) + " bytes");
  }
  if (std::memcmp(bytes.data(), kFrameMagic.data(), kFrameMagic.size()) != 0) {
    return InvalidArgument("not a Remex frame (bad magic)");
  }
  FrameHeader h;
  h.major = GetLe<uint16_t>(&bytes[4]);
  h.minor = GetLe<uint16_t>(&bytes[6]);
  h.flags = GetLe<uint32_t>(&bytes[8]);
  h.request_id = GetLe<uint64_t>(&bytes[16]);
  h.message_bytes = GetLe<uint32_t>(&bytes[24]);
  h.attachment_count = GetLe<uint32_t>(&bytes[28]);
  return h;
}

Status CheckFrameHeader(const FrameHeader& h, const Limits& limits) {
  if (h.major != kProtocolMajor) {
    return FailedPrecondition("protocol version mismatch: peer speaks " +
                              VersionString(h.major, h.minor) + ", this side speaks " +
                              VersionString(kProtocolMajor, kProtocolMinor));
  }
  if (h.message_bytes % sizeof(capnp::word) != 0) {
    return InvalidArgument("message length " + std::to_string(h.message_bytes) +
                           " is not a multiple of 8");
  }
  if (h.message_bytes > limits.max_message_bytes) {
    return ResourceExhausted("message of " + std::to_string(h.message_bytes) +
                             " bytes exceeds the limit of " +
                             std::to_string(limits.max_message_bytes));
  }
  if (h.attachment_count > limits.max_attachments) {
    return ResourceExhausted(std::to_string(h.attachment_count) +
                             " attachments exceed the limit of " +
                             std::to_string(limits.max_attachments));
  }
  return OkStatus();
}

std::array<std::byte, kAttachmentHeaderSize> EncodeAttachmentHeader(const AttachmentHeader& h) {
  std::array<std::byte, kAttachmentHeaderSize> out{};
  PutLe<uint64_t>(&out[0], h.raw_size);
  PutLe<uint64_t>(&out[8], h.wire_size);
  out[16] = static_cast<std::byte>(h.codec);
  return out;
}

StatusOr<AttachmentHeader> DecodeAttachmentHeader(std::span<const std::byte> bytes,
                                                  const Limits& limits) {
  if (bytes.size() < kAttachmentHeaderSize) {
    return InvalidArgument("truncated attachment header");
  }
  AttachmentHeader h;
  h.raw_size = GetLe<uint64_t>(&bytes[0]);
  h.wire_size = GetLe<uint64_t>(&bytes[8]);
  uint8_t codec = std::to_integer<uint8_t>(bytes[16]);
  if (h.raw_size > limits.max_attachment_raw_size) {
    return ResourceExhausted("attachment of " + std::to_string(h.raw_size) +
                             " bytes exceeds the limit of " +
                             std::to_string(limits.max_attachment_raw_size));
  }
  switch (codec) {
    case static_cast<uint8_t>(Codec::kRaw):
      h.codec = Codec::kRaw;
      if (h.wire_size != h.raw_size) {
        return InvalidArgument("raw attachment with wire size " + std::to_string(h.wire_size) +
                               " != raw size " + std::to_string(h.raw_size));
      }
      break;
    case static_cast<uint8_t>(Codec::kZstd): {
      h.codec = Codec::kZstd;
      uint64_t bound = ZSTD_compressBound(static_cast<size_t>(h.raw_size));
      if (h.wire_size == 0 || h.wire_size > bound) {
        return InvalidArgument("zstd attachment of wire size " + std::to_string(h.wire_size) +
                               " cannot hold " + std::to_string(h.raw_size) + " bytes");
      }
      break;
    }
    default:
      return InvalidArgument("unknown attachment codec " + std::to_string(codec));
  }
  return h;
}

Status ValidateMessage(kj::ArrayPtr<const capnp::word> words) {
  try {
    capnp::FlatArrayMessageReader reader(words, WireReaderOptions());
    if (reader.getEnd() != words.end()) {
      return InvalidArgument("message is followed by " +
                             std::to_string(words.end() - reader.getEnd()) + " stray words");
    }
    reader.getRoot<capnp::AnyPointer>().targetSize();
  } catch (const kj::Exception& e) {
    return InvalidArgument(std::string("malformed message: ") + e.getDescription().cStr());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed message: ") + e.what());
  }
  return OkStatus();
}

OutAttachment OwnedAttachment(std::vector<std::byte> bytes, bool compress) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  OutAttachment a;
  a.data = owned->data();
  a.size = owned->size();
  a.compress = compress;
  a.keepalive = std::move(owned);
  return a;
}

std::vector<std::span<const std::byte>> EncodedFrame::Pieces() const {
  std::vector<std::span<const std::byte>> pieces;
  pieces.reserve(2 + 2 * payloads_.size());
  pieces.emplace_back(header_);
  auto message = message_.asBytes();
  if (message.size() > 0) {
    pieces.emplace_back(reinterpret_cast<const std::byte*>(message.begin()), message.size());
  }
  for (size_t i = 0; i < payloads_.size(); ++i) {
    pieces.emplace_back(attachment_headers_[i]);
    if (!payloads_[i].empty()) pieces.push_back(payloads_[i]);
  }
  return pieces;
}

StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options) {
  if (frame.message == nullptr) return InvalidArgument("frame has no message");
  const Limits& limits = options.limits;
  if (frame.attachments.size() > limits.max_attachments) {
    return ResourceExhausted(std::to_string(frame.attachments.size()) +
                             " attachments exceed the limit of " +
                             std::to_string(limits.max_attachments));
  }
  EncodedFrame out;
  try {
    out.message_ = capnp::messageToFlatArray(*frame.message);
  } catch (const kj::Exception& e) {
    return Internal(std::string("serializing message: ") + e.getDescription().cStr());
  }
  size_t message_bytes = out.message_.asBytes().size();
  if (message_bytes > limits.max_message_bytes) {
    return ResourceExhausted("message of " + std::to_string(message_bytes) +
                             " bytes exceeds the limit of " +
                             std::to_string(limits.max_message_bytes));
  }
  FrameHeader header;
  header.flags = frame.flags;
  header.request_id = frame.request_id;
  header.message_bytes = static_cast<uint32_t>(message_bytes);
  header.attachment_count = static_cast<uint32_t>(frame.attachments.size());
  auto header_bytes = EncodeFrameHeader(header);
  out.header_.assign(header_bytes.begin(), header_bytes.end());
  out.size_ = kFrameHeaderSize + message_bytes;

  for (OutAttachment& a : frame.attachments) {
    if (a.size > 0 && a.data == nullptr) return InvalidArgument("attachment has no data");
    if (a.size > limits.max_attachment_raw_size) {
      return ResourceExhausted("attachment of " + std::to_string(a.size) +
                               " bytes exceeds the limit of " +
                               std::to_string(limits.max_attachment_raw_size));
    }
    std::span<const std::byte> raw(static_cast<const std::byte*>(a.data), a.size);
    AttachmentHeader ah;
    ah.raw_size = a.size;
    ah.wire_size = a.size;
    ah.codec = Codec::kRaw;
    std::span<const std::byte> payload = raw;
    if (options.compression && ShouldCompress(a.size, a.compress)) {
      REMEX_ASSIGN_OR_RETURN(std::vector<std::byte> z,
                             ZstdCompress(raw, options.compression_level));
      if (z.size() < raw.size()) {
        ah.codec = Codec::kZstd;
        ah.wire_size = z.size();
        out.compressed_.push_back(std::move(z));
        payload = out.compressed_.back();  // the vector's heap buffer does not move
      }
    }
    auto ah_bytes = EncodeAttachmentHeader(ah);
    out.attachment_headers_.emplace_back(ah_bytes.begin(), ah_bytes.end());
    out.payloads_.push_back(payload);
    out.size_ += kAttachmentHeaderSize + ah.wire_size;
    if (a.keepalive) out.keepalive_.push_back(std::move(a.keepalive));
  }
  return out;
}

std::vector<std::byte> Flatten(const EncodedFrame& encoded) {
  std::vector<std::byte> out;
  out.reserve(encoded.size());
  for (std::span<const std::byte> piece : encoded.Pieces()) {
    out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

StatusOr<Frame> DecodeFrame(std::span<const std::byte> bytes, const Limits& limits) {
  REMEX_ASSIGN_OR_RETURN(FrameHeader header, DecodeFrameHeader(bytes));
  REMEX_RETURN_IF_ERROR(CheckFrameHeader(header, limits));
  bytes = bytes.subspan(kFrameHeaderSize);
  Frame frame;
  frame.request_id = header.request_id;
  frame.flags = header.flags;
  frame.major = header.major;
  frame.minor = header.minor;
  if (bytes.size() < header.message_bytes) return InvalidArgument("truncated message");
  frame.message = kj::heapArray<capnp::word>(header.message_bytes / sizeof(capnp::word));
  std::memcpy(frame.message.begin(), bytes.data(), header.message_bytes);
  bytes = bytes.subspan(header.message_bytes);
  REMEX_RETURN_IF_ERROR(ValidateMessage(frame.message.asPtr()));

  frame.attachments.resize(header.attachment_count);
  AttachmentReader reader;
  for (uint32_t i = 0; i < header.attachment_count; ++i) {
    REMEX_ASSIGN_OR_RETURN(AttachmentHeader ah, DecodeAttachmentHeader(bytes, limits));
    bytes = bytes.subspan(kAttachmentHeaderSize);
    if (bytes.size() < ah.wire_size) {
      return InvalidArgument("truncated attachment " + std::to_string(i));
    }
    REMEX_RETURN_IF_ERROR(reader.Begin(ah, &frame.attachments[i]));
    while (!reader.done()) {
      std::span<std::byte> buf = reader.NextBuffer();
      std::memcpy(buf.data(), bytes.data(), buf.size());
      bytes = bytes.subspan(buf.size());
      REMEX_RETURN_IF_ERROR(reader.Commit().WithContext("attachment " + std::to_string(i)));
    }
  }
  if (!bytes.empty()) {
    return InvalidArgument(std::to_string(bytes.size()) + " trailing bytes after the frame");
  }
  return frame;
}

AttachmentReader::AttachmentReader() = default;
AttachmentReader::~AttachmentReader() = default;

Status AttachmentReader::Begin(const AttachmentHeader& header, std::vector<std::byte>* out) {
  header_ = header;
  out_ = out;
  wire_left_ = header.wire_size;
  pending_ = {};
  out->clear();
  if (header.codec == Codec::kZstd) {
    if (zstd_ == nullptr) zstd_ = std::make_unique<ZstdStreamDecompressor>();
    return zstd_->Begin(header.raw_size, out);
  }
  try {
    out->reserve(static_cast<size_t>(header.raw_size));
  } catch (const std::exception&) {
    return ResourceExhausted("no memory for an attachment of " +
                             std::to_string(header.raw_size) + " bytes");
  }
  return OkStatus();
}

std::span<std::byte> AttachmentReader::NextBuffer() {
  size_t n = static_cast<size_t>(std::min<uint64_t>(wire_left_, kChunkBytes));
  if (header_.codec == Codec::kRaw) {
    // Capacity was reserved in Begin, so growing does not reallocate.
    size_t old = out_->size();
    out_->resize(old + n);
    pending_ = std::span<std::byte>(out_->data() + old, n);
  } else {
    if (scratch_.size() < n) scratch_.resize(n);
    pending_ = std::span<std::byte>(scratch_.data(), n);
  }
  return pending_;
}

Status AttachmentReader::Commit() {
  wire_left_ -= pending_.size();
  if (header_.codec == Codec::kZstd) {
    REMEX_RETURN_IF_ERROR(zstd_->Feed(pending_));
    if (wire_left_ == 0) REMEX_RETURN_IF_ERROR(zstd_->Finish());
  }
  pending_ = {};
  return OkStatus();
}

}  // namespace remex::rpc
