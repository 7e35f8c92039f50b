// Private helpers of the CUDA kernels (host side).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "base/status.h"
#include "kernels/cuda/cuda_faults.h"
#include "kernels/cuda/cuda_kernels.h"

namespace remex::kernels::cuda {

// OK for cudaSuccess; otherwise "<op> on cuda: <call> failed: <name>: <CUDA's message>",
// RESOURCE_EXHAUSTED for cudaErrorMemoryAllocation, ABORTED (with "device fault") for an
// error that poisons the context (IsCudaDeviceFault), INTERNAL otherwise. Clears the
// runtime's per-thread last error.
inline Status CudaCheck(std::string_view op, std::string_view call, cudaError_t error) {
  if (error == cudaSuccess) return OkStatus();
  (void)cudaGetLastError();
  std::string message = std::string(op) + " on cuda: " + std::string(call) + " failed: " + cudaGetErrorName(error) +
                        ": " + cudaGetErrorString(error);
  if (error == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(message));
  if (IsCudaDeviceFault(error)) return Aborted(std::move(message) + " (device fault)");
  return Internal(std::move(message));
}

// Forgets the FusedElementwise modules loaded on GPU `device` (fused.cc): they belonged
// to its context, which a reset destroyed.
void ForgetFusedModules(int device);

// Per-op-group registration, called by RegisterCudaKernels. Each group lives in its
// own files and its own CMake fragment (kernels/cuda/<group>.cmake).
Status AddElementwiseCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// Data movement: Transpose, Slice, Concat, Gather, Pad, Cast, Where, Identity and
// the reshaping copies, DepthToSpace / SpaceToDepth (transform.cc, transform_values.cc).
Status AddTransformCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// Reductions, Softmax, pooling, Resize, normalisation and the remaining unary and
// binary elementwise ops (nn.cc).
Status AddNnCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// Library-backed kernels: cuDNN Conv / ConvTranspose, cuBLASLt MatMul / Gemm
// (libraries.cc).
Status AddLibraryCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// FusedElementwise, compiled from its program with NVRTC (fused.cc).
Status AddFusedCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// Shape, Size, ConstantOfShape, Range, Dropout, TopK and LRN (misc.cc).
Status AddMiscCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv (quant.cc).
Status AddQuantCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// NonMaxSuppression, RoiAlign and MaxUnpool (det.cc).
Status AddDetCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// LSTM, GRU and RNN (rnn.cc).
Status AddRnnCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// BitShift, GatherND, ScatterND, NonZero and Compress (index.cc).
Status AddIndexCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// HannWindow, HammingWindow, BlackmanWindow, MeanVarianceNormalization,
// ReverseSequence, Det and Einsum (extra.cc).
Status AddExtraCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// GridSample (grid.cc).
Status AddGridCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// DFT, STFT and MelWeightMatrix (spectral.cc).
Status AddSpectralCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// TfIdfVectorizer (text.cc).
Status AddTextCudaKernels(KernelRegistry& registry, CudaKernelContext context);
// The training domain's optimizers Adagrad, Adam and Momentum (training.cc).
Status AddTrainingCudaKernels(KernelRegistry& registry, CudaKernelContext context);

}  // namespace remex::kernels::cuda
