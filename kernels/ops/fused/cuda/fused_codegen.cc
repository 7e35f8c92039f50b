// FusedElementwise on CUDA: the CUDA C source of a program and its broadcast plan
// (fused_codegen.h). Semantics follow kernels/ops/fused/fused.cc, which follows the ONNX ops
// the opcodes are named after (opsets 13-17).

#include "kernels/ops/fused/cuda/fused_codegen.h"

#include <bit>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace remex::kernels::cuda {
namespace {

constexpr std::string_view kOp = "FusedElementwise";

Status OpError(std::string_view message) { return InvalidArgument(std::string(kOp) + ": " + std::string(message)); }

// The compute type's C name.
std::string_view TypeName(DType type) { return type == DType::kFloat64 ? "double" : "float"; }

std::string Slot(int64_t s) {
  std::string name = "s";
  return name += std::to_string(s);
}

// One instruction's value as a C expression over the slot variables: a call of the
// functor of kernels/scalar_ops.h named as the opcode (its operands in the opcode's
// order), which the CPU kernels call too.
std::string Expression(FusedOpcode op, const std::string& a, const std::string& b, const std::string& c) {
  const int arity = FusedOperandCount(static_cast<int64_t>(op));
  std::string args = a;
  if (arity > 1) args += ", " + b;
  if (arity > 2) args += ", " + c;
  return "remex_scalar::" + std::string(FusedOpcodeName(static_cast<int64_t>(op))) + "()(" + args + ")";
}

// Checks the program as the CPU kernel does (kernels/ops/fused/fused.cc CheckProgram).
Status CheckProgram(std::span<const int64_t> p, int64_t nin, int64_t nimm) {
  if (nin < 1 || nin > kFusedMaxInputs) {
    return OpError(std::to_string(nin) + " inputs, expects 1 to " + std::to_string(kFusedMaxInputs));
  }
  if (p.empty()) return OpError("program is empty (it needs at least one instruction)");
  if (p.size() % kFusedWidth != 0) {
    return OpError("program has " + std::to_string(p.size()) + " entries, not a multiple of " +
                   std::to_string(kFusedWidth));
  }
  const int64_t count = static_cast<int64_t>(p.size()) / kFusedWidth;
  if (nin + nimm + count > kFusedMaxSlots) {
    return OpError(std::to_string(nin) + " inputs, " + std::to_string(nimm) + " immediates and " +
                   std::to_string(count) + " instructions exceed the limit of " + std::to_string(kFusedMaxSlots) +
                   " slots");
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t* e = &p[static_cast<size_t>(j * kFusedWidth)];
    const int arity = FusedOperandCount(e[0]);
    if (arity == 0) return OpError("instruction " + std::to_string(j) + ": unknown opcode " + std::to_string(e[0]));
    const int64_t limit = nin + nimm + j;
    for (int t = 0; t < 3; ++t) {
      const int64_t v = e[1 + t];
      if (t >= arity ? v == -1 : v >= 0 && v < limit) continue;
      return OpError("instruction " + std::to_string(j) + " (" + std::string(FusedOpcodeName(e[0])) + "): operand " +
                     std::to_string(t) + " is slot " + std::to_string(v) +
                     (t >= arity ? ", must be -1" : ", expects a slot in [0, " + std::to_string(limit) + ")"));
    }
  }
  return OkStatus();
}

// kernels/scalar_ops.h's text (made a string literal at build time by
// cmake/EmbedText.cmake, without its #pragma once), which every generated kernel starts
// with: NVRTC needs no include path, and the kernel's formulas are the CPU kernels'.
constexpr std::string_view kScalarOps =
#include "kernels/scalar_ops_source.inc"
    ;

// float16 as its bits. On the device (NVRTC defines __CUDACC_RTC__ and __CUDA_ARCH__)
// converted with PTX's cvt as cuda_fp16.h's __half2float and __float2half_rn do. The
// other branch is the host build of the source, which only tests compile (with the
// shim kernels/ops/fused/cuda/fused_host_shim.h included first) to run the kernel on the CPU
// against the CPU kernel: the shim supplies the two conversions, exact and round to
// nearest even as kernels/float16.h's.
constexpr std::string_view kHalfHelpers = R"(
typedef unsigned short remex_half;  // float16 bits (__half's storage).
#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
__device__ __forceinline__ float remex_load(remex_half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ remex_half remex_store(float f) {
  remex_half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#else  // Host build (tests): conversions from the host shim.
__device__ __forceinline__ float remex_load(remex_half h) { return remex_host_half_to_float(h); }
__device__ __forceinline__ remex_half remex_store(float f) { return remex_host_float_to_half_rn(f); }
#endif
)";

std::string ImmediateLiteral(float v, DType type) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "__int_as_float((int)0x%08xu) /* %.9g */", std::bit_cast<uint32_t>(v),
                static_cast<double>(v));
  return type == DType::kFloat64 ? "(R)" + std::string(buf) : std::string(buf);
}

}  // namespace

