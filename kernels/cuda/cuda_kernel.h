// What the CUDA kernels' host code shares: the kernel base class and the registration
// of a kernel factory under an op's OpDef.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

// Makes the CUDA kernel of an op for a node's attributes (INVALID_ARGUMENT /
// UNIMPLEMENTED for attributes the kernel refuses). `def` is the op's OpDef.
using CudaKernelMake = std::function<StatusOr<std::unique_ptr<OpKernel>>(const OpDef& def, const Attributes& attrs)>;

// Registers `make` as the CUDA kernel of the entry of `name` that starts at
// `since_version` (kernels are keyed by (op, entry, device) as OpDefs are by (op, opset
// range)); FAILED_PRECONDITION "RegisterCudaKernels: op <name> has no OpDef ..." when
// `registry` has no such entry.
inline Status AddCudaKernel(KernelRegistry& registry, std::string_view name, int since_version,
                            CudaKernelMake make) {
  const OpDef* def = registry.FindOp(name, since_version);
  if (!def || def->since_version != since_version) {
    return FailedPrecondition("RegisterCudaKernels: op " + std::string(name) + "-" +
                              std::to_string(since_version) + " has no OpDef; call RegisterOpDefs first");
  }
  return registry.AddKernel(
      name, since_version, DeviceKind::kCuda,
      [def = *def, make = std::move(make)](const Attributes& attrs) { return make(def, attrs); });
}

// Registers `make` as the CUDA kernel of an op with a single entry; FAILED_PRECONDITION
// when the op has no OpDef, or several entries (each then needs its own kernel, named
// by its since_version).
inline Status AddCudaKernel(KernelRegistry& registry, std::string_view name, CudaKernelMake make) {
  const std::vector<const OpDef*> entries = registry.OpVersions(name);
  if (entries.size() > 1) {
    return FailedPrecondition("RegisterCudaKernels: op " + std::string(name) + " has entries for opsets " +
                              registry.SupportedVersions(name) + "; register a kernel per entry");
  }
  if (entries.empty()) {
    return FailedPrecondition("RegisterCudaKernels: op " + std::string(name) +
                              " has no OpDef; call RegisterOpDefs first");
  }
  return AddCudaKernel(registry, name, entries[0]->since_version, std::move(make));
}

// A factory for K(def, attrs, args...).
template <typename K, typename... Args>
CudaKernelMake MakeCudaKernel(Args... args) {
  return [args...](const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(std::make_unique<K>(def, attrs, args...));
  };
}

// What a CudaKernel does before Run.
enum class EmptyOutputs : uint8_t {
  kRun,   // Run is called whatever the outputs' sizes.
  kSkip,  // Compute returns OK without calling Run when every output is empty.
};

// A CUDA kernel: Compute checks the inputs and outputs against the op's shape function
// (internal::CheckAgainstShapeFn), optionally returns early when every output is
// empty, and calls Run, which checks dtypes and attributes (before any CUDA call) and
// queues the work on stream(), typically through Launch.
class CudaKernel : public OpKernel {
 public:
  CudaKernel(OpDef def, Attributes attrs, CudaKernelContext context, EmptyOutputs empty = EmptyOutputs::kRun)
      : def_(std::move(def)), attrs_(std::move(attrs)), context_(context), empty_(empty) {}

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) final {
    REMEX_RETURN_IF_ERROR(internal::CheckAgainstShapeFn(def_, attrs_, inputs, outputs));
    if (empty_ == EmptyOutputs::kSkip) {
      bool empty = true;
      for (const TensorRef& t : outputs) empty = empty && NumElements(t.shape).value_or(0) == 0;
      if (empty) return OkStatus();
    }
    return Run(inputs, outputs);
  }

 protected:
  // Inputs and outputs match the shape function (and, with EmptyOutputs::kSkip, at
  // least one output is non-empty).
  virtual Status Run(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) = 0;

  const std::string& op() const { return def_.name; }
  const Attributes& attrs() const { return attrs_; }
  const CudaKernelContext& context() const { return context_; }
  cudaStream_t stream() const { return static_cast<cudaStream_t>(context_.stream); }
  // Selects the kernel's device (for the launches and copies that follow).
  Status UseDevice() const { return CudaCheck(def_.name, "cudaSetDevice", cudaSetDevice(context_.device)); }
  // Selects the device and calls `launch` (returning a launcher's cudaError_t): OK, or
  // "<op> on cuda: kernel launch failed: ...".
  template <typename F>
  Status Launch(F&& launch) const {
    REMEX_RETURN_IF_ERROR(UseDevice());
    return CudaCheck(def_.name, "kernel launch", launch());
  }
  // UNIMPLEMENTED "<op> on cuda: dtype <dtype> is not implemented (<accepted>)".
  Status Unsupported(DType dtype, std::string_view accepted) const {
    return Unimplemented(def_.name + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                         " is not implemented (" + std::string(accepted) + ")");
  }

 private:
  const OpDef def_;
  const Attributes attrs_;
  const CudaKernelContext context_;
  const EmptyOutputs empty_;
};

}  // namespace remex::kernels::cuda
