#include "rpc/compression.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

namespace remex::rpc {
namespace {

// Output grows by at most this much per step, so memory follows the data decoded.
constexpr size_t kGrowBytes = 4u << 20;
// The largest zstd window a streaming decoder accepts (8 MiB): the window of levels up
// to 19; a frame asking for more is refused as corrupt.
constexpr int kMaxWindowLog = 23;

std::string ZstdMessage(size_t code) { return ZSTD_getErrorName(code); }

// Checks the content size recorded in the frame header at the start of `src`.
Status CheckContentSize(std::span<const std::byte> src, uint64_t raw_size) {
  unsigned long long declared = ZSTD_getFrameContentSize(src.data(), src.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) {
    return InvalidArgument("zstd payload has no valid frame header");
  }
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return InvalidArgument("zstd frame does not record its content size");
  }
  if (declared != raw_size) {
    return InvalidArgument("zstd frame content size " + std::to_string(declared) +
                           " differs from the declared raw size " + std::to_string(raw_size));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<std::byte>> ZstdCompress(std::span<const std::byte> src, int level) {
  std::vector<std::byte> out;
  try {
    out.resize(ZSTD_compressBound(src.size()));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("no memory for a zstd buffer of " + std::to_string(src.size()) +
                             " bytes");
  }
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (cctx == nullptr) return Internal("ZSTD_createCCtx failed");
  // The checksum (XXH64, cheap next to compression) makes corrupt payloads detectable.
  size_t n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(n)) n = ZSTD_compress2(cctx, out.data(), out.size(), src.data(), src.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) return Internal("zstd compression failed: " + ZstdMessage(n));
  out.resize(n);
  return out;
}

Status ZstdDecompress(std::span<const std::byte> src, std::span<std::byte> dst) {
  REMEX_RETURN_IF_ERROR(CheckContentSize(src, dst.size()));
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (dctx == nullptr) return Internal("ZSTD_createDCtx failed");
  size_t n = ZSTD_decompressDCtx(dctx, dst.data(), dst.size(), src.data(), src.size());
  ZSTD_freeDCtx(dctx);
  if (ZSTD_isError(n)) return InvalidArgument("corrupt zstd payload: " + ZstdMessage(n));
  if (n != dst.size()) {
    return InvalidArgument("zstd payload decoded to " + std::to_string(n) + " bytes, expected " +
                           std::to_string(dst.size()));
  }
  return OkStatus();
}

namespace {

template <size_t kSize>
void ShuffleElements(const std::byte* src, std::byte* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const std::byte* element = src + i * kSize;
    for (size_t b = 0; b < kSize; ++b) dst[b * n + i] = element[b];
  }
}

template <size_t kSize>
void UnshuffleElements(const std::byte* src, std::byte* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    std::byte* element = dst + i * kSize;
    for (size_t b = 0; b < kSize; ++b) element[b] = src[b * n + i];
  }
}

}  // namespace

void ByteShuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t element_size) {
  size_t n = IsShuffleElementSize(element_size) ? src.size() / element_size : 0;
  switch (n == 0 ? 0 : element_size) {
    case 2: ShuffleElements<2>(src.data(), dst.data(), n); break;
    case 4: ShuffleElements<4>(src.data(), dst.data(), n); break;
    case 8: ShuffleElements<8>(src.data(), dst.data(), n); break;
    default: break;
  }
  size_t done = n * (n == 0 ? 0 : element_size);
  if (src.size() > done) std::memcpy(dst.data() + done, src.data() + done, src.size() - done);
}

void ByteUnshuffle(std::span<const std::byte> src, std::span<std::byte> dst, size_t element_size) {
  size_t n = IsShuffleElementSize(element_size) ? src.size() / element_size : 0;
  switch (n == 0 ? 0 : element_size) {
    case 2: UnshuffleElements<2>(src.data(), dst.data(), n); break;
    case 4: UnshuffleElements<4>(src.data(), dst.data(), n); break;
    case 8: UnshuffleElements<8>(src.data(), dst.data(), n); break;
    default: break;
  }
  size_t done = n * (n == 0 ? 0 : element_size);
  if (src.size() > done) std::memcpy(dst.data() + done, src.data() + done, src.size() - done);
}

uint64_t ZstdBound(uint64_t raw_size) { return ZSTD_compressBound(static_cast<size_t>(raw_size)); }

struct ZstdCodec::State {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  ~State() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }
};

ZstdCodec::ZstdCodec() : state_(std::make_unique<State>()) {}
ZstdCodec::~ZstdCodec() = default;

