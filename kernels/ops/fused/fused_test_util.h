// Test helpers of FusedElementwise (kernels/ops/fused/fused.h), shared by the CPU and the CUDA
// tests: the opcodes and Pow exponents of random programs, random inputs that
// broadcast to a random output shape, and random programs.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "kernels/ops/fused/fused.h"
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
    FusedOpcode::kClip,    FusedOpcode::kSwish,     FusedOpcode::kGelu};

// The exponents of Pow in random programs (immediates).
inline constexpr float kRandomPowExponents[] = {2.0f, 1.0f, 0.5f, 3.0f, -1.0f, 1.5f};

// A random output shape and 1 to `max_inputs` (4 unless told) float64 inputs that
// broadcast to it.
struct BroadcastInputs {
  Shape out;
  std::vector<HostTensor> inputs;
};

// Output ranks 0 to 4 of extents among 1, 2, 3, 7, 17, 64, 700 (the large ones only
// while the output has at most 2000 elements); each input takes the output's last dims,
// some set to 1. Values are multiples of 1/64 in [-2, 2], exact in every float dtype.
inline BroadcastInputs RandomBroadcastInputs(std::mt19937& rng, int max_inputs = 4) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int64_t kDims[] = {1, 2, 3, 7, 17, 64, 700};
  BroadcastInputs b;
  b.out.resize(static_cast<size_t>(pick(5)));
  int64_t elems = 1;
  for (int64_t& d : b.out) {
    d = kDims[pick(elems > 2000 ? 5 : 7)];
    elems *= d;
  }
  const int nin = 1 + pick(max_inputs);
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

// A random valid FusedElementwise program over `nin` inputs: 1 to 8 instructions drawn
// from kRandomProgramOpcodes, whose operands are inputs or earlier results (binary ops'
// second operand now and then an immediate), and 9 immediates: three multiples of 1/8
// in [-2, 2] (LeakyRelu's and Swish's alpha, HardSigmoid's alpha and beta, Clip's bounds), then
// kRandomPowExponents (Pow's exponent, always an immediate).
struct RandomFusedProgram {
  std::vector<int64_t> program;
  std::vector<float> immediates;
};

inline RandomFusedProgram MakeRandomFusedProgram(std::mt19937& rng, int nin) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  RandomFusedProgram p;
  std::uniform_real_distribution<double> value(-2.0, 2.0);
  for (int i = 0; i < 3; ++i) p.immediates.push_back(static_cast<float>(std::round(value(rng) * 8.0) / 8.0));
  for (float e : kRandomPowExponents) p.immediates.push_back(e);
  const int nimm = static_cast<int>(p.immediates.size());
  const int count = 1 + pick(8);
  for (int j = 0; j < count; ++j) {
    const FusedOpcode op = kRandomProgramOpcodes[pick(static_cast<int>(std::size(kRandomProgramOpcodes)))];
    const int arity = FusedOperandCount(static_cast<int64_t>(op));
    // An input or an earlier result.
    auto value_slot = [&]() -> int64_t {
      const int v = pick(nin + j);
      return v < nin ? v : nin + nimm + (v - nin);
    };
    auto plain_imm = [&]() -> int64_t { return nin + pick(3); };
    int64_t a = value_slot(), b = -1, c = -1;
    if (op == FusedOpcode::kPow) {
      b = nin + 3 + pick(static_cast<int>(std::size(kRandomPowExponents)));
    } else if (op == FusedOpcode::kLeakyRelu || op == FusedOpcode::kSwish || op == FusedOpcode::kHardSigmoid ||
               op == FusedOpcode::kClip) {
      b = plain_imm();
      if (arity == 3) c = plain_imm();
    } else if (arity == 2) {
      b = pick(5) == 0 ? plain_imm() : value_slot();
    }
    p.program.insert(p.program.end(), {static_cast<int64_t>(op), a, b, c});
  }
  return p;
}

}  // namespace remex::kernels::testing
