// CUDA kernels: FusedElementwise (program format in kernels/ops/fused/fused.h; semantics of the
// CPU kernel kernels/ops/fused/fused.cc, i.e. of the ONNX ops the opcodes are named after,
// opsets 13-17), for float32, float16 (computed in float, rounded to nearest even on
// store) and float64.
//
// Per (input count, dtype) a kernel instance generates the program's CUDA C source
// (fused_codegen.h), compiles it with NVRTC to PTX for the GPU's compute capability
// (fused_nvrtc.h, cached process-wide per (source, architecture)), loads it with the
// CUDA driver API (cuModuleLoadDataEx, cached process-wide per (source, device): a
// module is loaded once per device and lives until exit) and launches it with
// cuLaunchKernel on the context's stream. When the node carries the signature the
// compiler records (attributes `num_inputs` and `dtype`, kernels/ops/fused/fused.h), this happens
// in the kernel factory, i.e. when the VM creates its kernels as it loads the
// executable (VirtualMachine::Create): an NVRTC error then fails the load, naming the
// op and carrying NVRTC's log, and the first Compute only plans the broadcast and
// launches. Nodes without the signature (hand-built ones) compile at their first
// Compute for each input count and dtype.
//
// The driver API's entry points are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so that the driver library is loaded only when a
// GPU is used and binaries that link these kernels start on machines without one.
//
// Under the host emulation of CUDA (REMEX_CUDA_EMULATION) there is no NVRTC and no
// driver: the kernel generates its source as on a GPU (so codegen errors surface where
// they would), plans the broadcast, checks that every operand is device memory, and
// then computes with the CPU kernel (kernels/ops/fused/fused.cc) on the emulated device's memory.
// The generated source itself is run on the host by fused_host_test.

#if !REMEX_CUDA_EMULATION
#include <cuda.h>
#endif
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/cuda_kernel.h"
#include "kernels/ops/fused/cuda/fused_codegen.h"
#include "kernels/ops/fused/cuda/fused_nvrtc.h"
#include "kernels/ops/fused/fused.h"
#include "kernels/internal.h"

namespace remex::kernels::cuda {
namespace {

constexpr std::string_view kOp = "FusedElementwise";
constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

#if !REMEX_CUDA_EMULATION
// The driver API functions the kernel uses.
struct DriverApi {
  decltype(&cuModuleLoadDataEx) module_load_data_ex = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuGetErrorName) get_error_name = nullptr;
};

Status LookUp(const char* symbol, void** fn) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  REMEX_RETURN_IF_ERROR(CudaCheck(kOp, std::string("cudaGetDriverEntryPointByVersion(") + symbol + ")",
                                  cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found)));
  if (found != cudaDriverEntryPointSuccess || *fn == nullptr) {
    return Unavailable(std::string(kOp) + " on cuda: the CUDA driver has no " + symbol);
  }
  return OkStatus();
}

// The entry points, looked up once per process.
StatusOr<const DriverApi*> GetDriverApi() {
  static std::once_flag once;
  static DriverApi api;
  static Status status;
  std::call_once(once, [] {
    status = LookUp("cuModuleLoadDataEx", reinterpret_cast<void**>(&api.module_load_data_ex));
    if (status.ok()) status = LookUp("cuModuleGetFunction", reinterpret_cast<void**>(&api.module_get_function));
    if (status.ok()) status = LookUp("cuLaunchKernel", reinterpret_cast<void**>(&api.launch_kernel));
    if (status.ok()) status = LookUp("cuGetErrorName", reinterpret_cast<void**>(&api.get_error_name));
  });
  if (!status.ok()) return status;
  return &api;
}

