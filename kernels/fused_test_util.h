// Test helpers of FusedElementwise (kernels/fused.h), shared by the CPU and the CUDA
// tests: the opcodes and Pow exponents of random programs, and random inputs that
// broadcast to a random output shape.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fused.h"
#include "kernels/kernels.h"
#include "kernels/test_util.h"

namespace remex::kernels::testing {

// The opcodes random programs draw from: every one.
inline constexpr FusedOpcode kRandomProgramOpcodes[] = {
    FusedOpcode::kAdd,     FusedOpcode::kSub,       FusedOpcode::kMul,       FusedOpcode::kDiv,
    FusedOpcode::kPow,     FusedOpcode::kMin,       FusedOpcode::kMax,       FusedOpcode::kRelu,
    FusedOpcode::kSigmoid, FusedOpcode::kTanh,      FusedOpcode::kExp,       FusedOpcode::kLog,
    FusedOpcode::kSqrt,    FusedOpcode::kNeg,       FusedOpcode::kAbs,       FusedOpcode::kReciprocal,
    FusedOpcode::kErf,     FusedOpcode::kHardSwish, FusedOpcode::kLeakyRelu, FusedOpcode::kHardSigmoid,
    FusedOpcode::kClip};

// The exponents of Pow in random programs (immediates).
inline constexpr float kRandomPowExponents[] = {2.0f, 1.0f, 0.5f, 3.0f, -1.0f, 1.5f};

// A random output shape and 1 to 4 float64 inputs that broadcast to it.
struct BroadcastInputs {
  Shape out;
  std::vector<HostTensor> inputs;
};

// Output ranks 0 to 4 of extents among 1, 2, 3, 7, 17, 64, 700 (the large ones only
// while the output has at most 2000 elements); each input takes the output's last dims,
// some set to 1. Values are multiples of 1/64 in [-2, 2], exact in every float dtype.
inline BroadcastInputs RandomBroadcastInputs(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int64_t kDims[] = {1, 2, 3, 7, 17, 64, 700};
  BroadcastInputs b;
  b.out.resize(static_cast<size_t>(pick(5)));
  int64_t elems = 1;
  for (int64_t& d : b.out) {
    d = kDims[pick(elems > 2000 ? 5 : 7)];
    elems *= d;
  }
  const int nin = 1 + pick(4);
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  for (int k = 0; k < nin; ++k) {
    const size_t rank = static_cast<size_t>(pick(static_cast<int>(b.out.size()) + 1));
    Shape s(b.out.end() - static_cast<std::ptrdiff_t>(rank), b.out.end());
    for (int64_t& d : s) {
      if (pick(10) < 3) d = 1;
    }
    std::vector<double> v(static_cast<size_t>(*NumElements(s)));
    for (double& x : v) x = std::round(value(rng) * 64.0) / 64.0;
    b.inputs.push_back(HostTensor::Of<double>(s, v));
  }
  return b;
}

}  // namespace remex::kernels::testing
