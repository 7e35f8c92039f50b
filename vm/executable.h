// The Remex executable: what the compiler produces and the VM loads.
//
// File format (".rmx"), little-endian:
//   bytes 0-3   magic "RMXE"
//   bytes 4-7   format version (kExecutableVersion)
//   bytes 8-15  metadata size M (bytes, multiple of 8)
//   bytes 16-23 payload size P (bytes)
//   M bytes     Cap'n Proto flat message `format::Executable` (vm/executable.capnp)
//   P bytes     constant payloads, each a zstd frame (or raw when it did not shrink)
// Load() parses with bounded reader limits, checks every size and offset, decompresses
// constants into exactly their declared size, resolves kernels in the registry and
// runs the verifier. Only then does a VM trust the code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/kernels.h"
#include "vm/bytecode.h"

namespace remex::vm {

inline constexpr uint32_t kExecutableVersion = 6;  // 5: ValueDesc::kind, sequence opcodes; 6: ConcatAppend.
inline constexpr char kExecutableMagic[4] = {'R', 'M', 'X', 'E'};

// What a function input or output is, as ONNX types it (TypeProto): a tensor, a
// sequence of tensors of one dtype, or an optional of either (which may hold nothing).
enum class ValueKind : uint8_t { kTensor = 0, kSequence = 1, kOptionalTensor = 2, kOptionalSequence = 3 };
inline constexpr uint8_t kMaxValueKind = 3;
// "tensor", "sequence", "optional tensor", "optional sequence".
const char* ValueKindName(ValueKind kind);
inline bool IsSequenceKind(ValueKind k) { return k == ValueKind::kSequence || k == ValueKind::kOptionalSequence; }
inline bool IsOptionalKind(ValueKind k) { return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence; }

// Name, kind, dtype and shape of a function input or output; -1 dims are dynamic.
// For a sequence (or an optional) `dtype` and `shape` are those of its elements (of
// its value), and `rank_known` false says the elements' rank is not fixed (a tensor
// always has a known rank).
// `dims` (empty, or one entry per dimension) names each dynamic dimension: a symbol
// of ExecutableDef::symbols ("W") or, for outputs, the expression the compiler found
// ("W/4", "N*W"); "" for static or unnamed dimensions.
struct ValueDesc {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<std::string> dims;
  ValueKind kind = ValueKind::kTensor;
  bool rank_known = true;
};

// A symbolic dimension of the function inputs (ONNX dim_param) with inclusive bounds;
// `max` -1 is unbounded. The VM binds each symbol once per call: inputs sharing a
// symbol must agree, and its value must lie in [min, max].
struct SymbolDef {
  std::string name;
  int64_t min = 0;
  int64_t max = -1;
};

struct FunctionDef {
  std::string name;
  std::vector<ValueDesc> inputs;
  std::vector<ValueDesc> outputs;
  int32_t num_registers = 0;
  std::vector<Instruction> code;
  // Bytes of the function's arena in each memory space (0 device, 1 host): the
  // statically planned memory its AllocPlanned instructions place tensors in. The VM
  // allocates an arena on the function's first call and reuses it on every later one.
  uint64_t arena_bytes[2] = {0, 0};
  // The CPU compute threads its kernels use at most while it runs (OpenMP's team size on
  // the running thread, restored after; fewer than the device's only): what `remex
  // tune` may choose per shape bucket. 0: the device's own (remex-server --threads).
  // At most kernels::kMaxCpuComputeThreads. Other devices' kernels ignore it.
  uint32_t compute_threads = 0;
};

struct KernelEntry {
  std::string op;
  kernels::Attributes attrs;
  int32_t num_inputs = 0;
  int32_t num_outputs = 0;
  std::string node_name;
  // Runs on the host: the CPU kernel, on host-memory tensors (small integer shape
  // computations the compiler placed there, so they cost no device copy).
  bool host = false;
  // The op's registry entry: a version its [since_version, end_version] covers (the
  // compiler writes the entry's since_version; see kernels::KernelRegistry::FindOp).
  int32_t version = kernels::kNewestVersion;
};

// A constant tensor, host memory, row-major.
struct ConstantDef {
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<std::byte> data;
};

// The in-memory form of an executable, as the compiler builds it.
struct ExecutableDef {
  std::string producer;
  std::vector<FunctionDef> functions;
  std::vector<KernelEntry> kernels;
  std::vector<ConstantDef> constants;
  std::vector<SymbolDef> symbols;
};

// Serializes to the .rmx format; constants are zstd-compressed at `zstd_level`.
StatusOr<std::vector<std::byte>> SerializeExecutable(const ExecutableDef& def,
                                                     int zstd_level = 3);

// Largest arena a function may declare (FunctionDef::arena_bytes).
inline constexpr uint64_t kMaxArenaBytes = uint64_t{1} << 40;

// Default bound on the sum of an executable's decompressed constants.
inline constexpr uint64_t kDefaultMaxConstantBytes = uint64_t{16} << 30;

// Parses an .rmx file without verifying code. INVALID_ARGUMENT for a bad magic,
// sizes or offsets out of range, or corrupt constants; FAILED_PRECONDITION for an
// unsupported format version; RESOURCE_EXHAUSTED when the constants add up to more
// than `max_constant_bytes` (checked before decompressing; the message ends with
// `limit_reason` when given, what set the bound, e.g. a session's memory quota), or
// "out of memory" when host memory runs out while decompressing.
StatusOr<ExecutableDef> ParseExecutable(std::span<const std::byte> bytes,
                                        uint64_t max_constant_bytes = kDefaultMaxConstantBytes,
                                        std::string_view limit_reason = {});

// Checks every function against the kernel table, constants and the registry:
// register, constant and kernel indices in range, operand lists matching kernel
// arities, dtypes valid, outputs produced by AllocOutput and returned by Ret.
// INVALID_ARGUMENT naming the function, instruction index and the problem.
Status VerifyExecutable(const ExecutableDef& def, const kernels::KernelRegistry& registry);

// A parsed and verified executable, immutable and shareable between VMs.
class Executable {
 public:
  // Parses (ParseExecutable, with `max_constant_bytes` and `limit_reason`) and verifies
  // `bytes`.
  static StatusOr<std::shared_ptr<const Executable>> Load(
      std::span<const std::byte> bytes, const kernels::KernelRegistry& registry,
      uint64_t max_constant_bytes = kDefaultMaxConstantBytes, std::string_view limit_reason = {});
  // Verifies an in-memory definition (used by the compiler's tests and embedders).
  static StatusOr<std::shared_ptr<const Executable>> FromDef(
      ExecutableDef def, const kernels::KernelRegistry& registry);

  const ExecutableDef& def() const { return def_; }
  // Index of the function named `name`; NOT_FOUND lists the names that exist.
  StatusOr<int> FunctionIndex(std::string_view name) const;
  uint64_t constant_bytes() const { return constant_bytes_; }

 private:
  explicit Executable(ExecutableDef def);
  ExecutableDef def_;
  uint64_t constant_bytes_ = 0;
};

}  // namespace remex::vm
