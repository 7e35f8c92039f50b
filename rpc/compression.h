// Compression of frame attachments: zstd, the byte shuffle applied before it, and the
// sender's policy.
//
// Decompression trusts nothing: the frame's content size must be present and equal to
// the size the frame header declared, and output never exceeds that size.
#pragma once

#include <atomic>
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
// What a receiver reserves up front for an attachment that lands in a growing vector;
// beyond it the vector grows as bytes arrive, never on the strength of a declared size.
inline constexpr uint64_t kInitialReserveBytes = uint64_t{16} << 20;

// Sender policy for attachments marked `compress` (OutAttachment::compress); attachments
// not so marked, and those under kMinCompressBytes, are always sent raw.
enum class CompressionMode : uint8_t {
  // Compress each chunk; send a chunk raw when its compressed form is above 90 % of its
  // raw size (see WorthCompressing), so incompressible data costs the receiver no
  // decompression and the wire no extra bytes.
  kAuto = 0,
  // Send raw.
  kNone = 1,
  // Compress every chunk, whatever it saves.
  kZstd = 2,
};

// A CompressionMode that also accepts the bool of the first transport API (true: kAuto,
// false: kNone), so that `options.compression = false` keeps its meaning.
struct CompressionSetting {
  CompressionMode mode = CompressionMode::kAuto;

  constexpr CompressionSetting() = default;
  constexpr CompressionSetting(CompressionMode m) : mode(m) {}  // NOLINT: implicit
  constexpr CompressionSetting(bool enabled)                    // NOLINT: implicit
      : mode(enabled ? CompressionMode::kAuto : CompressionMode::kNone) {}
  constexpr operator CompressionMode() const { return mode; }  // NOLINT: implicit
  // True unless kNone.
  constexpr explicit operator bool() const { return mode != CompressionMode::kNone; }
};

// Whether an attachment marked `compress` (`requested`) of `size` bytes is compressed
// at all under `mode`.
inline bool ShouldCompress(size_t size, bool requested,
                           CompressionMode mode = CompressionMode::kAuto) {
  return requested && mode != CompressionMode::kNone && size >= kMinCompressBytes;
}

// kAuto's rule: keep the compressed form of `raw_size` bytes only when it is at most
// 90 % of the raw size.
inline bool WorthCompressing(uint64_t raw_size, uint64_t compressed_size) {
  return compressed_size * 10 <= raw_size * 9;
}

// ---------------------------------------------------------------------------------------
// Byte shuffle (the filter of Blosc): the bytes of `element_size`-byte elements grouped
// by significance, so that the slowly varying high bytes of numeric data compress well.
// For n = src.size() / element_size whole elements, byte b of element i moves from
// src[i * element_size + b] to dst[b * n + i]; the last src.size() % element_size bytes
// (a tail that is not a whole element) are copied unchanged. element_size 0 or 1 copies.
// `dst` must have src.size() bytes and must not overlap `src`.

// Element sizes the shuffle and the wire accept besides 0 and 1 (no shuffle).
inline bool IsShuffleElementSize(size_t element_size) {
  return element_size == 2 || element_size == 4 || element_size == 8;
}

void ByteShuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t element_size);
// The inverse of ByteShuffle with the same element_size.
void ByteUnshuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t element_size);

// ---------------------------------------------------------------------------------------
// zstd.

// One zstd frame holding `src`, with its content size and a checksum recorded.
// INTERNAL with zstd's message on failure.
StatusOr<std::vector<std::byte>> ZstdCompress(std::span<const std::byte> src, int level);

// Decompresses the zstd frame `src` into exactly `dst` (whose size is the declared raw
// size). INVALID_ARGUMENT, naming zstd's message where zstd gave one, when the content
// size is missing or differs from dst.size(), or the data is corrupt or truncated.
Status ZstdDecompress(std::span<const std::byte> src, std::span<std::byte> dst);

// ZstdCompress and ZstdDecompress with a context kept across calls (cheaper for many
// small payloads such as the chunks of an attachment). Not thread-safe.
class ZstdCodec {
 public:
  ZstdCodec();
  ~ZstdCodec();
  ZstdCodec(const ZstdCodec&) = delete;
  ZstdCodec& operator=(const ZstdCodec&) = delete;

  // Compresses `src` as one frame (content size and checksum recorded) into the front of
  // `dst`, which must hold at least ZstdBound(src.size()) bytes; returns the frame's
  // size. INTERNAL with zstd's message on failure.
  StatusOr<size_t> Compress(std::span<const std::byte> src, int level, std::span<std::byte> dst);
  // As ZstdDecompress.
  Status Decompress(std::span<const std::byte> src, std::span<std::byte> dst);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ZSTD_compressBound: the largest frame zstd makes of `raw_size` bytes.
uint64_t ZstdBound(uint64_t raw_size);

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
  // Starts a payload of dst.size() bytes decoded straight into `dst` (borrowed; must
  // outlive the payload). On an error `dst` may be partly written.
  Status Begin(std::span<std::byte> dst);
  // Feeds the next compressed bytes. The first call must hold the whole zstd frame
  // header (18 bytes, or all of the input if shorter); its content size is checked
  // against raw_size there. INVALID_ARGUMENT as in ZstdDecompress.
  Status Feed(std::span<const std::byte> chunk);
  // After the last Feed: INVALID_ARGUMENT unless exactly one complete frame of
  // raw_size bytes was decoded.
  Status Finish();
  // A flag (borrowed; nullptr: none) checked every 4 MiB of output: once set, Feed and
  // Finish stop with CANCELLED.
  void SetCancel(const std::atomic<bool>* cancel);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace remex::rpc
