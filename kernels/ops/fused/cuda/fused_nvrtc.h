// FusedElementwise on CUDA: compilation of a generated kernel source
// (fused_codegen.h) to PTX with NVRTC. Needs no GPU: nvrtcCompileProgram runs on the
// host alone. Plain C++ (no CUDA headers).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace remex::kernels::cuda {

// The newest virtual architecture NVRTC can target that is not newer than `arch`
// (compute capability major * 10 + minor, e.g. 90). UNIMPLEMENTED when NVRTC supports
// none that old; INTERNAL when NVRTC fails.
StatusOr<int> FusedTargetArch(int arch);

// PTX of `source` for "--gpu-architecture=compute_<arch>" (`arch` one NVRTC supports),
// with IEEE arithmetic (no fast math, --fmad=false: the CPU kernel does not contract
// a * b + c either). INTERNAL with NVRTC's log when compilation fails.
StatusOr<std::string> CompileFusedKernelToPtx(const std::string& source, int arch);

// CompileFusedKernelToPtx through a process-wide cache keyed by (source, arch); the
// source is hashed for the lookup and compared in full. Thread-safe. Entries live as
// long as the process (a program set is small: one per fused node shape class).
StatusOr<std::shared_ptr<const std::string>> CachedFusedKernelPtx(const std::string& source, int arch);

// Entries in CachedFusedKernelPtx's cache: the NVRTC compilations of the process so
// far. Thread-safe.
size_t FusedPtxCacheEntries();

}  // namespace remex::kernels::cuda
