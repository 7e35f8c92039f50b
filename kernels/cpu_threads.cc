// Compute threads of the CPU kernels (kernels.h): oneDNN's CPU runtime here is OpenMP
// (DNNL_CPU_RUNTIME_OMP), whose team size is the calling thread's nthreads ICV.
#include <oneapi/dnnl/dnnl_config.h>
#include <omp.h>

#include "kernels/kernels.h"

static_assert(DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP,
              "oneDNN's CPU runtime is not OpenMP: SetCpuComputeThreads must set its threads another way");

namespace remex::kernels {

void SetCpuComputeThreads(int threads) { omp_set_num_threads(threads < 1 ? 1 : threads); }

int CpuComputeThreads() { return omp_get_max_threads(); }

}  // namespace remex::kernels
