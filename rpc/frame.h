// Remex wire framing.
//
// A frame is
//
//   FrameHeader       32 bytes, little-endian:
//                       magic "RMXF" | major u16 | minor u16 | flags u32 | reserved u32 |
//                       request_id u64 | message_bytes u32 | attachment_count u32
//   message           message_bytes bytes: one Cap'n Proto message in flat-array form
//                     (segment table + segments, a multiple of 8 bytes)
//   attachment_count times:
//     AttachmentHeader  24 bytes: raw_size u64 | wire_size u64 | codec u8 | 7 reserved
//     payload           wire_size bytes, raw or one zstd frame of raw_size bytes
//
// Reserved fields are written as zero and ignored when read, so that a minor version
// may use them. Every length is checked against `Limits` before anything is allocated.
//
// This header holds the codec pieces shared by the transport (rpc/transport.h) and the
// in-memory EncodeFrame / DecodeFrame used by tests and tools.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include "base/status.h"
#include "rpc/compression.h"

namespace remex::rpc {

inline constexpr uint16_t kProtocolMajor = 1;
inline constexpr uint16_t kProtocolMinor = 0;
inline constexpr uint16_t kDefaultPort = 9190;

inline constexpr std::array<std::byte, 4> kFrameMagic = {std::byte{'R'}, std::byte{'M'},
                                                         std::byte{'X'}, std::byte{'F'}};
inline constexpr size_t kFrameHeaderSize = 32;
inline constexpr size_t kAttachmentHeaderSize = 24;

// Attachment payload encoding on the wire.
enum class Codec : uint8_t {
  kRaw = 0,
  kZstd = 1,
};

// What a receiver accepts. Checked on the declared lengths, before allocating.
struct Limits {
  uint32_t max_message_bytes = 64u << 20;              // 64 MiB
  uint32_t max_attachments = 64;
  uint64_t max_attachment_raw_size = uint64_t{8} << 30;  // 8 GiB
};

// Cap'n Proto reader limits for messages from the wire: 64 Mi words traversal
// (512 MiB, well above max_message_bytes, so a handler may read fields more than once)
// and nesting 64.
capnp::ReaderOptions WireReaderOptions();

struct FrameHeader {
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  uint32_t flags = 0;
  uint64_t request_id = 0;
  uint32_t message_bytes = 0;
  uint32_t attachment_count = 0;
};

struct AttachmentHeader {
  uint64_t raw_size = 0;
  uint64_t wire_size = 0;
  Codec codec = Codec::kRaw;
};

std::array<std::byte, kFrameHeaderSize> EncodeFrameHeader(const FrameHeader& header);

// Parses the fixed header. INVALID_ARGUMENT when `bytes` is shorter than
// kFrameHeaderSize or the magic is wrong. Does not check versions or limits (see
// CheckFrameHeader), so the request id of a frame that fails those is still known.
StatusOr<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes);

// FAILED_PRECONDITION when the major version differs from kProtocolMajor (the message
// names both versions); INVALID_ARGUMENT when message_bytes is not a multiple of 8;
// RESOURCE_EXHAUSTED when message_bytes or attachment_count exceed `limits`.
Status CheckFrameHeader(const FrameHeader& header, const Limits& limits);

std::array<std::byte, kAttachmentHeaderSize> EncodeAttachmentHeader(const AttachmentHeader& header);

// Parses and checks an attachment header: INVALID_ARGUMENT for a short buffer, an
// unknown codec, a raw attachment whose wire_size != raw_size, or a zstd attachment
// that is empty or larger than ZSTD_compressBound(raw_size); RESOURCE_EXHAUSTED when
// raw_size exceeds limits.max_attachment_raw_size.
StatusOr<AttachmentHeader> DecodeAttachmentHeader(std::span<const std::byte> bytes,
                                                  const Limits& limits);

// Checks that `words` is exactly one well-formed Cap'n Proto message under
// WireReaderOptions(): the segment table, every pointer and every bound (a full
// traversal). INVALID_ARGUMENT with capnp's description otherwise. After this, reading
// the message cannot throw unless a reader exceeds the traversal limit.
Status ValidateMessage(kj::ArrayPtr<const capnp::word> words);

// Bytes to send: borrowed from the caller, who keeps them alive until the send
// completes. `keepalive` (optional) is held until then too, so a frame can own its
// payload (see OwnedAttachment).
struct OutAttachment {
  const void* data = nullptr;
  size_t size = 0;
  // Compress with zstd when compression is enabled on the sender and size >=
  // kMinCompressBytes; sent raw when the compressed form is not smaller.
  bool compress = false;
  std::shared_ptr<void> keepalive;
};

