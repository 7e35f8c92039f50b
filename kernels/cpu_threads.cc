// Compute threads of the CPU kernels (kernels.h): oneDNN's CPU runtime here is OpenMP
// (DNNL_CPU_RUNTIME_OMP), whose team size is the calling thread's nthreads ICV; the
// C++ kernels' ParallelFor runs on the same team. The one file built with -fopenmp.
// Also what the CPU offers them (kernels/cpu_features.h), as oneDNN sees it.
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_config.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu_features.h"
#include "kernels/internal.h"
#include "kernels/kernels.h"

static_assert(DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP,
              "oneDNN's CPU runtime is not OpenMP: SetCpuComputeThreads must set its threads another way");

namespace remex::kernels {

void SetCpuComputeThreads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

int CpuComputeThreads() { return omp_get_max_threads(); }

namespace internal {

int ParallelParts(int64_t n, int64_t grain) {
  if (omp_in_parallel()) return 1;
  const int64_t by_size = grain > 0 ? n / grain : n;
  const int64_t parts = std::min<int64_t>(omp_get_max_threads(), by_size);
  return parts < 1 ? 1 : static_cast<int>(parts);
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& f) {
  const int parts = ParallelParts(n, grain);
  if (parts == 1) {
    if (n > 0) f(0, n, 0);
    return;
  }
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) f(n * p / parts, n * (p + 1) / parts, p);
}

ScopedComputeThreads::ScopedComputeThreads(int threads) : saved_(omp_get_max_threads()) {
  if (threads > 0 && threads < saved_) omp_set_num_threads(threads);
}

ScopedComputeThreads::~ScopedComputeThreads() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

int ThreadsForMacs(int64_t macs) { return macs < kSmallPrimitiveMacs ? 1 : omp_get_max_threads(); }

}  // namespace internal

namespace {

// oneDNN's effective instruction set, in the terms of cpu_features.h.
struct CpuIsa {
  bool avx2 = false;         // AVX2 or later: its jit convolutions take NHWC as it is
  bool avx512_core = false;  // AVX-512 F, BW, VL, DQ: its brgemm and Winograd convolutions
  bool int8_dot = false;     // AVX512-VNNI or AVX-VNNI
};

const CpuIsa& Isa() {
  static const CpuIsa isa = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx2:
        return CpuIsa{true, false, false};
      case dnnl::cpu_isa::avx2_vnni:
        return CpuIsa{true, false, true};
      case dnnl::cpu_isa::avx512_core:
        return CpuIsa{true, true, false};
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
        return CpuIsa{true, true, true};
      default:
        return CpuIsa{};
    }
  }();
  return isa;
}

}  // namespace

bool CpuHasInt8DotProducts() { return Isa().int8_dot; }

bool CpuHasChannelsLastFloatConvolutions() { return Isa().avx2; }

bool CpuHasWinogradConvolutions() { return Isa().avx512_core; }

}  // namespace remex::kernels
