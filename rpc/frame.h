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
//     AttachmentHeader  24 bytes: raw_size u64 | wire_size u64 | codec u8 |
//                       element_size u8 (chunked codec only; reserved otherwise) |
//                       6 reserved
//     payload           wire_size bytes, by codec:
//       kRaw (0)        the raw_size bytes
//       kZstd (1)       one zstd frame of raw_size bytes
//       kChunked (2)    (minor >= 1) the attachment cut into chunks of
//                       kAttachmentChunkBytes (1 MiB; the last one shorter), each coded
//                       on its own:
//                         chunk table    ChunkCount(raw_size) entries of 8 bytes:
//                                        wire_size u32 | chunk codec u8 | 3 reserved
//                         chunk payloads in order, each wire_size bytes:
//                           kRaw (0)          the chunk's bytes (wire_size == its size)
//                           kZstd (1)         one zstd frame of the chunk
//                           kShuffledZstd (2) one zstd frame of the chunk after
//                                             ByteShuffle (rpc/compression.h) with the
//                                             header's element_size (2, 4 or 8); a tail
//                                             that is not a whole element is left in
//                                             place
//                           kFill (3)         (minor >= 3) the chunk is one pattern
//                                             repeated: wire_size is the pattern's
//                                             length, max(1, the header's
//                                             element_size), and byte i of the chunk
//                                             is pattern[i % length] (a zero or
//                                             constant tensor costs a few bytes and a
//                                             fill, no decompression)
//                       The table entries' wire sizes add up to wire_size minus the
//                       table. Chunks are independent, so a receiver decodes them one by
//                       one straight into the destination with bounded scratch memory
//                       (about two chunks), and a sender in CompressionMode::kAuto sends
//                       raw the chunks that do not compress.
//
// Versions: a peer announces its minor in every frame header. A sender uses kChunked
// only towards a peer whose minor is >= kMinorChunked (EncodeOptions::peer_minor); older
// peers get kRaw / kZstd attachments as in minor 0.
//
// Reserved fields are written as zero and ignored when read, so that a minor version
// may use them. Every length is checked against `Limits` before anything is allocated.
//
// This header holds the codec pieces shared by the transport (rpc/transport.h) and the
// in-memory EncodeFrame / DecodeFrame used by tests and tools.
#pragma once

#include <array>
#include <atomic>
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
inline constexpr uint16_t kProtocolMinor = 6;
// The first minor version that understands Codec::kChunked.
inline constexpr uint16_t kMinorChunked = 1;
// The first minor version that answers listHandles.
inline constexpr uint16_t kMinorListHandles = 2;
// Minor 3: ChunkCodec::kFill, and farm devices that take a lease's signature
// (Authenticate).
inline constexpr uint16_t kMinorFillChunks = 3;
inline constexpr uint16_t kMinorLeaseSignature = 3;
// Minor 4: loadTest (server-generated load scenarios) and ModuleLoadReply.loadNanos.
inline constexpr uint16_t kMinorLoadTest = 4;
// Minor 5: Profile.runs and .trace, ProfileReply's per-node rows, run totals and trace
// (older servers answer with one run and no nodes; the client reads that as such).
inline constexpr uint16_t kMinorProfileNodes = 5;
// Minor 6: TensorAlloc.fill (tensors filled on the server: uniform, normal), and
// HandleInfo.heldBytes (what each handle keeps of the session's memory).
inline constexpr uint16_t kMinorTensorFill = 6;
inline constexpr uint16_t kMinorHeldBytes = 6;
// Minor 6 too: progress (how far another session's benchmark, loadTest or profile is).
inline constexpr uint16_t kMinorProgress = 6;
inline constexpr uint16_t kDefaultPort = 9190;

inline constexpr std::array<std::byte, 4> kFrameMagic = {std::byte{'R'}, std::byte{'M'},
                                                         std::byte{'X'}, std::byte{'F'}};
inline constexpr size_t kFrameHeaderSize = 32;
inline constexpr size_t kAttachmentHeaderSize = 24;

// Attachment payload encoding on the wire.
enum class Codec : uint8_t {
  kRaw = 0,
  kZstd = 1,
  kChunked = 2,
};

// Encoding of one chunk of a kChunked attachment.
enum class ChunkCodec : uint8_t {
  kRaw = 0,
  kZstd = 1,
  kShuffledZstd = 2,
  kFill = 3,
};

