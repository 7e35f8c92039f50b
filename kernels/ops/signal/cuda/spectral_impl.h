// Launchers of the signal family's CUDA kernels (spectral_impl.cu): DFT, STFT and the
// window ops (HannWindow, HammingWindow, BlackmanWindow). Plain C++ and the CUDA runtime
// API only: included by .cu and .cc files alike. Every launcher queues its work on
// `stream` and returns the launch error (cudaErrorInvalidValue for arguments it does not
// accept). MelWeightMatrix runs on the host (spectral.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/ops/signal/spectral_ops.h"
#include "kernels/ops/signal/window_ops.h"

namespace remex::kernels::cuda {

// DFT-17 of x [outer, signal, inner, channels] into y [outer, bins, inner, 2] by
// `plan` (checked by internal::DftViewOf): a thread per output bin, each evaluating
// spectral::DftValue with spectral::UnitRoot as the CPU kernel does. y's element count
// > 0. T (input and output alike): float, Half or double.
template <typename T>
cudaError_t LaunchDft(const spectral::DftPlan& plan, const T* x, T* y, cudaStream_t stream);

// STFT-17 of signal x [batch, signal, channels] (window [window_length] or nullptr)
// into y [batch, frames, bins, 2] by `plan` (checked by internal::StftViewOf): a thread
// per output bin, as the CPU kernel computes it. y's element count > 0. T: float, Half
// or double.
template <typename T>
cudaError_t LaunchStft(const spectral::StftPlan& plan, const T* x, const T* window, T* y,
                       cudaStream_t stream);

// y[n] = window::WindowValue(kind, periodic, size, n) for n in [0, size) (size > 0),
// converted to T as the CPU kernel converts it. T: float, Half, double or an int/uint
// of 8 to 64 bits.
template <typename T>
cudaError_t LaunchWindow(window::WindowKind kind, bool periodic, int64_t size, T* y, cudaStream_t stream);

}  // namespace remex::kernels::cuda
