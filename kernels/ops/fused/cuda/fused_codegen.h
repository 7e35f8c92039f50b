// FusedElementwise on CUDA, host side and plain C++ (no CUDA headers): the generator of
// a program's CUDA C source and the broadcast plan its kernel reads.
//
// The program format is kernels/ops/fused/fused.h's; every opcode has the semantics of the CPU
// kernel (kernels/ops/fused/fused.cc), i.e. of the ONNX op it is named after (opsets 13-17).
//
// The generated source is one self-contained kernel (no #include: NVRTC has no
// built-in cuda_fp16.h, and the toolkit's headers need not exist where it runs):
//
//   extern "C" __global__ void remex_fused_elementwise(const RemexFusedParams p)
//
// a grid-stride loop over the p.n output elements. Per element it turns the output
// index into one offset per input through p.dims and p.strides (the FusedBroadcastPlan
// below, passed by value), loads each input, evaluates each instruction as one C
// expression and stores the last result. float16 values (their bits, loaded and stored
// as unsigned short through PTX's cvt, as cuda_fp16.h's __half does) are computed in
// float and rounded to nearest even once, on store; float32 in float, float64 in
// double. Immediates are embedded as exact bit patterns. The source depends on the
// program, the immediates, the input count and the dtype, never on the shapes.
// The output may share its buffer with an input of the output's shape: element i's
// inputs are read before element i is written, and no other element is read there.
//
// The float16 conversions are the source's only PTX (inline asm), guarded by
// `#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)`, which NVRTC always takes.
// The other branch, which Remex never compiles, is for tests: it calls
// remex_host_half_to_float and remex_host_float_to_half_rn, so that a host C++
// compiler can build the very same text after kernels/ops/fused/cuda/fused_host_shim.h (which
// maps __global__, blockIdx and the like to one CPU thread) and fused_host_test can run
// the kernel against the CPU kernel without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "kernels/ops/fused/fused.h"

namespace remex::kernels::cuda {

// The generated kernel's name (extern "C", unmangled).
inline constexpr char kFusedKernelName[] = "remex_fused_elementwise";
// Output dims a plan keeps after dropping extent-1 dims and merging neighbours.
inline constexpr int kFusedMaxRank = 8;

// The kernel's only argument, by value (about 2.4 KiB, under the 4 KiB kernel-parameter
// limit). The generated source declares the same struct (same members, same order);
// both sides use only fixed-size integer and pointer members, so the layouts agree.
// Output element i with coordinates c[d] over dims[0, rank) reads input k at
// sum_d c[d] * strides[k][d] (0 along dims input k broadcasts).
struct FusedParams {
  int64_t n = 0;     // Output elements.
  int32_t rank = 0;  // 1 to kFusedMaxRank.
  int32_t pad = 0;
  int64_t dims[kFusedMaxRank] = {};
  int64_t strides[kFusedMaxInputs][kFusedMaxRank] = {};
  const void* inputs[kFusedMaxInputs] = {};
  void* output = nullptr;
};

// Fills rank, dims and strides of `params` for inputs of `inputs` shapes broadcast
// (ONNX multidirectional) to `out`: extent-1 output dims dropped, neighbours along
// which every input broadcasts alike merged. A one-element output has rank 1, dims {1}.
// INVALID_ARGUMENT when an input does not broadcast to `out` or there are more than
// kFusedMaxInputs inputs; UNIMPLEMENTED when more than kFusedMaxRank dims remain.
Status PlanFusedBroadcast(std::span<const Shape> inputs, const Shape& out, FusedParams& params);

// OK for the dtypes the generated kernel computes and stores (float32, float16,
// float64); UNIMPLEMENTED naming FusedElementwise otherwise.
Status CheckFusedDType(DType dtype);

// The CUDA C source of the kernel evaluating `program` (kFusedWidth entries per
// instruction) with `immediates` over `num_inputs` inputs (1 to kFusedMaxInputs) of
// `type`. INVALID_ARGUMENT naming FusedElementwise for a malformed program (the checks
// of the CPU kernel: unknown opcodes, operands outside the earlier slots, too many
// slots).
StatusOr<std::string> GenerateFusedKernelSource(const std::vector<int64_t>& program,
                                                const std::vector<float>& immediates, int64_t num_inputs,
                                                DType type);

}  // namespace remex::kernels::cuda
