// Dropout's random mask under training_mode (ONNX Dropout-12/13,
// https://onnx.ai/onnx/operators/onnx__Dropout.html), drawn on the host for the CPU
// kernel (elementwise/unary.cc) and the CUDA kernel (elementwise/cuda/dropout.cc) alike, so that
// both devices drop the same elements.
//
// The draw is NumPy's: with seed s, element i is kept when u_i >= ratio, where u_0,
// u_1, ... are the doubles of numpy.random.RandomState(s).random_sample() (MT19937
// seeded by init_genrand(s), each double from two 32-bit outputs a, b as
// ((a >> 5) * 2^26 + (b >> 6)) / 2^53). This is the mask ONNX's reference
// implementation draws (np.random.seed(seed); np.random.uniform(0, 1, shape) >= ratio),
// so a model with a `seed` attribute gives the same output on every call and device.
// Without `seed`, each call draws a new seed (DropoutSeeds).
// Host code only.
#pragma once

#include <cstdint>
#include <optional>
#include <random>

namespace remex::kernels::internal {

// mask[i] = 1 when element i is kept, 0 when dropped, for i in [0, n): the draw above
// with `seed`. ratio in [0, 1).
inline void DrawDropoutMask(uint32_t seed, double ratio, uint8_t* mask, int64_t n) {
  std::mt19937 engine(seed);  // std::mt19937's seeding is init_genrand's.
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = static_cast<uint32_t>(engine()) >> 5;
    const uint32_t b = static_cast<uint32_t>(engine()) >> 6;
    const double u = (static_cast<double>(a) * 67108864.0 + static_cast<double>(b)) / 9007199254740992.0;
    mask[i] = u >= ratio ? 1 : 0;
  }
}

// The seed of one call of a Dropout node: its `seed` attribute (taken modulo 2^32, as
// NumPy takes a seed's low 32 bits), the same on every call; without one, a new seed
// from std::random_device per call (drawn only in training mode, so inference never
// pays for it). Thread-safe: calls may run concurrently.
class DropoutSeeds {
 public:
  explicit DropoutSeeds(std::optional<int64_t> seed)
      : fixed_(seed ? std::optional<uint32_t>(static_cast<uint32_t>(static_cast<uint64_t>(*seed))) : std::nullopt) {}

  uint32_t Next() const { return fixed_ ? *fixed_ : static_cast<uint32_t>(std::random_device{}()); }

 private:
  const std::optional<uint32_t> fixed_;
};

}  // namespace remex::kernels::internal
