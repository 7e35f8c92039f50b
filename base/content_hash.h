// The content hash of an executable, as the server's module cache and the client
// name it: the lower-case hex XXH3-128 of the .rmx bytes (32 characters, the digest
// in canonical big-endian order, as `xxh128sum` prints it).
//
// Header-only, in base/, so that the client library (which does not link the VM) computes
// exactly the same string as the server. Needs the remex_xxhash CMake target.
#pragma once

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL  // header-only xxHash: nothing to link
#endif
#include <xxhash.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace remex {

inline constexpr size_t kContentHashChars = 32;

inline std::string ContentHash(std::span<const std::byte> bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kContentHashChars, '0');
  for (size_t i = 0; i < sizeof canonical.digest; ++i) {
    out[2 * i] = kHex[canonical.digest[i] >> 4];
    out[2 * i + 1] = kHex[canonical.digest[i] & 0xf];
  }
  return out;
}

// True when `s` has the form of a content hash (32 lower-case hex digits).
inline bool IsContentHash(std::string_view s) {
  if (s.size() != kContentHashChars) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace remex
