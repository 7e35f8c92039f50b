// Payloads for the rpc tests: compressible, random and smooth float32 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace remex::rpc::testing {

// Runs of a few byte values: zstd shrinks these well.
inline std::vector<std::byte> Compressible(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i / 16) % 7);
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

}  // namespace remex::rpc::testing
