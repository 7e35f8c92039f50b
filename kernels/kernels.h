// The operator library: per op its shape function (with per-input data dependence)
// and per device its kernel, held in an explicit KernelRegistry.
//
// Semantics are ONNX's (https://onnx.ai/onnx/operators/, opsets 7-17). Ops are keyed
// as ONNX Runtime keys its kernels (ONNX_OPERATOR_VERSIONED_KERNEL_EX): an op has one
// OpDef per range of opsets [since_version, end_version] over which its semantics stay
// the same, and a node is bound to the entry covering its model's opset. Where an op's
// definition changed (Dropout-10's bool mask, Flatten-11's negative axis,
// Resize-10/11/13, Softmax-13's axis), the new semantics is a new entry; entries may
// share code through helpers, but no kernel reads an op version.
//   - The frontend rewrites two older forms into the newer definition and binds the
//     node to its entry: Clip-6's min/max attributes become Clip-11's optional inputs
//     1 and 2, Slice-1's starts/ends/axes attributes Slice-10's inputs.
//   - Constant nodes become executable constants and never reach a kernel.
//   - Attributes that later versions turned into inputs and that one entry still
//     spans (Squeeze/Unsqueeze axes, Split split, ReduceSum axes, Pad pads, TopK k)
//     are accepted in either form by the shape function and the kernel.
// Optional inputs that a node leaves empty arrive "absent" (see TensorRef).
//
// Thread-safety: a filled KernelRegistry is immutable and may be shared. An OpKernel
// instance is used by one VM at a time (it may cache primitives between calls).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/ops/fused/fused.h"

namespace remex::kernels {

enum class DeviceKind : uint8_t { kCpu = 0, kCuda = 1 };
std::string_view DeviceKindName(DeviceKind device);

// One ONNX attribute value after normalisation. Tensor-valued attributes do not
// reach kernels (the frontend turns them into constants).
using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>>;

// A node's attributes by ONNX name. Getters return INVALID_ARGUMENT when the
// attribute exists with another type, NOT_FOUND when absent and no default is given.
class Attributes {
 public:
  void Set(std::string name, AttrValue value) { values_[std::move(name)] = std::move(value); }
  bool Has(std::string_view name) const { return values_.find(name) != values_.end(); }
  const std::map<std::string, AttrValue, std::less<>>& all() const { return values_; }

  StatusOr<int64_t> Int(std::string_view name) const;
  StatusOr<int64_t> Int(std::string_view name, int64_t default_value) const;
  StatusOr<float> Float(std::string_view name) const;
  StatusOr<float> Float(std::string_view name, float default_value) const;
  StatusOr<std::string> String(std::string_view name) const;
  StatusOr<std::string> String(std::string_view name, std::string default_value) const;
  StatusOr<std::vector<int64_t>> Ints(std::string_view name) const;
  StatusOr<std::vector<int64_t>> Ints(std::string_view name, std::vector<int64_t> default_value) const;
  StatusOr<std::vector<float>> Floats(std::string_view name) const;
  StatusOr<std::vector<float>> Floats(std::string_view name, std::vector<float> default_value) const;
  StatusOr<std::vector<std::string>> Strings(std::string_view name) const;
  StatusOr<std::vector<std::string>> Strings(std::string_view name, std::vector<std::string> default_value) const;

 private:
  std::map<std::string, AttrValue, std::less<>> values_;
};

// A non-owning view of a dense row-major tensor in some device's memory.
// `data == nullptr && dtype == kUndefined` marks an absent optional input.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  Shape shape;
  // The tensor is one of the executable's constants (or a kernel's cached copy of
  // one): its bytes at `data` never change while the VM that passed it lives, so a
  // kernel instance may keep forms derived from them (oneDNN's reordered weights, a
  // float32 copy of float16 weights) keyed by `data`. False is always safe.
  bool constant = false;
  // A view that grows in place (vm::Tensor::physical): `shape` is the leading box of a
  // dense row-major array of dims `physical` at `data`. Empty (dense) for every kernel
  // but those that read views (OpKernel::ReadsViews).
  Shape physical = {};

  bool present() const { return dtype != DType::kUndefined; }
  // Row-major strides, in elements, of where the elements lie: of `physical` for a view.
  std::vector<int64_t> StoredStrides() const {
    const Shape& dims = physical.empty() ? shape : physical;
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    return strides;
  }
};