// The largest raw / wire ratio of a zstd chunk (or of a whole zstd attachment) a
// sender produces: a chunk that would compress further is a repeated pattern (sent as
// kFill) or highly periodic data, sent raw instead. The server's default
// max_decompression_ratio, so that a Remex client never meets it while a zstd bomb
// (up to about 32,000 to 1) is refused before it is decompressed. Measured ratios of
// real tensors: docs/security.md.
inline constexpr uint32_t kMaxCompressionRatio = 1024;

// The pattern length of a kFill chunk of an attachment of `element_size`.
inline size_t FillPatternBytes(uint8_t element_size) { return element_size > 1 ? element_size : 1; }

// Raw bytes per chunk of a kChunked attachment (the last chunk holds the rest).
inline constexpr size_t kAttachmentChunkBytes = size_t{1} << 20;
inline constexpr size_t kChunkEntrySize = 8;

// Chunks of a kChunked attachment of `raw_size` bytes: ceil(raw_size / 1 MiB).
inline uint64_t ChunkCount(uint64_t raw_size) {
  return raw_size / kAttachmentChunkBytes + (raw_size % kAttachmentChunkBytes != 0 ? 1 : 0);
}

// One entry of a chunk table.
struct ChunkEntry {
  uint32_t wire_size = 0;
  ChunkCodec codec = ChunkCodec::kRaw;
};

// What a receiver accepts. Checked on the declared lengths, before allocating.
struct Limits {
  uint32_t max_message_bytes = 64u << 20;              // 64 MiB
  uint32_t max_attachments = 64;
  uint64_t max_attachment_raw_size = uint64_t{8} << 30;  // 8 GiB
  // Raw bytes of all the attachments of one frame together (RESOURCE_EXHAUSTED past it,
  // checked as each attachment header arrives, before its payload is read).
  uint64_t max_frame_attachment_bytes = uint64_t{8} << 30;  // 8 GiB
  // Largest raw size / wire size of what is decompressed: a whole zstd attachment
  // (checked on its header) or each zstd chunk of a chunked one (checked on the chunk
  // table); either way before any payload is decompressed (RESOURCE_EXHAUSTED past it).
  // kFill chunks are exempt: they cost a fill, not a decompression. 0: no cap. Remex
  // senders stay within kMaxCompressionRatio.
  uint32_t max_decompression_ratio = 0;
};

// RESOURCE_EXHAUSTED when attachments of `frame_raw_bytes` raw bytes in all, the next
// one included, exceed limits.max_frame_attachment_bytes.
Status CheckFrameAttachmentBytes(uint64_t frame_raw_bytes, const Limits& limits);

// Cap'n Proto reader limits for messages from the wire: 64 Mi words traversal
// (512 MiB, well above max_message_bytes, so a handler may read fields more than once)
// and nesting 64.
capnp::ReaderOptions WireReaderOptions();

// Frame flags (FrameHeader.flags).
// Set by a client whose compression mode is kNone: the reply to this request carries
// its attachments uncompressed, so neither side spends time on zstd.
inline constexpr uint32_t kFlagUncompressedReply = 1u << 0;

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
  // Shuffle element size of kChunked attachments: 0 or 1 (none), 2, 4 or 8. Written
  // only for kChunked; always 0 after decoding any other codec.
  uint8_t element_size = 0;
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
// unknown codec, a raw attachment whose wire_size != raw_size, a zstd attachment that
// is empty or larger than ZSTD_compressBound(raw_size), or a chunked attachment whose
// element_size is not 0, 1, 2, 4 or 8 or whose wire_size cannot hold its chunk table
// and chunks; RESOURCE_EXHAUSTED when raw_size exceeds limits.max_attachment_raw_size or
// a zstd attachment's raw_size / wire_size exceeds limits.max_decompression_ratio (a
// chunked attachment's chunks are checked on its table: AttachmentReader).
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
  // Let the sender compress this attachment as its CompressionMode says (see
  // EncodeOptions); attachments not so marked, or under kMinCompressBytes, go raw.
  bool compress = false;
  std::shared_ptr<void> keepalive;
  // Bytes per element of the data (a tensor's dtype size) for the byte shuffle before
  // zstd: 2, 4 or 8 shuffle, 0 or 1 do not. Anything else is INVALID_ARGUMENT when the
  // attachment is compressed. Used only towards peers of minor >= kMinorChunked.
  uint8_t element_size = 0;
};

// An attachment that owns `bytes`.
OutAttachment OwnedAttachment(std::vector<std::byte> bytes, bool compress,
                              uint8_t element_size = 0);

