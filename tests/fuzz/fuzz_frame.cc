// Fuzz target: the wire frame decoder and the attachment reader (rpc/frame.h).
//
// The input is a byte stream as a peer would send it. It is read twice:
//  1. as the transport reads it: frame header, CheckFrameHeader, the Cap'n Proto
//     message (ValidateMessage), then each attachment header and its payload through
//     AttachmentReader, fed in steps whose sizes come from the input itself, frame
//     after frame until the stream ends or an error stops it;
//  2. whole, by DecodeFrame (the in-memory decoder), frame by frame.
// An error Status is the expected outcome for most inputs; a crash, a sanitizer report,
// a leak or an allocation past the limits below is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "rpc/frame.h"

namespace {

using remex::rpc::AttachmentHeader;
using remex::rpc::AttachmentReader;
using remex::rpc::Limits;

// Small enough that a declared size never makes the fuzzer run out of memory, large
// enough that every codec path (several 1 MiB chunks) is reachable.
Limits FuzzLimits() {
  Limits limits;
  limits.max_message_bytes = 1u << 20;
  limits.max_attachments = 8;
  limits.max_attachment_raw_size = 8u << 20;
  limits.max_frame_attachment_bytes = 16u << 20;
  // The server's default: chunk tables are checked against it (fill chunks exempt).
  limits.max_decompression_ratio = remex::rpc::kMaxCompressionRatio;
  return limits;
}

class Stream {
 public:
  explicit Stream(std::span<const std::byte> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  std::span<const std::byte> Take(size_t n) {
    n = std::min(n, left());
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  size_t pos() const { return pos_; }

 private:
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

// Reads one attachment payload as the transport does, into a growing vector or (every
// other attachment) a fixed span of raw_size bytes; the wire bytes arrive in pieces of
// 1 to 4096 bytes, each piece's first byte choosing the size of the next.
bool ReadAttachment(Stream& in, const AttachmentHeader& header, int index) {
  AttachmentReader reader;
  reader.SetLimits(FuzzLimits());
  std::vector<std::byte> grown;
  std::vector<std::byte> fixed;
  remex::Status begun = remex::OkStatus();
  if (index % 2 == 0) {
    begun = reader.Begin(header, &grown);
  } else {
    fixed.resize(header.raw_size);
    begun = reader.Begin(header, std::span<std::byte>(fixed));
  }
  if (!begun.ok()) return false;
  size_t step = 1 + (static_cast<size_t>(index) * 613) % 4096;
  while (!reader.done()) {
    std::span<std::byte> buffer = reader.NextBuffer();
    size_t filled = 0;
    while (filled < buffer.size()) {
      std::span<const std::byte> piece = in.Take(std::min(buffer.size() - filled, step));
      if (piece.empty()) return false;  // the stream ended inside the payload
      std::memcpy(buffer.data() + filled, piece.data(), piece.size());
      filled += piece.size();
      step = 1 + (static_cast<size_t>(piece[0]) * 16) % 4096;
    }
    if (!reader.Commit().ok()) return false;
  }
  return true;
}

void ReadAsTransport(std::span<const std::byte> bytes) {
  const Limits limits = FuzzLimits();
  Stream in(bytes);
  while (in.left() >= remex::rpc::kFrameHeaderSize) {
    auto header = remex::rpc::DecodeFrameHeader(in.Take(remex::rpc::kFrameHeaderSize));
    if (!header.ok() || !remex::rpc::CheckFrameHeader(*header, limits).ok()) return;
    std::span<const std::byte> message = in.Take(header->message_bytes);
    if (message.size() != header->message_bytes) return;
    // The transport reads the message into word-aligned memory before validating it.
    auto words = kj::heapArray<capnp::word>(message.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), message.data(), message.size());
    if (!remex::rpc::ValidateMessage(words.asPtr()).ok()) return;
    uint64_t frame_raw_bytes = 0;
    for (uint32_t i = 0; i < header->attachment_count; ++i) {
      auto attachment =
          remex::rpc::DecodeAttachmentHeader(in.Take(remex::rpc::kAttachmentHeaderSize), limits);
      if (!attachment.ok()) return;
      frame_raw_bytes += attachment->raw_size;
      if (!remex::rpc::CheckFrameAttachmentBytes(frame_raw_bytes, limits).ok()) return;
      if (!ReadAttachment(in, *attachment, static_cast<int>(i))) return;
    }
  }
}

// DecodeFrame on each frame of the stream, cut where the headers say a frame ends (the
// same bytes also as one frame with everything after it as trailing bytes).
void ReadWhole(std::span<const std::byte> bytes) {
  const Limits limits = FuzzLimits();
  (void)remex::rpc::DecodeFrame(bytes, limits);
  size_t pos = 0;
  for (int frames = 0; frames < 16 && pos + remex::rpc::kFrameHeaderSize <= bytes.size(); ++frames) {
    auto header = remex::rpc::DecodeFrameHeader(bytes.subspan(pos, remex::rpc::kFrameHeaderSize));
    if (!header.ok()) return;
    // Walk the attachment headers to find where the frame ends.
    uint64_t end = pos + remex::rpc::kFrameHeaderSize + uint64_t{header->message_bytes};
    for (uint32_t i = 0; i < header->attachment_count && i < limits.max_attachments; ++i) {
      if (end + remex::rpc::kAttachmentHeaderSize > bytes.size()) break;
      auto attachment = remex::rpc::DecodeAttachmentHeader(
          bytes.subspan(end, remex::rpc::kAttachmentHeaderSize), limits);
      if (!attachment.ok()) break;
      end += remex::rpc::kAttachmentHeaderSize + attachment->wire_size;
    }
    end = std::min<uint64_t>(end, bytes.size());
    (void)remex::rpc::DecodeFrame(bytes.subspan(pos, end - pos), limits);
    if (end <= pos) return;
    pos = end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  ReadAsTransport(bytes);
  ReadWhole(bytes);
  return 0;
}
