// Symbolic shape and dtype inference, with constant folding: the compiler's second
// stage, after import (onnx_import.h).
//
// Symbolic shapes. Every dynamic dimension of a graph input is a symbol: its ONNX
// dim_param ("W"), or "<input>:<axis>" when the model gives none; inputs that share
// a dim_param share the symbol. Symbols may have bounds (CompileOptions::bounds).
// Inference evaluates each op's own shape function at a few assignments of the
// symbols ("samples", chosen inside the bounds), carrying the values of small integer
// tensors (Shape -> Gather -> Concat -> Reshape chains) along, so it reaches through
// data-dependent shape functions without a symbolic rewrite of each op. From the
// samples it knows per dimension whether it is static, and names dynamic ones by the
// simplest expression that fits every sample ("W/4", "N*W", "H+1"; "?" otherwise).
// Bounds of derived dims come from evaluating at the symbols' lower and upper bounds
// (exact for shape functions monotone in their input dims, which all ops here are).
// Compile-time shapes are never trusted at run time where an input dim is dynamic:
// the VM reruns the shape function (InvokeShapeFunc), so one executable serves every
// input shape.
#pragma once

#include <map>
#include <string>

#include "base/status.h"
#include "host_client/compiler/graph.h"
#include "kernels/kernels.h"

namespace remex::compiler {

// Infers dtypes and (symbolic) shapes through the graph and its regions with the
// registry's shape functions; with `fold_constants`, a node whose inputs are all
// constants is evaluated with its CPU kernel and replaced by its results. Dims stay
// unknown (-1, "?") where they depend on values only known at run time. Returns the
// number of nodes folded; errors name the node.
StatusOr<int> InferShapes(Graph& graph, const kernels::KernelRegistry& registry, bool fold_constants,
                          const std::map<std::string, DimBounds>& bounds = {});

// "[N, 3, H/2, 64]" from a value's shape and symbolic dims.
std::string SymbolicShapeString(const Value& v);

}  // namespace remex::compiler
