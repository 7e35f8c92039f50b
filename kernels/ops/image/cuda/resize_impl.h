// Launchers of the image family's Resize CUDA kernels (resize_impl.cu), ONNX
// Resize-10/11/13.
//
// Plain C++ and the CUDA runtime API only: included by .cu and .cc files alike. Every
// launcher queues its work on `stream` and returns the launch error (cudaSuccess when
// queued; cudaErrorInvalidValue for arguments it does not accept); pointers are device
// pointers. LaunchResizeInterp is a template on the element type T
// (kernels/cuda/dtype.h), instantiated in resize_impl.cu for float and Half (float32,
// float16); float16 data is loaded as float, computed and accumulated in float and
// stored rounded to nearest even. The host side (resize.cc) has validated shapes and
// attributes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/op_enums.h"

namespace remex::kernels::cuda {

inline constexpr int kMaxResizeRank = 8;

// Mode, coordinate transform and nearest rounding: the CPU kernel's own enums
// (kernels/op_enums.h).
using ::remex::kernels::ResizeCoord;
using ::remex::kernels::ResizeMode;
using ::remex::kernels::ResizeNearest;

struct ResizeParams {
  int rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool exclude_outside = false;
  double cubic_a = -0.75;
  int64_t in[kMaxResizeRank] = {};
  int64_t out[kMaxResizeRank] = {};
  double scale[kMaxResizeRank] = {};
  double length[kMaxResizeRank] = {};  // length_resized of the coordinate transform.
  double roi_start[kMaxResizeRank] = {};
  double roi_end[kMaxResizeRank] = {};
};

// Nearest: any element of `elem_size` bytes (1, 2, 4 or 8); `extrapolation` holds the
// bytes of the value written outside the roi (tf_crop_and_resize).
cudaError_t LaunchResizeNearest(int elem_size, const void* x, void* y, int64_t n_out, const ResizeParams& p,
                                uint64_t extrapolation, cudaStream_t stream);
// Linear and cubic: accumulated in float; taps whose weight is 0 are skipped (an axis
// that is not resized thus reads its own index with weight 1).
template <typename T>
cudaError_t LaunchResizeInterp(const T* x, T* y, int64_t n_out, const ResizeParams& p, float extrapolation,
                               cudaStream_t stream);

}  // namespace remex::kernels::cuda
