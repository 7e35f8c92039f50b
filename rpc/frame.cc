#include "rpc/frame.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include <capnp/any.h>
#include <kj/exception.h>

#include "base/huge_pages.h"

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

Status CheckFrameAttachmentBytes(uint64_t frame_raw_bytes, const Limits& limits) {
  if (frame_raw_bytes > limits.max_frame_attachment_bytes) {
    return ResourceExhausted("attachments of " + std::to_string(frame_raw_bytes) +
                             " bytes in one frame exceed the limit of " +
                             std::to_string(limits.max_frame_attachment_bytes) + " bytes per frame");
  }
  return OkStatus();
}

std::array<std::byte, kAttachmentHeaderSize> EncodeAttachmentHeader(const AttachmentHeader& h) {
  std::array<std::byte, kAttachmentHeaderSize> out{};
  PutLe<uint64_t>(&out[0], h.raw_size);
  PutLe<uint64_t>(&out[8], h.wire_size);
  out[16] = static_cast<std::byte>(h.codec);
  if (h.codec == Codec::kChunked) out[17] = static_cast<std::byte>(h.element_size);
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
    case static_cast<uint8_t>(Codec::kChunked): {
      h.codec = Codec::kChunked;
      h.element_size = std::to_integer<uint8_t>(bytes[17]);
      if (h.element_size > 1 && !IsShuffleElementSize(h.element_size)) {
        return InvalidArgument("chunked attachment with element size " +
                               std::to_string(h.element_size) + " (0, 1, 2, 4 or 8)");
      }
      // raw_size is within limits, so these do not overflow.
      uint64_t chunks = ChunkCount(h.raw_size);
      uint64_t table = chunks * kChunkEntrySize;
      uint64_t most = table + chunks * ZstdBound(kAttachmentChunkBytes);
      if (h.wire_size < table + std::min<uint64_t>(chunks, 1) || h.wire_size > most) {
        return InvalidArgument("chunked attachment of wire size " + std::to_string(h.wire_size) +
                               " cannot hold " + std::to_string(h.raw_size) + " bytes in " +
                               std::to_string(chunks) + " chunks");
      }
      break;
    }
    default:
      return InvalidArgument("unknown attachment codec " + std::to_string(codec));
  }
  if (h.codec == Codec::kZstd && limits.max_decompression_ratio != 0 &&
      h.raw_size / limits.max_decompression_ratio > h.wire_size) {
    return ResourceExhausted("compressed attachment declares " + std::to_string(h.raw_size) + " bytes from " +
                             std::to_string(h.wire_size) + " on the wire, over the decompression ratio limit of " +
                             std::to_string(limits.max_decompression_ratio) + " (max_decompression_ratio)");
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

OutAttachment OwnedAttachment(std::vector<std::byte> bytes, bool compress,
                              uint8_t element_size) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  OutAttachment a;
  a.data = owned->data();
  a.size = owned->size();
  a.compress = compress;
  a.keepalive = std::move(owned);
  a.element_size = element_size;
  return a;
}

std::vector<std::span<const std::byte>> EncodedFrame::Pieces() const {
  std::vector<std::span<const std::byte>> pieces;
  AppendPieces(pieces);
  return pieces;
}

void EncodedFrame::AppendPieces(std::vector<std::span<const std::byte>>& pieces) const {
  pieces.emplace_back(header_);
  auto message = message_.asBytes();
  if (message.size() > 0) {
    pieces.emplace_back(reinterpret_cast<const std::byte*>(message.begin()), message.size());
  }
  for (size_t i = 0; i < payloads_.size(); ++i) {
    pieces.emplace_back(attachment_headers_[i]);
    pieces.insert(pieces.end(), payloads_[i].begin(), payloads_[i].end());
  }
}

std::span<const std::byte> EncodedFrame::Store(std::span<const std::byte> bytes) {
  constexpr size_t kBlockBytes = 4u << 20;
  if (storage_.empty() || storage_.back().capacity() - storage_.back().size() < bytes.size()) {
    storage_.emplace_back();
    // Small frames get small blocks; large attachments fill blocks of kBlockBytes.
    storage_.back().reserve(std::max(bytes.size(), std::min(kBlockBytes, 4 * bytes.size())));
  }
  std::vector<std::byte>& block = storage_.back();
  size_t at = block.size();
  block.insert(block.end(), bytes.begin(), bytes.end());  // within capacity: no move
  return std::span<const std::byte>(block.data() + at, bytes.size());
}

