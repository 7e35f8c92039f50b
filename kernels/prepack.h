// Constant inputs prepared at the model's load.
//
// A kernel that derives a form of a constant input (a copy of a constant B with
// padded rows, reordered weights) would otherwise make it on its first call, which
// lands on a model's first invoke: for a decoder step with 10 MiB of weights, tens of
// milliseconds of copying into fresh pages (docs/benchmarks.md, "Constant B prepared
// at the load"). A kernel that also implements ConstantPrepacker is given those
// constants when the VM that owns it is created, as ONNX Runtime's kernels are given
// theirs at session creation (OpKernel::PrePack).
#pragma once

#include <cstddef>

#include "kernels/kernels.h"

namespace remex::kernels {

class ConstantPrepacker {
 public:
  virtual ~ConstantPrepacker() = default;
  // `constant` is input `input` of one of the kernel's calls: the VM passes every
  // input of an InvokeKernel instruction whose register a LoadConst of the same
  // function last wrote before it (a constant, in the memory the kernel reads it
  // from: TensorRef::constant is true). It is a hint, not a promise: a call may still
  // pass another tensor (the kernel then prepares that one as it would have without
  // this), and a kernel that cannot prepare (no memory) leaves it to the call.
  // Called before the kernel's first call, at most once per input and constant.
  virtual void Prepack(size_t input, const TensorRef& constant) = 0;
};

}  // namespace remex::kernels