Status CheckFusedDType(DType dtype) {
  if (dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kFloat64) return OkStatus();
  return Unimplemented(std::string(kOp) + " on cuda: dtype " + std::string(DTypeName(dtype)) +
                       " is not implemented (float32, float16 and float64 are)");
}

StatusOr<std::string> GenerateFusedKernelSource(const std::vector<int64_t>& program,
                                                const std::vector<float>& immediates, int64_t num_inputs,
                                                DType type) {
  REMEX_RETURN_IF_ERROR(CheckFusedDType(type));
  const int64_t nin = num_inputs;
  const int64_t nimm = static_cast<int64_t>(immediates.size());
  REMEX_RETURN_IF_ERROR(CheckProgram(program, nin, nimm));
  const std::string type_name(TypeName(type));
  const bool half = type == DType::kFloat16;
  const std::string storage = half ? "remex_half" : type_name;
  const int64_t count = static_cast<int64_t>(program.size()) / kFusedWidth;
  std::string s;
  s += "// FusedElementwise: " + std::to_string(nin) + " inputs, " + std::to_string(count) + " instructions, " +
       (half ? "float16 (computed in float)" : type_name) + ".\n";
  s += "#define REMEX_SCALAR_OPS_EMBEDDED 1\n";
  s += kScalarOps;
  s += "namespace remex_scalar = remex::kernels::scalar;\n";
  s += "typedef " + type_name + " R;  // Compute type.\n";
  s += half ? std::string(kHalfHelpers)
            : "__device__ __forceinline__ R remex_load(R v) { return v; }\n"
              "__device__ __forceinline__ R remex_store(R v) { return v; }\n";
  s += "struct RemexFusedParams {\n"
       "  long long n;\n"
       "  int rank;\n"
       "  int pad;\n"
       "  long long dims[" + std::to_string(kFusedMaxRank) + "];\n"
       "  long long strides[" + std::to_string(kFusedMaxInputs) + "][" + std::to_string(kFusedMaxRank) + "];\n"
       "  const void* inputs[" + std::to_string(kFusedMaxInputs) + "];\n"
       "  void* output;\n"
       "};\n\n";
  s += "extern \"C\" __global__ void " + std::string(kFusedKernelName) + "(const RemexFusedParams p) {\n";
  for (int64_t k = 0; k < nin; ++k) {
    s += "  const " + storage + "* x" + std::to_string(k) + " = static_cast<const " + storage +
         "*>(p.inputs[" + std::to_string(k) + "]);\n";
  }
  s += "  " + storage + "* y = static_cast<" + storage + "*>(p.output);\n";
  s += "  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;\n";
  s += "  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += step) {\n";
  // Offsets: one merged dim needs no division.
  for (int64_t k = 0; k < nin; ++k) s += "    long long o" + std::to_string(k) + " = 0;\n";
  s += "    if (p.rank == 1) {\n";
  for (int64_t k = 0; k < nin; ++k) {
    s += "      o" + std::to_string(k) + " = i * p.strides[" + std::to_string(k) + "][0];\n";
  }
  s += "    } else {\n"
       "      long long rest = i;\n"
       "#pragma unroll\n"
       "      for (int d = " + std::to_string(kFusedMaxRank - 1) + "; d >= 0; --d) {\n"
       "        if (d < p.rank) {\n"
       "          const long long c = rest % p.dims[d];\n"
       "          rest /= p.dims[d];\n";
  for (int64_t k = 0; k < nin; ++k) {
    s += "          o" + std::to_string(k) + " += c * p.strides[" + std::to_string(k) + "][d];\n";
  }
  s += "        }\n"
       "      }\n"
       "    }\n";
  for (int64_t k = 0; k < nin; ++k) {
    s += "    const R " + Slot(k) + " = remex_load(x" + std::to_string(k) + "[o" + std::to_string(k) + "]);\n";
  }
  for (int64_t i = 0; i < nimm; ++i) {
    s += "    const R " + Slot(nin + i) + " = " + ImmediateLiteral(immediates[static_cast<size_t>(i)], type) + ";\n";
  }
  for (int64_t j = 0; j < count; ++j) {
    const int64_t* e = &program[static_cast<size_t>(j * kFusedWidth)];
    const auto op = static_cast<FusedOpcode>(e[0]);
    s += "    const R " + Slot(nin + nimm + j) + " = " +
         Expression(op, Slot(e[1]), e[2] >= 0 ? Slot(e[2]) : "", e[3] >= 0 ? Slot(e[3]) : "") + ";\n";
  }
  s += "    y[i] = remex_store(" + Slot(nin + nimm + count - 1) + ");\n";
  s += "  }\n}\n";
  return s;
}