namespace {

// Appends `piece` to `pieces`, merging it into the last piece when contiguous.
void AddPiece(std::vector<std::span<const std::byte>>& pieces, std::span<const std::byte> piece) {
  if (piece.empty()) return;
  if (!pieces.empty() && pieces.back().data() + pieces.back().size() == piece.data()) {
    pieces.back() = std::span<const std::byte>(pieces.back().data(),
                                               pieces.back().size() + piece.size());
    return;
  }
  pieces.push_back(piece);
}

// Whether `bytes` is its first `period` bytes repeated (the last repetition possibly
// cut short): a kFill chunk. Comparing the bytes with themselves shifted by `period`
// checks it in one pass.
bool IsRepeatedPattern(std::span<const std::byte> bytes, size_t period) {
  if (bytes.size() < period) return false;
  return std::memcmp(bytes.data(), bytes.data() + period, bytes.size() - period) == 0;
}

// Whether `raw` bytes sent as `wire` stay within kMaxCompressionRatio, the server's
// default max_decompression_ratio; past it they go raw.
bool WithinCompressionRatio(uint64_t raw, uint64_t wire) { return raw / kMaxCompressionRatio <= wire; }

template <typename T>
void PutLeVec(std::vector<std::byte>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

}  // namespace

StatusOr<EncodedFrame> EncodeFrame(OutFrame& frame, const EncodeOptions& options) {
  if (frame.message == nullptr) return InvalidArgument("frame has no message");
  const Limits& limits = options.limits;
  if (frame.attachments.size() > limits.max_attachments) {
    return ResourceExhausted(std::to_string(frame.attachments.size()) +
                             " attachments exceed the limit of " +
                             std::to_string(limits.max_attachments));
  }
  uint64_t frame_raw_bytes = 0;
  for (const OutAttachment& a : frame.attachments) {
    // Each is checked against max_attachment_raw_size below; saturate meanwhile.
    frame_raw_bytes += std::min<uint64_t>(a.size, limits.max_attachment_raw_size + 1);
  }
  REMEX_RETURN_IF_ERROR(CheckFrameAttachmentBytes(frame_raw_bytes, limits));
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

  const bool chunked = options.peer_minor >= kMinorChunked;
  std::unique_ptr<ZstdCodec> codec;           // created on first use
  std::vector<std::byte> shuffled;            // one chunk, shuffled
  std::vector<std::byte> compressed;          // one chunk (or a whole legacy attachment)
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
    std::vector<std::span<const std::byte>> pieces;
    bool keep_all = options.compression == CompressionMode::kZstd;
    if (ShouldCompress(a.size, a.compress, options.compression)) {
      if (a.element_size > 1 && !IsShuffleElementSize(a.element_size)) {
        return InvalidArgument("attachment element size " + std::to_string(a.element_size) +
                               " is not 0, 1, 2, 4 or 8");
      }
      if (codec == nullptr) codec = std::make_unique<ZstdCodec>();
      if (!chunked) {
        // Minor 0 peer: one unshuffled zstd frame for the whole attachment.
        compressed.resize(ZstdBound(a.size));
        REMEX_ASSIGN_OR_RETURN(size_t n,
                               codec->Compress(raw, options.compression_level, compressed));
        if (n < a.size && (keep_all || WorthCompressing(a.size, n)) && WithinCompressionRatio(a.size, n)) {
          ah.codec = Codec::kZstd;
          ah.wire_size = n;
          pieces.push_back(out.Store(std::span<const std::byte>(compressed.data(), n)));
        }
      } else {
        const bool shuffle = IsShuffleElementSize(a.element_size);
        const bool fill = options.peer_minor >= kMinorFillChunks;
        const size_t pattern = FillPatternBytes(shuffle ? a.element_size : 0);
        const uint64_t chunk_count = ChunkCount(a.size);
        std::vector<std::byte> table;
        table.reserve(static_cast<size_t>(chunk_count * kChunkEntrySize));
        std::vector<std::span<const std::byte>> chunk_pieces;
        bool any_compressed = false;
        uint64_t wire = chunk_count * kChunkEntrySize;
        compressed.resize(ZstdBound(kAttachmentChunkBytes));
        for (uint64_t c = 0; c < chunk_count; ++c) {
          std::span<const std::byte> chunk = raw.subspan(
              c * kAttachmentChunkBytes,
              std::min<size_t>(kAttachmentChunkBytes, a.size - c * kAttachmentChunkBytes));
          ChunkCodec chunk_codec = ChunkCodec::kRaw;
          std::span<const std::byte> payload = chunk;
          if (fill && IsRepeatedPattern(chunk, pattern)) {
            chunk_codec = ChunkCodec::kFill;
            payload = out.Store(chunk.first(pattern));
            any_compressed = true;
          } else {
            std::span<const std::byte> input = chunk;
            if (shuffle) {
              shuffled.resize(chunk.size());
              ByteShuffle(chunk, shuffled, a.element_size);
              input = shuffled;
            }
            REMEX_ASSIGN_OR_RETURN(size_t n, codec->Compress(input, options.compression_level, compressed));
            if ((keep_all || WorthCompressing(chunk.size(), n)) && WithinCompressionRatio(chunk.size(), n)) {
              chunk_codec = shuffle ? ChunkCodec::kShuffledZstd : ChunkCodec::kZstd;
              payload = out.Store(std::span<const std::byte>(compressed.data(), n));
              any_compressed = true;
            }
          }
          PutLeVec<uint32_t>(table, static_cast<uint32_t>(payload.size()));
          table.push_back(static_cast<std::byte>(chunk_codec));
          for (int i = 0; i < 3; ++i) table.push_back(std::byte{0});
          AddPiece(chunk_pieces, payload);
          wire += payload.size();
        }
        if (any_compressed) {  // else the attachment goes as plain kRaw
          ah.codec = Codec::kChunked;
          ah.element_size = shuffle ? a.element_size : 0;
          ah.wire_size = wire;
          pieces.push_back(out.Store(table));
          for (std::span<const std::byte> piece : chunk_pieces) AddPiece(pieces, piece);
        }
      }
    }
    if (ah.codec == Codec::kRaw) AddPiece(pieces, raw);
    auto ah_bytes = EncodeAttachmentHeader(ah);
    out.attachment_headers_.emplace_back(ah_bytes.begin(), ah_bytes.end());
    out.payloads_.push_back(std::move(pieces));
    out.size_ += kAttachmentHeaderSize + ah.wire_size;
    out.attachment_raw_bytes_ += ah.raw_size;
    out.attachment_wire_bytes_ += ah.wire_size;
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
  frame.attachment_in_place.assign(header.attachment_count, false);
  AttachmentReader reader;
  reader.SetLimits(limits);
  uint64_t frame_raw_bytes = 0;
  for (uint32_t i = 0; i < header.attachment_count; ++i) {
    REMEX_ASSIGN_OR_RETURN(AttachmentHeader ah, DecodeAttachmentHeader(bytes, limits));
    frame_raw_bytes += ah.raw_size;  // each raw_size is within limits: no overflow
    REMEX_RETURN_IF_ERROR(CheckFrameAttachmentBytes(frame_raw_bytes, limits));
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

Status AttachmentReader::Start(const AttachmentHeader& header) {
  header_ = header;
  out_ = nullptr;
  fixed_ = {};
  produced_ = 0;
  wire_left_ = header.wire_size;
  pending_ = {};
  chunks_.clear();
  next_chunk_ = 0;
  phase_ = header.codec == Codec::kChunked ? Phase::kTable : Phase::kWhole;
  return OkStatus();
}

void AttachmentReader::SetCancel(const std::atomic<bool>* cancel) {
  cancel_ = cancel;
  if (zstd_ != nullptr) zstd_->SetCancel(cancel);
}

bool AttachmentReader::HeavyCommit() const {
  switch (phase_) {
    case Phase::kWhole:
      return header_.codec == Codec::kZstd && header_.raw_size >= kHeavyCommitBytes;
    case Phase::kTable:
      return false;
    case Phase::kChunk: {
      const ChunkEntry& entry = chunks_[next_chunk_];
      return (entry.codec == ChunkCodec::kZstd || entry.codec == ChunkCodec::kShuffledZstd) &&
             std::min<uint64_t>(kAttachmentChunkBytes, header_.raw_size - produced_) >= kHeavyCommitBytes;
    }
  }
  return false;
}

Status AttachmentReader::Begin(const AttachmentHeader& header, std::vector<std::byte>* out) {
  REMEX_RETURN_IF_ERROR(Start(header));
  out_ = out;
  out->clear();
  if (header.codec == Codec::kZstd) {
    if (zstd_ == nullptr) {
      zstd_ = std::make_unique<ZstdStreamDecompressor>();
      zstd_->SetCancel(cancel_);
    }
    return zstd_->Begin(header.raw_size, out);
  }
  // Only the first bytes are reserved: a declared size is a claim, and the vector
  // grows (geometrically) only as the payload's bytes really arrive.
  try {
    out->reserve(static_cast<size_t>(std::min<uint64_t>(header.raw_size, kInitialReserveBytes)));
    AdviseHugePages(out->data(), out->capacity());
  } catch (const std::exception&) {
    return ResourceExhausted("no memory for an attachment of " +
                             std::to_string(header.raw_size) + " bytes");
  }
  return OkStatus();
}

Status AttachmentReader::Begin(const AttachmentHeader& header, std::span<std::byte> destination) {
  if (destination.size() != header.raw_size) {
    return InvalidArgument("destination of " + std::to_string(destination.size()) +
                           " bytes for an attachment of " + std::to_string(header.raw_size));
  }
  REMEX_RETURN_IF_ERROR(Start(header));
  fixed_ = destination;
  if (header.codec == Codec::kZstd) {
    if (zstd_ == nullptr) {
      zstd_ = std::make_unique<ZstdStreamDecompressor>();
      zstd_->SetCancel(cancel_);
    }
    return zstd_->Begin(destination);
  }
  return OkStatus();
}

std::span<std::byte> AttachmentReader::Output(uint64_t offset, size_t n) {
  if (out_ == nullptr) return fixed_.subspan(static_cast<size_t>(offset), n);
  // The vector grows geometrically, so receiving N bytes copies O(N) bytes in all; each
  // new capacity is backed by huge pages before its first touch (base/huge_pages.h).
  const size_t end = static_cast<size_t>(offset + n);
  if (out_->capacity() < end) {
    std::vector<std::byte> grown;
    grown.reserve(std::max(end, 2 * out_->capacity()));
    AdviseHugePages(grown.data(), grown.capacity());
    grown.assign(out_->begin(), out_->end());
    *out_ = std::move(grown);
  }
  if (out_->size() < end) out_->resize(end);
  return std::span<std::byte>(out_->data() + offset, n);
}

std::span<std::byte> AttachmentReader::Scratch(size_t n) {
  if (scratch_bytes_ < n) {
    // Not cleared: the socket writes it before it is read, so a peer that declares much
    // and sends little makes the server touch (hold resident) only what it sent.
    scratch_.reset(new std::byte[n]);
    scratch_bytes_ = n;
  }
  return std::span<std::byte>(scratch_.get(), n);
}

std::span<std::byte> AttachmentReader::NextBuffer() {
  switch (phase_) {
    case Phase::kWhole: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(wire_left_, kReadStepBytes));
      if (header_.codec == Codec::kRaw) {
        pending_ = Output(produced_, n);
      } else {
        pending_ = Scratch(n);
      }
      break;
    }
    case Phase::kTable: {
      // Bounded: raw_size is within limits and wire_size holds the table.
      size_t n = static_cast<size_t>(ChunkCount(header_.raw_size) * kChunkEntrySize);
      pending_ = Scratch(n);
      break;
    }
    case Phase::kChunk: {
      const ChunkEntry& entry = chunks_[next_chunk_];
      if (entry.codec == ChunkCodec::kRaw) {
        pending_ = Output(produced_, entry.wire_size);
      } else {
        pending_ = Scratch(entry.wire_size);
      }
      break;
    }
  }
  return pending_;
}

Status AttachmentReader::ParseTable() {
  uint64_t count = ChunkCount(header_.raw_size);
  uint64_t total = 0;
  chunks_.resize(static_cast<size_t>(count));
  for (uint64_t c = 0; c < count; ++c) {
    const std::byte* p = pending_.data() + c * kChunkEntrySize;
    uint64_t raw = std::min<uint64_t>(kAttachmentChunkBytes,
                                      header_.raw_size - c * kAttachmentChunkBytes);
    ChunkEntry& entry = chunks_[c];
    entry.wire_size = GetLe<uint32_t>(p);
    uint8_t codec = std::to_integer<uint8_t>(p[4]);
    std::string where = "chunk " + std::to_string(c);
    switch (codec) {
      case static_cast<uint8_t>(ChunkCodec::kRaw):
        entry.codec = ChunkCodec::kRaw;
        if (entry.wire_size != raw) {
          return InvalidArgument(where + ": raw chunk of wire size " +
                                 std::to_string(entry.wire_size) + " != " + std::to_string(raw));
        }
        break;
      case static_cast<uint8_t>(ChunkCodec::kShuffledZstd):
        if (!IsShuffleElementSize(header_.element_size)) {
          return InvalidArgument(where + ": shuffled chunk in an attachment of element size " +
                                 std::to_string(header_.element_size));
        }
        [[fallthrough]];
      case static_cast<uint8_t>(ChunkCodec::kZstd):
        entry.codec = static_cast<ChunkCodec>(codec);
        if (entry.wire_size == 0 || entry.wire_size > ZstdBound(raw)) {
          return InvalidArgument(where + ": zstd chunk of wire size " +
                                 std::to_string(entry.wire_size) + " cannot hold " +
                                 std::to_string(raw) + " bytes");
        }
        // Before any chunk is decompressed: a bomb is refused on its table.
        if (max_ratio_ != 0 && raw / max_ratio_ > entry.wire_size) {
          return ResourceExhausted(where + ": zstd chunk of " + std::to_string(raw) + " bytes from " +
                                   std::to_string(entry.wire_size) +
                                   " on the wire, over the decompression ratio limit of " +
                                   std::to_string(max_ratio_) + " (max_decompression_ratio)");
        }
        break;
      case static_cast<uint8_t>(ChunkCodec::kFill):
        entry.codec = ChunkCodec::kFill;
        if (entry.wire_size != FillPatternBytes(header_.element_size)) {
          return InvalidArgument(where + ": fill chunk of wire size " + std::to_string(entry.wire_size) +
                                 " in an attachment of element size " + std::to_string(header_.element_size) +
                                 " (its pattern is " + std::to_string(FillPatternBytes(header_.element_size)) +
                                 " bytes)");
        }
        break;
      default:
        return InvalidArgument(where + ": unknown chunk codec " + std::to_string(codec));
    }
    total += entry.wire_size;
  }
  if (total != wire_left_) {
    return InvalidArgument("chunk table adds up to " + std::to_string(total) +
                           " bytes, the attachment holds " + std::to_string(wire_left_));
  }
  return OkStatus();
}

Status AttachmentReader::DecodeChunk() {
  const ChunkEntry& entry = chunks_[next_chunk_];
  size_t raw = static_cast<size_t>(
      std::min<uint64_t>(kAttachmentChunkBytes, header_.raw_size - produced_));
  std::string where = "chunk " + std::to_string(next_chunk_);
  if (entry.codec == ChunkCodec::kFill) {
    std::span<std::byte> dst = Output(produced_, raw);
    const size_t k = pending_.size();  // 1 to 8, checked with the table
    const size_t head = std::min(k, raw);
    std::memcpy(dst.data(), pending_.data(), head);
    // Doubling copies: the pattern repeated, O(raw) bytes moved.
    for (size_t filled = head; filled < raw;) {
      const size_t n = std::min(filled, raw - filled);
      std::memcpy(dst.data() + filled, dst.data(), n);
      filled += n;
    }
  } else if (entry.codec != ChunkCodec::kRaw) {
    if (codec_ == nullptr) codec_ = std::make_unique<ZstdCodec>();
    std::span<std::byte> dst = Output(produced_, raw);
    if (entry.codec == ChunkCodec::kShuffledZstd) {
      unshuffle_scratch_.resize(raw);
      REMEX_RETURN_IF_ERROR(codec_->Decompress(pending_, unshuffle_scratch_).WithContext(where));
      ByteUnshuffle(unshuffle_scratch_, dst, header_.element_size);
    } else {
      REMEX_RETURN_IF_ERROR(codec_->Decompress(pending_, dst).WithContext(where));
    }
  }
  produced_ += raw;
  ++next_chunk_;
  return OkStatus();
}

Status AttachmentReader::Commit() {
  try {
    return CommitStep();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("no memory to receive an attachment of " + std::to_string(header_.raw_size) +
                             " bytes (" + std::to_string(produced_) + " received)");
  }
}

Status AttachmentReader::CommitStep() {
  if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
    return Cancelled("receiving stopped: the connection is closing");
  }
  wire_left_ -= pending_.size();
  switch (phase_) {
    case Phase::kWhole:
      if (header_.codec == Codec::kZstd) {
        REMEX_RETURN_IF_ERROR(zstd_->Feed(pending_));
        if (wire_left_ == 0) REMEX_RETURN_IF_ERROR(zstd_->Finish());
      } else {
        produced_ += pending_.size();
      }
      break;
    case Phase::kTable:
      REMEX_RETURN_IF_ERROR(ParseTable());
      phase_ = Phase::kChunk;
      break;
    case Phase::kChunk:
      REMEX_RETURN_IF_ERROR(DecodeChunk());
      break;
  }
  pending_ = {};
  return OkStatus();
}

}  // namespace remex::rpc
