// What the CUDA kernels' host code shares: the kernel base class and the registration
// of a kernel factory under an op's OpDef.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/visit_dtype.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

namespace remex::kernels::cuda {

// Registers `make` as the CUDA kernel of the entry of `name` that starts at
// `since_version` (kernels are keyed by (op, entry, device) as OpDefs are by (op, opset
// range)); FAILED_PRECONDITION when `registry` has no such entry.
inline Status AddCudaKernel(KernelRegistry& registry, std::string_view name, int since_version,
                            KernelMake make) {
  return registry.AddKernel(name, since_version, DeviceKind::kCuda, std::move(make));
}

// Registers `make` as the CUDA kernel of an op with a single entry; FAILED_PRECONDITION
// "RegisterCudaKernels: op <name> ..." when the op has no OpDef, or several entries
// (each then needs its own kernel, named by its since_version).
inline Status AddCudaKernel(KernelRegistry& registry, std::string_view name, KernelMake make) {
  REMEX_ASSIGN_OR_RETURN(const int since, internal::OnlyEntrySince(registry, name, "RegisterCudaKernels"));
  return AddCudaKernel(registry, name, since, std::move(make));
}

// The factory of CUDA kernel K: K::Create(def, attrs, args...) or K(def, attrs,
// args...) (internal::MakeKernel).
template <typename K, typename... Args>
KernelMake MakeCudaKernel(Args... args) {
  return internal::MakeKernel<K>(args...);
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
  // `def` is the registry's OpDef (KernelMake), which outlives the kernel.
  CudaKernel(const OpDef& def, Attributes attrs, CudaKernelContext context,
             EmptyOutputs empty = EmptyOutputs::kRun)
      : def_(def), attrs_(std::move(attrs)), context_(context), empty_(empty) {}

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
  // The one dtype dispatch of a launch: selects the device and calls launch(T{})
  // (returning a launcher's cudaError_t, typically Launch<Name><T>(...)) for the T
  // among Ts that is `dtype`'s element type (VisitDType, kernels/cuda/visit_dtype.h).
  // OK, "<op> on cuda: kernel launch failed: ...", or Unsupported(dtype, accepted)
  // when none of Ts is.
  template <typename... Ts, typename F>
  Status LaunchFor(DType dtype, std::string_view accepted, F&& launch) const {
    return RunFor<Ts...>(dtype, accepted, [&](auto tag) { return Launch([&] { return launch(tag); }); });
  }
  // The dtype dispatch of work of more than one step (host checks, several launches):
  // run(T{}) (returning Status) for the T among Ts that is `dtype`'s element type
  // (VisitDType), or Unsupported(dtype, accepted) when none of Ts is.
  template <typename... Ts, typename F>
  Status RunFor(DType dtype, std::string_view accepted, F&& run) const {
    std::optional<Status> status = VisitDType<Ts...>(dtype, run);
    return status ? *std::move(status) : Unsupported(dtype, accepted);
  }
  // UNIMPLEMENTED "<op> on cuda: dtype <dtype> is not implemented (<accepted>)".
  Status Unsupported(DType dtype, std::string_view accepted) const {
    return Unimplemented(def_.name + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                         " is not implemented (" + std::string(accepted) + ")");
  }

 private:
  const OpDef& def_;
  const Attributes attrs_;
  const CudaKernelContext context_;
  const EmptyOutputs empty_;
};

}  // namespace remex::kernels::cuda
