// The training domain's optimizers (ONNX ai.onnx.preview.training opset 1: Adagrad,
// Adam, Momentum) as their CPU kernels (kernels/ops/training/optimizer.cc) and CUDA kernels
// (kernels/ops/training/cuda/optimizer.cc) read them: the attributes, and where each tensor sits among
// the inputs and outputs.
//
// Inputs: R (float32 or float64 scalar, the learning rate), T (int64 scalar, the update
// count), then n tensors X_1..X_n to optimise, their gradients G_1..G_n, and the
// optimizer's state, `states` groups of n: Adagrad H (accumulated squared gradient),
// Adam V then H (first and second moments), Momentum V. Outputs: X_1'..X_n' then each
// state group's new values, in the inputs' order. Every X, G and state tensor has one
// dtype (float32 or float64); each G and state tensor has its X's shape.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kernels/internal.h"
#include "kernels/ops/training/optimizer_ops.h"

namespace remex::kernels::internal {

// The ONNX domain of the optimizers.
inline constexpr std::string_view kTrainingDomain = "ai.onnx.preview.training";

// The state groups of an optimizer: 2 for Adam (V, H), 1 for Adagrad (H) and Momentum (V).
inline int OptimizerStates(optimizer::Rule rule) { return rule == optimizer::Rule::kAdam ? 2 : 1; }

// The rule and attributes of `op` ("Adagrad", "Adam" or "Momentum"). INVALID_ARGUMENT
// "<op>: ..." for a missing required attribute (Momentum's alpha, beta, mode and
// norm_coefficient), a mode other than "standard" or "nesterov", or an attribute of
// the wrong type.
StatusOr<optimizer::Params> OptimizerParamsOf(std::string_view op, const Attributes& attrs);

struct OptimizerView {
  optimizer::Params params;
  int64_t n = 0;                // Tensors optimised.
  int states = 1;               // State groups (OptimizerStates).
  DType dtype = DType::kUndefined;       // X's, G's and the state's: float32 or float64.
  DType rate_dtype = DType::kUndefined;  // R's: float32 or float64.
  std::vector<Shape> shapes;    // X_i's shape, i in [0, n).
  std::vector<int64_t> counts;  // X_i's elements.

  // Input index of X_i, G_i and state group k's tensor i; output index of X_i' and of
  // state group k's new tensor i.
  size_t X(int64_t i) const { return static_cast<size_t>(2 + i); }
  size_t G(int64_t i) const { return static_cast<size_t>(2 + n + i); }
  size_t State(int k, int64_t i) const { return static_cast<size_t>(2 + (2 + k) * n + i); }
  size_t NewX(int64_t i) const { return static_cast<size_t>(i); }
  size_t NewState(int k, int64_t i) const { return static_cast<size_t>((1 + k) * n + i); }
};

// Checks the inputs of `op` against the layout above: INVALID_ARGUMENT "<op>: ..."
// naming the input for a count that is not 2 + (2 + states) * n with n >= 1, R or T of
// the wrong dtype or not one element, X of a dtype other than float32 / float64, or a
// G or state tensor whose dtype or shape differs from its X's.
StatusOr<OptimizerView> OptimizerViewOf(std::string_view op, const Attributes& attrs,
                                        std::span<const ShapeFnArg> in);

}  // namespace remex::kernels::internal