Status PlanFusedBroadcast(std::span<const Shape> inputs, const Shape& out, FusedParams& params) {
  const size_t nin = inputs.size();
  if (nin < 1 || nin > static_cast<size_t>(kFusedMaxInputs)) {
    return OpError(std::to_string(nin) + " inputs, expects 1 to " + std::to_string(kFusedMaxInputs));
  }
  const size_t rank = out.size();
  // Per kept output dim: its extent and which inputs span it (bit k: input k).
  struct Dim {
    int64_t extent;
    uint64_t full;
  };
  std::vector<Dim> dims;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t o = out[i];
    if (o < 0) return OpError("output shape " + ShapeToString(out) + " has a negative dim");
    uint64_t full = 0;
    for (size_t k = 0; k < nin; ++k) {
      const Shape& s = inputs[k];
      if (s.size() > rank) {
        return OpError("input " + std::to_string(k) + " " + ShapeToString(s) + " has a higher rank than the output " +
                       ShapeToString(out));
      }
      const size_t lead = rank - s.size();
      const int64_t d = i < lead ? 1 : s[i - lead];
      if (d != o && d != 1) {
        return OpError("input " + std::to_string(k) + " " + ShapeToString(s) + " does not broadcast to " +
                       ShapeToString(out));
      }
      if (d == o) full |= uint64_t{1} << k;
    }
    if (o == 1) continue;  // Contributes nothing to any offset.
    if (!dims.empty() && dims.back().full == full) {
      dims.back().extent *= o;
    } else {
      dims.push_back({o, full});
    }
  }
  if (dims.size() > static_cast<size_t>(kFusedMaxRank)) {
    return Unimplemented(std::string(kOp) + " on cuda: the input shapes need " + std::to_string(dims.size()) +
                         " output dims after merging, the kernel handles at most " + std::to_string(kFusedMaxRank));
  }
  for (auto& row : params.strides) {
    for (int64_t& v : row) v = 0;
  }
  for (int64_t& v : params.dims) v = 0;
  if (dims.empty()) {
    params.rank = 1;
    params.dims[0] = 1;
    return OkStatus();
  }
  params.rank = static_cast<int32_t>(dims.size());
  for (size_t k = 0; k < nin; ++k) {
    int64_t stride = 1;
    for (int d = params.rank - 1; d >= 0; --d) {
      const bool spans = (dims[d].full >> k) & 1;
      params.strides[k][d] = spans ? stride : 0;
      if (spans) stride *= dims[d].extent;
    }
  }
  for (int d = 0; d < params.rank; ++d) params.dims[d] = dims[d].extent;
  return OkStatus();
}

}  // namespace remex::kernels::cuda