Status DriverCheck(const DriverApi& api, std::string_view call, CUresult r) {
  if (r == CUDA_SUCCESS) return OkStatus();
  const char* name = nullptr;
  if (api.get_error_name(r, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
  std::string message = std::string(kOp) + " on cuda: " + std::string(call) + " failed: " + name;
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

// Loaded kernels by (source, device), process-wide; modules are never unloaded.
struct ModuleCache {
  std::mutex mu;
  std::map<std::pair<std::string, int>, CUfunction> functions;
};

ModuleCache& Modules() {
  static ModuleCache* cache = new ModuleCache();  // Never destroyed: used until exit.
  return *cache;
}

// The loaded kernel of `source` on `device` (the current device), compiled for the
// device's compute capability.
StatusOr<CUfunction> LoadKernel(const std::string& source, int device) {
  ModuleCache& cache = Modules();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto key = std::make_pair(source, device);
  if (auto it = cache.functions.find(key); it != cache.functions.end()) return it->second;
  REMEX_ASSIGN_OR_RETURN(const DriverApi* api, GetDriverApi());
  int major = 0, minor = 0;
  REMEX_RETURN_IF_ERROR(CudaCheck(kOp, "cudaDeviceGetAttribute",
                                  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device)));
  REMEX_RETURN_IF_ERROR(CudaCheck(kOp, "cudaDeviceGetAttribute",
                                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device)));
  REMEX_ASSIGN_OR_RETURN(int arch, FusedTargetArch(major * 10 + minor));
  REMEX_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> ptx, CachedFusedKernelPtx(source, arch));
  CUmodule module = nullptr;
  REMEX_RETURN_IF_ERROR(
      DriverCheck(*api, "cuModuleLoadDataEx", api->module_load_data_ex(&module, ptx->c_str(), 0, nullptr, nullptr)));
  CUfunction function = nullptr;
  REMEX_RETURN_IF_ERROR(
      DriverCheck(*api, "cuModuleGetFunction", api->module_get_function(&function, module, kFusedKernelName)));
  cache.functions.emplace(std::move(key), function);
  return function;
}
#else
// The emulation's stand-in for a loaded kernel: the CPU kernel that computes it.
using CUfunction = OpKernel*;
#endif

}  // namespace

void ForgetFusedModules(int device) {
#if !REMEX_CUDA_EMULATION
  // The modules themselves went with the context; only the cache's entries remain.
  ModuleCache& cache = Modules();
  std::lock_guard<std::mutex> lock(cache.mu);
  std::erase_if(cache.functions, [device](const auto& entry) { return entry.first.second == device; });
#else
  (void)device;  // no modules are loaded under emulation
#endif
}

