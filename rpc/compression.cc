#include "rpc/compression.h"

#include <zstd.h>

#include <algorithm>
#include <new>
#include <string>

namespace remex::rpc {
namespace {

// Output grows by at most this much per step, so memory follows the data decoded.
constexpr size_t kGrowBytes = 4u << 20;

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

struct ZstdStreamDecompressor::State {
  ZSTD_DCtx* dctx = nullptr;
  uint64_t raw_size = 0;
  std::vector<std::byte>* out = nullptr;
  size_t produced = 0;
  bool started = false;
  bool frame_done = false;

  ~State() { ZSTD_freeDCtx(dctx); }

  // Grows `out` by one step when it is full and below raw_size.
  void EnsureSpace() {
    if (produced == out->size() && out->size() < raw_size) {
      out->resize(static_cast<size_t>(
          std::min<uint64_t>(raw_size, out->size() + static_cast<uint64_t>(kGrowBytes))));
    }
  }

  // One decompression step. Returns whether any progress was made.
  StatusOr<bool> Step(ZSTD_inBuffer& in) {
    EnsureSpace();
    ZSTD_outBuffer o{out->data(), out->size(), produced};
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
  if (s.dctx == nullptr) {
    s.dctx = ZSTD_createDCtx();
    if (s.dctx == nullptr) return Internal("ZSTD_createDCtx failed");
  }
  ZSTD_DCtx_reset(s.dctx, ZSTD_reset_session_only);
  s.raw_size = raw_size;
  s.out = out;
  s.produced = 0;
  s.started = false;
  s.frame_done = false;
  out->clear();
  try {
    out->reserve(static_cast<size_t>(raw_size));
  } catch (const std::exception&) {
    return ResourceExhausted("no memory for an attachment of " + std::to_string(raw_size) +
                             " bytes");
  }
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
  s.out->resize(s.produced);
  return OkStatus();
}

}  // namespace remex::rpc
