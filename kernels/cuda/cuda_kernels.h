// CUDA kernels of the operator library (kernels::DeviceKind::kCuda).
//
// Kernels read and write device memory through TensorRef::data (device pointers of
// the GPU `CudaKernelContext::device`) and queue their work on
// `CudaKernelContext::stream`, so that it is ordered with the device's copies; they
// return without waiting for the GPU. Errors of a launch are returned by Compute;
// errors of the kernel's execution surface at the device's next synchronizing call.
//
// Op groups (kernels/cuda/<group>.cc, listed in docs/ARCHITECTURE.md): elementwise
// (Add, Sub, Mul, Div, Relu, Sigmoid), transform (data movement, Cast, DepthToSpace /
// SpaceToDepth), nn (reductions, Softmax, pooling, Resize, normalisation, the other
// elementwise ops), libraries (cuDNN Conv / ConvTranspose, cuBLASLt MatMul / Gemm),
// fused (FusedElementwise through NVRTC), misc (Shape, Size, ConstantOfShape, Range,
// Dropout, TopK, LRN) and rnn (LSTM, GRU, RNN). Float ops take float32 and float16
// (float16 is computed in float32 and rounded to nearest even on store, as the CPU
// kernels do). Other dtypes are UNIMPLEMENTED naming the op and dtype.
//
// This header is plain C++ (no CUDA headers).
#pragma once

#include "base/status.h"
#include "kernels/kernels.h"

namespace remex::kernels {

struct CudaKernelContext {
  int device = 0;          // CUDA ordinal the kernels run on.
  void* stream = nullptr;  // cudaStream_t; nullptr: the legacy default stream.
};

// Registers the CUDA kernels of every op listed above; the ops' OpDefs must already be
// in `registry` (FAILED_PRECONDITION otherwise), ALREADY_EXISTS when registered twice.
// UNIMPLEMENTED "built without CUDA" in a build without REMEX_HAVE_CUDA.
Status RegisterCudaKernels(KernelRegistry& registry, CudaKernelContext context = {});

}  // namespace remex::kernels
