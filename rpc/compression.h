// zstd compression of frame attachments.
//
// Decompression trusts nothing: the frame's content size must be present and equal to
// the size the frame header declared, and output never exceeds that size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace remex::rpc {

// Attachments smaller than this are always sent raw.
inline constexpr size_t kMinCompressBytes = 4 * 1024;
inline constexpr int kDefaultCompressionLevel = 1;

// Sender policy: compress when asked and the payload is at least kMinCompressBytes.
// (The caller still sends raw when the compressed form is not smaller.)
inline bool ShouldCompress(size_t size, bool requested) {
  return requested && size >= kMinCompressBytes;
}

// One zstd frame holding `src`, with its content size and a checksum recorded.
// INTERNAL with zstd's message on failure.
StatusOr<std::vector<std::byte>> ZstdCompress(std::span<const std::byte> src, int level);

// Decompresses the zstd frame `src` into exactly `dst` (whose size is the declared raw
// size). INVALID_ARGUMENT, naming zstd's message where zstd gave one, when the content
// size is missing or differs from dst.size(), or the data is corrupt or truncated.
Status ZstdDecompress(std::span<const std::byte> src, std::span<std::byte> dst);

// Streaming form of ZstdDecompress for payloads read in chunks: the output grows as
// data is decompressed, never past raw_size.
class ZstdStreamDecompressor {
 public:
  ZstdStreamDecompressor();
  ~ZstdStreamDecompressor();
  ZstdStreamDecompressor(const ZstdStreamDecompressor&) = delete;
  ZstdStreamDecompressor& operator=(const ZstdStreamDecompressor&) = delete;

  // Starts a payload of `raw_size` bytes into `out` (cleared, capacity reserved; must
  // outlive the payload). RESOURCE_EXHAUSTED when the capacity cannot be reserved.
  Status Begin(uint64_t raw_size, std::vector<std::byte>* out);
  // Feeds the next compressed bytes. The first call must hold the whole zstd frame
  // header (18 bytes, or all of the input if shorter); its content size is checked
  // against raw_size there. INVALID_ARGUMENT as in ZstdDecompress.
  Status Feed(std::span<const std::byte> chunk);
  // After the last Feed: INVALID_ARGUMENT unless exactly one complete frame of
  // raw_size bytes was decoded.
  Status Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace remex::rpc