// An attachment that owns `bytes`.
OutAttachment OwnedAttachment(std::vector<std::byte> bytes, bool compress);

// A frame to send. `message` must be set.
struct OutFrame {
  uint64_t request_id = 0;
  uint32_t flags = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> message;
  std::vector<OutAttachment> attachments;
};

// A received frame. `message` has passed ValidateMessage; `attachments` hold the
// decoded (decompressed) payloads in order.
struct Frame {
  uint64_t request_id = 0;
  uint32_t flags = 0;
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  kj::Array<capnp::word> message;
  std::vector<std::vector<std::byte>> attachments;

  // A reader over `message` with WireReaderOptions(). Borrows `message`: the Frame must
  // outlive the reader.
  capnp::FlatArrayMessageReader Reader() const {
    return capnp::FlatArrayMessageReader(message.asPtr(), WireReaderOptions());
  }
};

struct EncodeOptions {
  bool compression = true;
  int compression_level = 1;
  // The sender refuses (INVALID_ARGUMENT / RESOURCE_EXHAUSTED) what a peer with these
  // limits would refuse.
  Limits limits;
};

// A frame serialized for a gather write: the small pieces are owned here, attachment
// payloads sent raw stay borrowed from the OutFrame (whose keepalives are held here).
// Movable; Pieces() stay valid across moves.
class EncodedFrame {
 public:
  // The wire bytes in order: header, message, then per attachment its header and
  // payload. Empty payloads are omitted.
  std::vector<std::span<const std::byte>> Pieces() const;
  uint64_t size() const { return size_; }

 private:
  friend StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options);

  std::vector<std::byte> header_;
  kj::Array<capnp::word> message_;
  std::vector<std::vector<std::byte>> attachment_headers_;
  std::vector<std::span<const std::byte>> payloads_;
  std::vector<std::vector<std::byte>> compressed_;  // storage behind some payloads_
  std::vector<std::shared_ptr<void>> keepalive_;
  uint64_t size_ = 0;
};

// Serializes `frame` (compressing attachments per OutAttachment::compress and
// `options`). Moves the keepalives out of `frame`. INVALID_ARGUMENT when the message is
// missing or an attachment has size > 0 and no data; RESOURCE_EXHAUSTED when the frame
// exceeds options.limits.
StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options);

// Concatenates the pieces into one buffer (tests, tools; the transport writes the
// pieces directly).
std::vector<std::byte> Flatten(const EncodedFrame& encoded);

// Decodes one complete frame from memory. Errors as in DecodeFrameHeader,
// CheckFrameHeader, DecodeAttachmentHeader and ValidateMessage; INVALID_ARGUMENT for
// truncated input, trailing bytes or a corrupt zstd payload.
StatusOr<Frame> DecodeFrame(std::span<const std::byte> bytes, const Limits& limits);

// Receives one attachment payload in bounded steps, straight into its final vector:
// raw bytes are read into `out` as it grows chunk by chunk (memory follows the data the
// peer actually sent, not what it declared); zstd bytes go through a scratch buffer of
// at most kChunkBytes and are decompressed into `out`.
//
//   AttachmentReader r;
//   r.Begin(header, &out);
//   while (!r.done()) { auto buf = r.NextBuffer(); <fill all of buf>; r.Commit(); }
//
// TODO(perf): read raw payloads straight into a destination tensor (or pinned staging
// buffer) instead of a std::vector.
class AttachmentReader {
 public:
  static constexpr size_t kChunkBytes = 4u << 20;

  AttachmentReader();
  ~AttachmentReader();
  AttachmentReader(const AttachmentReader&) = delete;
  AttachmentReader& operator=(const AttachmentReader&) = delete;

  // `header` must come from DecodeAttachmentHeader. `out` is cleared, its capacity
  // reserved, and must outlive the reading. RESOURCE_EXHAUSTED when that fails.
  Status Begin(const AttachmentHeader& header, std::vector<std::byte>* out);
  bool done() const { return wire_left_ == 0; }
  // The span the next wire bytes must fill completely; valid until Commit().
  std::span<std::byte> NextBuffer();
  // Consumes the bytes written into the last NextBuffer(). INVALID_ARGUMENT for a
  // corrupt zstd payload or one whose content size is not raw_size.
  Status Commit();

 private:
  AttachmentHeader header_;
  std::vector<std::byte>* out_ = nullptr;
  uint64_t wire_left_ = 0;
  std::span<std::byte> pending_;
  std::vector<std::byte> scratch_;
  std::unique_ptr<ZstdStreamDecompressor> zstd_;
};

}  // namespace remex::rpc