// Dtype and shape of a value; what a shape function computes per output.
struct TensorInfo {
  DType dtype = DType::kUndefined;
  Shape shape;
};

// What a shape function needs of one input: its shape only, or its values too.
// Only kData inputs are ever copied device-to-host to run a shape function.
enum class ShapeDep : uint8_t { kShape = 0, kData = 1 };

// One input as a shape function sees it. `data` points to host memory holding the
// input's values when its ShapeDep is kData (and the input is present); it is
// nullptr for kShape inputs.
struct ShapeFnArg {
  bool present = false;
  DType dtype = DType::kUndefined;
  Shape shape;
  const void* data = nullptr;
};

// Computes output dtypes and shapes from inputs and attributes. Returns
// INVALID_ARGUMENT (naming the op and the offending input/attribute) for inputs the
// op does not accept.
using ShapeFn = std::function<StatusOr<std::vector<TensorInfo>>(
    const Attributes& attrs, std::span<const ShapeFnArg> inputs)>;

// Output dtypes from the attributes and the inputs' dtypes alone (kUndefined for
// absent inputs): what the compiler knows of a node whose shapes are unknown at
// compile time. Entries beyond the returned list take input 0's dtype.
using DTypeFn = std::function<std::vector<DType>(const Attributes& attrs, std::span<const DType> inputs)>;

// A scalar parameter of an op's formula: a float attribute, or a one-element input
// that the compiler's passes read when it is a constant. What FusedElementwise takes as
// an immediate and FusedConv / FusedMatMul as `activation_params`, in this order.
struct ScalarParam {
  std::string attribute;  // Non-empty: the float attribute holding the parameter.
  int input = -1;         // Otherwise: the input holding it.
  std::optional<float> default_value;  // The ONNX default when absent; nullopt: required.
};

// What the compiler's graph passes (host_client/compiler/passes/) know of an op: they
// read these traits, never lists of op names, so an op registered with its traits is
// taken up by every pass. kernels/op_traits_test.cc checks each trait against the
// op's CPU kernel.
// An internal integer attribute a device's kernel takes as a per-node tuning choice
// (`remex tune`, docs/tuning.md; the compiler writes it into the node's attributes),
// with its inclusive range. Other devices' kernels ignore it.
struct TunableAttr {
  std::string name;
  int64_t min = 0, max = 0;
};
// The ranges of the CUDA kernels' tunable attributes (kernels/ops/nn/cuda/conv.cc and
// kernels/ops/math/cuda/matmul.cc check them against cuDNN's and cuBLASLt's headers):
// cudnnConvolutionFwdAlgo_t values, cudnnMathType_t values, and the heuristic results
// cuBLASLt is asked for.
inline constexpr int64_t kCudnnFwdAlgoCount = 8;
inline constexpr int64_t kCudnnMathTypeCount = 4;
inline constexpr int64_t kCublasLtAlgoCount = 8;
// The CPU Conv kernel's tunable `onednn_algo` (kernels/ops/nn/conv.cc): 0 oneDNN's
// convolution_direct, 1 its convolution_winograd.
inline constexpr int64_t kOnednnConvAlgoCount = 2;

struct OpTraits {
  // Each output element is a function of the input elements at the same index under
  // ONNX multidirectional broadcasting, whatever the index: the op commutes with any
  // permutation of its operands' axes.
  bool elementwise = false;
  // Runs on NHWC operands unchanged (the layout pass keeps such an op in NHWC between
  // Convs): elementwise ops, whose attributes name no axis.
  bool layout_agnostic = false;
  // The FusedElementwise opcode (kernels/ops/fused/fused.h) computing the op on float inputs: its
  // data operands (all inputs not in `params`; a variadic op folds the binary opcode
  // over them), then `params` as immediates. nullopt: not fusable.
  std::optional<FusedOpcode> fused_opcode;
  // FusedConv and FusedMatMul may apply the op (one data input) as their epilogue
  // `activation` (kernels/conv_epilogue.h), with `params` as `activation_params`.
  bool epilogue_activation = false;
  // The formula's scalar parameters after its data operands (kernels/scalar_ops.h
  // operand order): LeakyRelu [alpha], HardSigmoid [alpha, beta], Clip [min, max],
  // Pow [exponent].
  std::vector<ScalarParam> params;
  // Per-node tuning choices the op's kernels take (Conv and FusedConv: cudnn_algo
  // [-1, 7] (-1: cuDNN's heuristic) and cudnn_math [-1, 3] (-1: the dtype's default) on
  // CUDA, onednn_algo [-1, 1] (-1: the CPU kernel's own choice) on the CPU; MatMul,
  // FusedMatMul and Gemm: cublaslt_algo [0, 7], the heuristic's result index).
  std::vector<TunableAttr> tunable;
  // Output 0 may be written into the buffer of this input (its index; -1: none): every
  // kernel of the op reads each element of it before writing that element, or reads
  // it whole first, or (a kernel that cannot) copies it first when it aliases output 0
  // (FusedConv's residual Z: 3; the CPU kernel's oneDNN sum post-op adds to the buffer,
  // the CUDA kernel copies Z). The code generator then gives output
  // 0 the input's buffer where the input is a value computed in the function whose
  // last reader is the node, with output 0's dtype and static shape: no allocation, and
  // no copy of Z into Y.
  int output_overwrites_input = -1;
};