namespace {

// The program's format, checked before the inputs are known (the CPU kernel's factory
// checks the same); slot bounds are checked with the input count in Compute.
Status CheckProgramFormat(const Attributes& attrs) {
  StatusOr<std::vector<int64_t>> program = attrs.Ints("program");
  if (!program.ok()) return internal::OpError(kOp, program.status().message());
  StatusOr<std::vector<float>> immediates = attrs.Floats("immediates", {});
  if (!immediates.ok()) return internal::OpError(kOp, immediates.status().message());
  if (program->empty() || program->size() % kFusedWidth != 0) {
    return internal::OpError(kOp, "program has " + std::to_string(program->size()) +
                                      " entries, expects a positive multiple of " + std::to_string(kFusedWidth));
  }
  for (size_t j = 0; j < program->size(); j += kFusedWidth) {
    const int arity = FusedOperandCount((*program)[j]);
    if (arity == 0) {
      return internal::OpError(kOp, "instruction " + std::to_string(j / kFusedWidth) + ": unknown opcode " +
                                        std::to_string((*program)[j]));
    }
    for (int t = 0; t < 3; ++t) {
      const int64_t v = (*program)[j + 1 + t];
      if (t >= arity ? v != -1 : v < 0) {
        return internal::OpError(kOp, "instruction " + std::to_string(j / kFusedWidth) + ": operand " +
                                          std::to_string(t) + " is slot " + std::to_string(v));
      }
    }
  }
  return OkStatus();
}

// The signature the compiler records on the node (kernels/ops/fused/fused.h): its input count and
// dtype. nullopt when the node lacks either attribute; INVALID_ARGUMENT for a malformed
// one, UNIMPLEMENTED for a dtype without a kernel.
struct Signature {
  int64_t num_inputs = 0;
  DType type = DType::kFloat32;  // float32, float16 or float64 (CheckFusedDType).
};

StatusOr<std::optional<Signature>> ParseSignature(const Attributes& attrs) {
  if (!attrs.Has("num_inputs") || !attrs.Has("dtype")) return std::optional<Signature>();
  StatusOr<int64_t> n = attrs.Int("num_inputs");
  if (!n.ok()) return internal::OpError(kOp, n.status().message());
  if (*n < 1 || *n > kFusedMaxInputs) {
    return internal::OpError(kOp, "attribute 'num_inputs' is " + std::to_string(*n) + ", expects 1 to " +
                                      std::to_string(kFusedMaxInputs));
  }
  StatusOr<std::string> name = attrs.String("dtype");
  if (!name.ok()) return internal::OpError(kOp, name.status().message());
  std::optional<DType> dtype = DTypeFromName(*name);
  if (!dtype) return internal::OpError(kOp, "attribute 'dtype' names no dtype: '" + *name + "'");
  REMEX_RETURN_IF_ERROR(CheckFusedDType(*dtype));
  return std::optional<Signature>(Signature{*n, *dtype});
}

class FusedCudaKernel final : public OpKernel {
 public:
  // `host_factory`: the CPU kernel's factory, which computes under emulation (unused,
  // and empty, on a GPU build).
  FusedCudaKernel(const OpDef& def, Attributes attrs, std::vector<int64_t> program,
                  std::vector<float> immediates, CudaKernelContext context,
                  std::optional<KernelFactory> host_factory)
      : def_(def),
        attrs_(std::move(attrs)),
        program_(std::move(program)),
        immediates_(std::move(immediates)),
        context_(std::move(context)),
        host_factory_(std::move(host_factory)) {}

  // Generates, compiles and loads the kernel for `signature` ahead of the first call.
  Status Prepare(const Signature& signature) {
    return Function(signature.num_inputs, signature.type).status();
  }

  Status Compute(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) override {
    REMEX_RETURN_IF_ERROR(internal::CheckAgainstShapeFn(def_, attrs_, inputs, outputs));
    const TensorRef& out = outputs[0];
    REMEX_RETURN_IF_ERROR(CheckFusedDType(out.dtype));
    const DType type = out.dtype;
    const int64_t n = *NumElements(out.shape);
    if (n == 0) return OkStatus();
    shapes_.clear();
    for (const TensorRef& t : inputs) shapes_.push_back(t.shape);
    REMEX_RETURN_IF_ERROR(PlanFusedBroadcast(shapes_, out.shape, params_));
    params_.n = n;
    for (size_t k = 0; k < inputs.size(); ++k) params_.inputs[k] = inputs[k].data;
    params_.output = out.data;
    REMEX_ASSIGN_OR_RETURN(CUfunction function, Function(static_cast<int64_t>(inputs.size()), type));
#if REMEX_CUDA_EMULATION
    for (const TensorRef& t : inputs) {
      if (!cuda_emulation::IsDeviceRange(t.data,
                                         static_cast<size_t>(*NumElements(t.shape)) * DTypeSize(t.dtype))) {
        return Internal(std::string(kOp) + " on cuda: an input is not in device memory");
      }
    }
    if (!cuda_emulation::IsDeviceRange(out.data, static_cast<size_t>(n) * DTypeSize(out.dtype))) {
      return Internal(std::string(kOp) + " on cuda: the output is not in device memory");
    }
    // The CPU kernel stands for the generated one. On a capturing stream it is queued
    // as the launch would be, recorded with copies of the operands for the graph.
    const auto stream = static_cast<cudaStream_t>(context_.stream);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    REMEX_RETURN_IF_ERROR(CudaCheck(kOp, "cudaStreamIsCapturing", cudaStreamIsCapturing(stream, &capture)));
    if (capture == cudaStreamCaptureStatusNone) return function->Compute(inputs, outputs);
    std::function<cudaError_t()> launch = [function, in = std::vector<TensorRef>(inputs.begin(), inputs.end()),
                                           out = std::vector<TensorRef>(outputs.begin(), outputs.end())]() mutable {
      Status st = function->Compute(in, out);
      return st.ok() ? cudaSuccess
                     : cuda_emulation::Fail(cudaErrorLaunchFailure, kOp.data(), st.message().c_str());
    };
    return CudaCheck(kOp, "FusedElementwise launch", cuda_emulation::Enqueue(stream, kOp.data(), std::move(launch)));
#else
    REMEX_ASSIGN_OR_RETURN(const DriverApi* api, GetDriverApi());
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
    void* args[] = {&params_};
    return DriverCheck(*api, "cuLaunchKernel",
                       api->launch_kernel(function, blocks, 1, 1, kThreads, 1, 1, 0,
                                          static_cast<CUstream>(context_.stream), args, nullptr));
#endif
  }