// A builder for a frame's message. Its first segment is kFirstSegmentWords (1 KiB):
// most requests and replies fit in it, and a larger message grows into further
// segments. Cap'n Proto's default first segment is 8 KiB, zero-filled on every
// allocation, which cost a small call more than its message did.
inline constexpr unsigned kFirstSegmentWords = 128;
inline std::unique_ptr<capnp::MallocMessageBuilder> NewMessage() {
  return std::make_unique<capnp::MallocMessageBuilder>(kFirstSegmentWords);
}

// A frame to send. `message` must be set.
struct OutFrame {
  uint64_t request_id = 0;
  uint32_t flags = 0;
  std::unique_ptr<capnp::MallocMessageBuilder> message;
  std::vector<OutAttachment> attachments;
};

// A received frame. `message` has passed ValidateMessage; `attachments` hold the
// decoded (decompressed) payloads in order, except those a ConnectionHandler had
// written straight into its own memory (rpc/transport.h,
// ConnectionHandler::AttachmentDestination): those are empty here and marked in
// `attachment_in_place`.
struct Frame {
  uint64_t request_id = 0;
  uint32_t flags = 0;
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  kj::Array<capnp::word> message;
  std::vector<std::vector<std::byte>> attachments;
  // Same length as `attachments` once the frame is received; true where the attachment
  // went to a destination chosen by the handler instead of `attachments`.
  std::vector<bool> attachment_in_place;

  // A reader over `message` with WireReaderOptions(). Borrows `message`: the Frame must
  // outlive the reader.
  capnp::FlatArrayMessageReader Reader() const {
    return capnp::FlatArrayMessageReader(message.asPtr(), WireReaderOptions());
  }
};

struct EncodeOptions {
  // What happens to attachments marked `compress` (a CompressionMode, or a bool: true =
  // kAuto, false = kNone).
  CompressionSetting compression = CompressionMode::kAuto;
  int compression_level = kDefaultCompressionLevel;
  // The receiver's protocol minor: below kMinorChunked, attachments are sent whole, raw
  // or as one unshuffled zstd frame (kAuto keeps it when it is at most 90 % of raw).
  uint16_t peer_minor = kProtocolMinor;
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
  // Appends Pieces() to `pieces`.
  void AppendPieces(std::vector<std::span<const std::byte>>& pieces) const;
  // Every byte of the frame.
  uint64_t size() const { return size_; }
  // Attachment payload bytes before coding (sum of raw_size) and on the wire (sum of
  // wire_size; attachment headers not counted).
  uint64_t attachment_raw_bytes() const { return attachment_raw_bytes_; }
  uint64_t attachment_wire_bytes() const { return attachment_wire_bytes_; }

 private:
  friend StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options);

  // Copies `bytes` into storage that stays put for the life of this object.
  std::span<const std::byte> Store(std::span<const std::byte> bytes);

  std::vector<std::byte> header_;
  kj::Array<capnp::word> message_;
  std::vector<std::vector<std::byte>> attachment_headers_;
  // Per attachment, its payload pieces in order (empty pieces omitted).
  std::vector<std::vector<std::span<const std::byte>>> payloads_;
  // Storage behind the pieces that are not borrowed: blocks that are never grown past
  // their capacity, so their bytes do not move.
  std::vector<std::vector<std::byte>> storage_;
  std::vector<std::shared_ptr<void>> keepalive_;
  uint64_t size_ = 0;
  uint64_t attachment_raw_bytes_ = 0;
  uint64_t attachment_wire_bytes_ = 0;
};

// Serializes `frame`, coding attachments per OutAttachment::compress / element_size and
// `options` (see the header comment). Raw attachments and raw chunks stay borrowed from
// `frame`; compressed chunks are held by the EncodedFrame. Moves the keepalives out of
// `frame`. Compression runs on the calling thread. INVALID_ARGUMENT when the message is
// missing, an attachment has size > 0 and no data, or a compressed attachment's
// element_size is not 0, 1, 2, 4 or 8; RESOURCE_EXHAUSTED when the frame exceeds
// options.limits; INTERNAL when zstd fails.
StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options);

// Concatenates the pieces into one buffer (tests, tools; the transport writes the
// pieces directly).
std::vector<std::byte> Flatten(const EncodedFrame& encoded);