// The end_version of an op's newest entry: it covers every later opset (as an ONNX
// Runtime kernel registered without an end version).
inline constexpr int kOpenEndedVersion = std::numeric_limits<int32_t>::max();
// A lookup version meaning "the op's newest entry": what nodes built outside the ONNX
// frontend (compiler passes, tests) are bound to.
inline constexpr int kNewestVersion = kOpenEndedVersion;

// Device-independent description of one version range of an op.
struct OpDef {
  std::string name;       // ONNX op_type, e.g. "Conv".
  // The op's ONNX domain: empty for the default domain (ai.onnx), else e.g.
  // "ai.onnx.preview.training". Op names are unique across domains; the frontend binds
  // a node only to an entry of its own domain, at that domain's imported opset.
  std::string domain;
  // The opsets this entry covers, inclusive: since_version is the ONNX
  // OpSchema::since_version of the first definition it implements (for an op's first
  // entry, the definition in effect at opset 7, or the op's first one when later);
  // end_version is the last opset before the op's next entry, kOpenEndedVersion for
  // the newest entry. Internal ops (Fused*) have one entry from version 1.
  int since_version = 1;
  int end_version = kOpenEndedVersion;
  int min_inputs = 1;
  int max_inputs = 1;     // -1: variadic.
  int min_outputs = 1;
  int max_outputs = 1;
  // Per input; inputs beyond the list take the last entry (variadic ops).
  std::vector<ShapeDep> input_deps;
  ShapeFn infer;
  // Null: every output has input 0's dtype (elementwise, data movement, ...).
  DTypeFn output_dtypes;
  // The kernel reads its inputs' dtypes and shapes, never their data (Shape, Size):
  // inputs may arrive with data == nullptr, and the op folds to a constant whenever
  // its input shapes are static.
  bool reads_shapes_only = false;
  // What graph passes may assume of the op.
  OpTraits traits;

  ShapeDep DepOf(size_t input) const {
    if (input_deps.empty()) return ShapeDep::kShape;
    return input < input_deps.size() ? input_deps[input] : input_deps.back();
  }
};

// Where a kernel reads input `input` from, which the compiler places it in and the VM's
// verifier checks: a host kernel reads host memory; a device kernel reads device memory,
// except for kData inputs, which its host-side code reads (kHost); a kernel that reads
// shapes only (OpDef::reads_shapes_only) takes an input wherever it is (kAny).
enum class InputMemory : uint8_t { kDevice, kHost, kAny };
InputMemory InputMemoryOf(const OpDef& def, size_t input, bool host_kernel);

// A kernel instance bound to one node's attributes (validated at creation).
class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Destination-passing: `outputs` are allocated by the caller with the dtypes and
  // shapes the op's shape function returned for these inputs. Returns
  // INVALID_ARGUMENT / UNIMPLEMENTED for dtypes or shapes the kernel does not handle.
  virtual Status Compute(std::span<const TensorRef> inputs,
                         std::span<const TensorRef> outputs) = 0;
  // Whether Compute takes inputs that are views (TensorRef::physical set: a KV cache
  // the VM grows in place), reading each through TensorRef::StoredStrides. The VM gives
  // every other kernel a dense copy of a view.
  virtual bool ReadsViews() const { return false; }
};

