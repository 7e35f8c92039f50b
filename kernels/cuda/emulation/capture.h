// Stream capture inside the CUDA emulation (graph.cc): what the runtime's calls and
// the launches (grid.cc) ask before they run their work. Internal to the emulation;
// the API is runtime.h's.
#pragma once

#include <functional>

#include "kernels/cuda/emulation/runtime.h"

namespace remex::cuda_emulation {

// Whether any stream is capturing: one atomic load, so that calls outside a capture
// pay nothing more.
bool AnyCapture();

// When `stream` is capturing: appends `work` (named `name`) to its capture, or, when
// the capture was invalidated, leaves it out; sets `*result` (cudaSuccess, or
// cudaErrorStreamCaptureInvalidated) and returns true. False when it is not capturing
// (the caller runs the work).
bool RecordIfCapturing(cudaStream_t stream, const char* name, std::function<cudaError_t()>& work,
                       cudaError_t* result);

// A call CUDA does not permit on a capturing stream (synchronizing or querying it, a
// copy with pageable host memory): when `stream` is capturing, invalidates its capture
// and fails with `error` (detail `detail`); cudaSuccess otherwise.
cudaError_t RefuseOnCapturingStream(cudaStream_t stream, const char* call, cudaError_t error,
                                    const char* detail);

// A call CUDA does not permit while a capture of mode global is under way (or one of
// mode thread-local on the calling thread): cudaMalloc, cudaFree, a synchronous copy.
// Invalidates those captures and fails with `error`; cudaSuccess when there are none.
cudaError_t RefuseDuringUnsafeCapture(const char* call, cudaError_t error);

// `stream` is being destroyed: its capture, if any, ends without a graph.
void ForgetCapture(cudaStream_t stream);
// The device is reset: every capture ends, every graph and executable graph is gone.
void ForgetGraphs();

}  // namespace remex::cuda_emulation