StatusOr<size_t> ZstdCodec::Compress(std::span<const std::byte> src, int level,
                                     std::span<std::byte> dst) {
  State& s = *state_;
  if (s.cctx == nullptr) {
    s.cctx = ZSTD_createCCtx();
    if (s.cctx == nullptr) return Internal("ZSTD_createCCtx failed");
  }
  ZSTD_CCtx_reset(s.cctx, ZSTD_reset_session_and_parameters);
  size_t n = ZSTD_CCtx_setParameter(s.cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(s.cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(n)) {
    n = ZSTD_compress2(s.cctx, dst.data(), dst.size(), src.data(), src.size());
  }
  if (ZSTD_isError(n)) return Internal("zstd compression failed: " + ZstdMessage(n));
  return n;
}

Status ZstdCodec::Decompress(std::span<const std::byte> src, std::span<std::byte> dst) {
  REMEX_RETURN_IF_ERROR(CheckContentSize(src, dst.size()));
  State& s = *state_;
  if (s.dctx == nullptr) {
    s.dctx = ZSTD_createDCtx();
    if (s.dctx == nullptr) return Internal("ZSTD_createDCtx failed");
  }
  size_t n = ZSTD_decompressDCtx(s.dctx, dst.data(), dst.size(), src.data(), src.size());
  if (ZSTD_isError(n)) return InvalidArgument("corrupt zstd payload: " + ZstdMessage(n));
  if (n != dst.size()) {
    return InvalidArgument("zstd payload decoded to " + std::to_string(n) + " bytes, expected " +
                           std::to_string(dst.size()));
  }
  return OkStatus();
}

struct ZstdStreamDecompressor::State {
  ZSTD_DCtx* dctx = nullptr;
  uint64_t raw_size = 0;
  std::vector<std::byte>* out = nullptr;  // growing output, or
  std::span<std::byte> fixed;             // a fixed destination of raw_size bytes
  size_t produced = 0;
  bool started = false;
  bool frame_done = false;
  const std::atomic<bool>* cancel = nullptr;

  ~State() { ZSTD_freeDCtx(dctx); }

  Status Reset(uint64_t size) {
    if (dctx == nullptr) {
      dctx = ZSTD_createDCtx();
      if (dctx == nullptr) return Internal("ZSTD_createDCtx failed");
      // A frame may ask for a window of up to 2^27 bytes by default, which the decoder
      // would allocate per connection; Remex senders' levels use at most 2^23.
      ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, kMaxWindowLog);
    }
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    raw_size = size;
    out = nullptr;
    fixed = {};
    produced = 0;
    started = false;
    frame_done = false;
    return OkStatus();
  }

  // Where output may go, at most kGrowBytes past what is produced (so that a step is
  // bounded and the cancel flag is seen between steps): the fixed destination, or
  // `out` grown by one step when it is full and below raw_size.
  std::span<std::byte> Window() {
    if (out == nullptr) {
      return fixed.first(static_cast<size_t>(std::min<uint64_t>(fixed.size(), produced + uint64_t{kGrowBytes})));
    }
    if (produced == out->size() && out->size() < raw_size) {
      out->resize(static_cast<size_t>(
          std::min<uint64_t>(raw_size, out->size() + static_cast<uint64_t>(kGrowBytes))));
    }
    return *out;
  }

  // One decompression step. Returns whether any progress was made.
  StatusOr<bool> Step(ZSTD_inBuffer& in) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return Cancelled("decompression stopped: the connection is closing");
    }
    std::span<std::byte> window = Window();
    ZSTD_outBuffer o{window.data(), window.size(), produced};
    size_t in_before = in.pos;
    size_t r = ZSTD_decompressStream(dctx, &o, &in);
    if (ZSTD_isError(r)) return InvalidArgument("corrupt zstd payload: " + ZstdMessage(r));
    bool progress = in.pos != in_before || o.pos != produced;
    produced = o.pos;
    if (r == 0) frame_done = true;
    return progress;
  }
};

ZstdStreamDecompressor::ZstdStreamDecompressor() : state_(std::make_unique<State>()) {}
ZstdStreamDecompressor::~ZstdStreamDecompressor() = default;

Status ZstdStreamDecompressor::Begin(uint64_t raw_size, std::vector<std::byte>* out) {
  State& s = *state_;
  REMEX_RETURN_IF_ERROR(s.Reset(raw_size));
  s.out = out;
  out->clear();
  // Only the first bytes are reserved: a declared size is a claim, and the output
  // grows (geometrically) only as the payload really decompresses.
  try {
    out->reserve(static_cast<size_t>(std::min<uint64_t>(raw_size, kInitialReserveBytes)));
  } catch (const std::exception&) {
    return ResourceExhausted("no memory for an attachment of " + std::to_string(raw_size) +
                             " bytes");
  }
  return OkStatus();
}

void ZstdStreamDecompressor::SetCancel(const std::atomic<bool>* cancel) { state_->cancel = cancel; }

Status ZstdStreamDecompressor::Begin(std::span<std::byte> dst) {
  State& s = *state_;
  REMEX_RETURN_IF_ERROR(s.Reset(dst.size()));
  s.fixed = dst;
  return OkStatus();
}

Status ZstdStreamDecompressor::Feed(std::span<const std::byte> chunk) {
  State& s = *state_;
  if (!s.started) {
    REMEX_RETURN_IF_ERROR(CheckContentSize(chunk, s.raw_size));
    s.started = true;
  }
  ZSTD_inBuffer in{chunk.data(), chunk.size(), 0};
  while (in.pos < in.size) {
    if (s.frame_done) return InvalidArgument("trailing bytes after the zstd frame");
    REMEX_ASSIGN_OR_RETURN(bool progress, s.Step(in));
    if (!progress) {
      return InvalidArgument("zstd payload decodes to more than the declared " +
                             std::to_string(s.raw_size) + " bytes");
    }
  }
  return OkStatus();
}

Status ZstdStreamDecompressor::Finish() {
  State& s = *state_;
  if (!s.started) return InvalidArgument("empty zstd payload");
  // Flush what the decoder still holds.
  ZSTD_inBuffer in{nullptr, 0, 0};
  while (!s.frame_done) {
    REMEX_ASSIGN_OR_RETURN(bool progress, s.Step(in));
    if (!progress) break;
  }
  if (!s.frame_done) return InvalidArgument("truncated zstd payload");
  if (s.produced != s.raw_size) {
    return InvalidArgument("zstd payload decoded to " + std::to_string(s.produced) +
                           " bytes, expected " + std::to_string(s.raw_size));
  }
  if (s.out != nullptr) s.out->resize(s.produced);
  return OkStatus();
}

}  // namespace remex::rpc