// Decodes one complete frame from memory. Errors as in DecodeFrameHeader,
// CheckFrameHeader, DecodeAttachmentHeader and ValidateMessage; INVALID_ARGUMENT for
// truncated input, trailing bytes or a corrupt zstd payload.
StatusOr<Frame> DecodeFrame(std::span<const std::byte> bytes, const Limits& limits);

// Receives one attachment payload in bounded steps, straight into its destination:
//  - kRaw: read into the destination in steps of at most kReadStepBytes;
//  - kZstd: read through a scratch buffer of at most kReadStepBytes and decompressed
//    into the destination as it arrives;
//  - kChunked: the chunk table, then each chunk: a raw chunk is read straight into its
//    place in the destination, a compressed one into a scratch buffer and decompressed
//    (and unshuffled) into its place.
// The destination is either a vector that grows as data arrives (memory follows the
// data the peer actually sent, not what it declared), or a caller's span of exactly
// raw_size bytes.
//
//   AttachmentReader r;
//   r.Begin(header, &out);   // or r.Begin(header, span)
//   while (!r.done()) { auto buf = r.NextBuffer(); <fill all of buf>; r.Commit(); }
//
// After an error the reader must be restarted with Begin; the destination may be
// partly written. Not thread-safe.
class AttachmentReader {
 public:
  static constexpr size_t kReadStepBytes = 4u << 20;
  // Commits that decompress at least this many bytes are worth moving off an I/O thread.
  static constexpr uint64_t kHeavyCommitBytes = uint64_t{256} << 10;

  AttachmentReader();
  ~AttachmentReader();
  AttachmentReader(const AttachmentReader&) = delete;
  AttachmentReader& operator=(const AttachmentReader&) = delete;

  // `header` must come from DecodeAttachmentHeader. `out` is cleared, its capacity
  // reserved, and must outlive the reading. RESOURCE_EXHAUSTED when that fails.
  Status Begin(const AttachmentHeader& header, std::vector<std::byte>* out);
  // Decodes into `destination` (borrowed, must outlive the reading).
  // INVALID_ARGUMENT unless destination.size() == header.raw_size.
  Status Begin(const AttachmentHeader& header, std::span<std::byte> destination);
  bool done() const { return wire_left_ == 0; }
  // The span the next wire bytes must fill completely; valid until Commit(). Only
  // while !done().
  std::span<std::byte> NextBuffer();
  // Consumes the bytes written into the last NextBuffer(). INVALID_ARGUMENT for a
  // corrupt zstd payload or chunk, one whose content size is not as declared, or a
  // chunk table that does not match the header; RESOURCE_EXHAUSTED for a table whose
  // zstd chunk exceeds the max_decompression_ratio (SetLimits), or when the memory
  // for the output cannot be had; CANCELLED when the cancel flag (SetCancel) is set
  // while decompressing (checked every 4 MiB of output).
  Status Commit();
  // Whether the next Commit() decompresses kHeavyCommitBytes or more.
  bool HeavyCommit() const;

  // The ratio cap checked on chunk tables (Limits::max_decompression_ratio; 0: none).
  void SetLimits(const Limits& limits) { max_ratio_ = limits.max_decompression_ratio; }
  // A flag (borrowed, outliving the reader) that stops a decompression in progress.
  void SetCancel(const std::atomic<bool>* cancel);

 private:
  enum class Phase : uint8_t { kWhole, kTable, kChunk };

  Status Start(const AttachmentHeader& header);
  // The destination bytes [offset, offset + n), growing the vector if needed.
  std::span<std::byte> Output(uint64_t offset, size_t n);
  Status ParseTable();
  Status DecodeChunk();
  Status CommitStep();

  AttachmentHeader header_;
  std::vector<std::byte>* out_ = nullptr;  // growing destination, or
  std::span<std::byte> fixed_;             // a fixed one
  uint64_t produced_ = 0;                  // raw bytes written so far (kRaw, kChunked)
  uint64_t wire_left_ = 0;
  Phase phase_ = Phase::kWhole;
  std::span<std::byte> pending_;
  // Wire bytes of a compressed payload or chunk table, before decoding.
  std::span<std::byte> Scratch(size_t n);
  std::unique_ptr<std::byte[]> scratch_;
  size_t scratch_bytes_ = 0;
  std::vector<std::byte> unshuffle_scratch_;
  std::vector<ChunkEntry> chunks_;
  size_t next_chunk_ = 0;
  std::unique_ptr<ZstdStreamDecompressor> zstd_;
  std::unique_ptr<ZstdCodec> codec_;
  uint32_t max_ratio_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace remex::rpc