// Creates a kernel for a node's attributes; INVALID_ARGUMENT for bad attributes.
using KernelFactory = std::function<StatusOr<std::unique_ptr<OpKernel>>(const Attributes&)>;
// Creates the kernel of the op entry `def` for a node's attributes, in one step: it
// parses the attributes and returns INVALID_ARGUMENT / UNIMPLEMENTED for those it
// refuses. `def` is the registry's own entry, which outlives every kernel made from it:
// a kernel may hold it by reference.
using KernelMake =
    std::function<StatusOr<std::unique_ptr<OpKernel>>(const OpDef& def, const Attributes& attrs)>;

// Op definitions by (name, opset range) and kernel factories by (op, entry, device).
// Filled explicitly by RegisterOpDefs / RegisterCpuKernels (no static
// self-registration). Kernels refer to the registry's OpDefs, so it is neither copied
// nor moved, and outlives every kernel it made.
class KernelRegistry {
 public:
  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // INVALID_ARGUMENT when since_version < 1 or end_version < since_version;
  // ALREADY_EXISTS when the range overlaps an entry of the same op.
  Status AddOp(OpDef def);
  // Registers the kernel of the entry of `op` that starts at `since_version`: its
  // factory calls `make` with that entry (the registry's OpDef) and a node's attributes.
  // FAILED_PRECONDITION when no entry of `op` starts at `since_version` (register the
  // OpDefs first); ALREADY_EXISTS when that (op, since_version, device) is registered
  // twice.
  Status AddKernel(std::string_view op, int since_version, DeviceKind device, KernelMake make);

  // The entry of `op` whose [since_version, end_version] covers `version` (a model's
  // opset, or the since_version of an entry); nullptr when none does.
  const OpDef* FindOp(std::string_view op, int version) const;
  // The op's newest entry (FindOp(op, kNewestVersion)).
  const OpDef* FindOp(std::string_view op) const { return FindOp(op, kNewestVersion); }
  // Every entry of `op`, oldest first; empty when the op is not registered.
  std::vector<const OpDef*> OpVersions(std::string_view op) const;
  // The opsets `op` has entries for, e.g. "6-10, 11+" or "11+"; "" when unregistered.
  std::string SupportedVersions(std::string_view op) const;

  // The kernel of the entry FindOp(op, version) on `device`; nullptr when none.
  const KernelFactory* FindKernel(std::string_view op, int version, DeviceKind device) const;
  const KernelFactory* FindKernel(std::string_view op, DeviceKind device) const {
    return FindKernel(op, kNewestVersion, device);
  }
  std::vector<std::string> OpNames() const;

 private:
  // Per op, its entries by since_version.
  std::map<std::string, std::map<int, OpDef>, std::less<>> ops_;
  std::map<std::tuple<std::string, int, DeviceKind>, KernelFactory, std::less<>> kernels_;
};

// The dtypes of `num_outputs` outputs from input dtypes alone (see DTypeFn).
std::vector<DType> OutputDTypes(const OpDef& def, const Attributes& attrs, std::span<const DType> inputs,
                                size_t num_outputs);

// Runs `def.infer` after checking the input count; errors name the op.
StatusOr<std::vector<TensorInfo>> InferShapes(const OpDef& def, const Attributes& attrs,
                                              std::span<const ShapeFnArg> inputs);

// Registers the OpDef of every op of kernels/ops/ops.def; FAILED_PRECONDITION where the families differ.
Status RegisterOpDefs(KernelRegistry& registry);
// Registers each op's CPU kernel (oneDNN for Conv, MatMul; C++ elsewhere); FAILED_PRECONDITION as above.
Status RegisterCpuKernels(KernelRegistry& registry);

// Compute threads of the CPU kernels: the size of the OpenMP team oneDNN runs Conv,
// MatMul and the other oneDNN primitives with, and which the C++ kernels that split
// their work (FusedElementwise, Softmax; internal::ParallelFor) run on. OpenMP keeps this setting per thread, so it applies to kernels launched from
// the calling thread only: call it on the thread that runs them, before the first.
// `threads` >= 1; kMaxCpuComputeThreads bounds what a server accepts.
void SetCpuComputeThreads(int threads);
// The team size of kernels launched from the calling thread: the last
// SetCpuComputeThreads on it, else OpenMP's default (OMP_NUM_THREADS when set, else one
// per CPU this process may run on).
int CpuComputeThreads();
inline constexpr int kMaxCpuComputeThreads = 1024;

// A registry with every OpDef and every CPU kernel: what the compiler (shape functions,
// constant folding) and a CPU device server use.
StatusOr<std::unique_ptr<KernelRegistry>> CreateCpuRegistry();

}  // namespace remex::kernels
