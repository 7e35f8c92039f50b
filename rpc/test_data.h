// Payloads for the rpc tests: compressible, random and smooth float32 bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <zstd.h>

namespace remex::rpc::testing {

// Runs of 16 bytes, each of one of 7 values drawn at random: zstd shrinks these well
// (about 30 to 1), yet not so far that a sender would rather send them raw (past
// kMaxCompressionRatio, as a strictly periodic pattern would be).
inline std::vector<std::byte> Compressible(size_t n) {
  std::vector<std::byte> v(n);
  std::mt19937 gen(7);
  std::byte value{0};
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) value = static_cast<std::byte>(gen() % 7);
    v[i] = value;
  }
  return v;
}

// Uniformly random bytes: incompressible.
inline std::vector<std::byte> Random(size_t n, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::byte> v(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = gen();
    std::memcpy(&v[i], &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::byte>(gen());
  return v;
}

// float32 values that vary slowly: compress well once byte-shuffled. A tail shorter
// than 4 bytes is filled with 0x5a.
inline std::vector<std::byte> SmoothFloats(size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float f = 100.0f + 0.001f * static_cast<float>(i / 4);
    std::memcpy(&v[i], &f, 4);
  }
  for (size_t i = bytes / 4 * 4; i < bytes; ++i) v[i] = std::byte{0x5a};
  return v;
}

// One zstd frame (level 1, content size and checksum recorded) of `raw` zero bytes: a
// few KB per GiB, the shape of a decompression bomb, made without holding the zeros.
inline std::vector<std::byte> ZeroZstdFrame(uint64_t raw) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(cctx, raw);
  std::vector<std::byte> zeros(1 << 20), out, buf(ZSTD_CStreamOutSize());
  for (uint64_t done = 0; done < raw;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), raw - done));
    done += n;
    ZSTD_inBuffer in{zeros.data(), n, 0};
    const ZSTD_EndDirective mode = done == raw ? ZSTD_e_end : ZSTD_e_continue;
    size_t left = 0;
    do {
      ZSTD_outBuffer o{buf.data(), buf.size(), 0};
      left = ZSTD_compressStream2(cctx, &o, &in, mode);
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(o.pos));
    } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
  }
  ZSTD_freeCCtx(cctx);
  return out;
}

}  // namespace remex::rpc::testing
