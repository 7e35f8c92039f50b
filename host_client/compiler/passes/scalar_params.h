// The scalar parameters of a node (kernels.h OpTraits::params): what the fusion passes
// turn into FusedElementwise immediates (elementwise_fusion.h) and FusedConv /
// FusedMatMul `activation_params` (epilogue_fusion.h).
#pragma once

#include <optional>
#include <vector>

#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

// The value of value `v` when it is a one-element constant of a float or integer dtype,
// as double; nullopt otherwise (or for v < 0).
std::optional<double> ScalarConstant(const Graph& g, int v);

// `x` as the float32 an immediate holds, when that is exact (NaN and infinities too).
std::optional<float> AsImmediate(std::optional<double> x);

// The values of `def.traits.params` for node `n`, in order: a float attribute (its
// default when absent), or an input that is a one-element constant exactly
// representable as float32 (its default when the input is absent). nullopt when a
// parameter cannot be read: a required one absent, an input that is no such constant,
// an attribute that is not a float. Inputs of `n` past the op's data operands that no
// parameter names also give nullopt (the formula would not see them).
std::optional<std::vector<float>> ReadScalarParams(const Graph& g, const Node& n, const kernels::OpDef& def);

// The number of data operands of node `n` (inputs that are not parameters): all its
// inputs for a variadic op, else its inputs before the first parameter input (all of
// them when every parameter is an attribute).
size_t DataOperandCount(const Node& n, const kernels::OpDef& def);

}  // namespace remex::compiler