 private:
  // The loaded kernel for `num_inputs` inputs of `type`, generated on first use; makes
  // the context's GPU current either way. The source is generated (and the program
  // checked for that input count) before any CUDA call.
  StatusOr<CUfunction> Function(int64_t num_inputs, DType type) {
    const auto key = std::make_pair(num_inputs, type);
    auto it = functions_.find(key);
    if (it != functions_.end()) {
      REMEX_RETURN_IF_ERROR(CudaCheck(kOp, "cudaSetDevice", cudaSetDevice(context_.device)));
      return it->second;
    }
    REMEX_ASSIGN_OR_RETURN(std::string source, GenerateFusedKernelSource(program_, immediates_, num_inputs, type));
    REMEX_RETURN_IF_ERROR(CudaCheck(kOp, "cudaSetDevice", cudaSetDevice(context_.device)));
#if REMEX_CUDA_EMULATION
    if (!host_) {
      if (!host_factory_) return Internal(std::string(kOp) + " on cuda: the CPU kernel is not registered");
      REMEX_ASSIGN_OR_RETURN(host_, (*host_factory_)(attrs_));
    }
    CUfunction function = host_.get();
#else
    REMEX_ASSIGN_OR_RETURN(CUfunction function, LoadKernel(source, context_.device));
#endif
    functions_.emplace(key, function);
    return function;
  }

  const OpDef& def_;
  const Attributes attrs_;
  const std::vector<int64_t> program_;
  const std::vector<float> immediates_;
  const CudaKernelContext context_;
  std::map<std::pair<int64_t, DType>, CUfunction> functions_;
  const std::optional<KernelFactory> host_factory_;
#if REMEX_CUDA_EMULATION
  std::unique_ptr<OpKernel> host_;
#endif
  // Per-call state, kept to spare allocations.
  std::vector<Shape> shapes_;
  FusedParams params_;
};

}  // namespace

Status AddFusedCudaKernels(KernelRegistry& registry, CudaKernelContext context) {
  std::optional<KernelFactory> host_factory;
#if REMEX_CUDA_EMULATION
  if (const KernelFactory* f = registry.FindKernel(kOp, DeviceKind::kCpu)) host_factory = *f;
#endif
  return AddCudaKernel(registry, kOp,
                       [context, host_factory](
                           const OpDef& def, const Attributes& attrs) -> StatusOr<std::unique_ptr<OpKernel>> {
                         REMEX_RETURN_IF_ERROR(CheckProgramFormat(attrs));
                         REMEX_ASSIGN_OR_RETURN(std::optional<Signature> signature, ParseSignature(attrs));
                         auto kernel = std::make_unique<FusedCudaKernel>(def, attrs, *attrs.Ints("program"),
                                                                         *attrs.Floats("immediates", {}),
                                                                         context, host_factory);
                         if (signature) REMEX_RETURN_IF_ERROR(kernel->Prepare(*signature));
                         return std::unique_ptr<OpKernel>(std::move(kernel));
                       });
}

}  // namespace remex::kernels::cuda
