// The checked views of DFT-17, STFT-17 and MelWeightMatrix-17, shared by their CPU
// kernels (kernels/ops/signal/spectral.cc) and CUDA kernels (kernels/ops/signal/cuda/spectral.cc): every
// shape, dtype, attribute and host-side value is checked here once, by the shape
// function and again by each kernel. Errors are INVALID_ARGUMENT "<op>: ..." naming the
// value. Sizes read from tensor data are bounded (spectral::kMaxDftLength,
// spectral::kMaxMelBins) before anything is sized by them.
#pragma once

#include <span>
#include <vector>

#include "base/status.h"
#include "kernels/kernels.h"
#include "kernels/ops/signal/spectral_ops.h"

namespace remex::kernels::internal {

// DFT-17 (https://onnx.ai/onnx/operators/onnx__DFT.html, opset 17; ONNX's reference
// op_dft.py): input [d0, ..., d(r-2), 1 or 2] float16/32/64 (last dim: real, or real
// and imaginary parts), rank r >= 2; optional dft_length (int32 or int64, one value in
// host memory, in [1, 2^24]; absent or empty: the axis' extent, which must then be in
// that range too). Attributes axis (default 1, in [-r, -2] or [0, r - 2]: a negative
// axis counts from the back of the full rank, so -2 is the last signal dim), inverse
// and onesided (0 or 1, default 0). Output [..., bins, ..., 2] of the input's dtype:
// the axis' extent replaced by bins = dft_length (onesided: dft_length / 2 + 1, the
// first bins of the full transform, as the reference slices it, for real and complex
// input and for the inverse alike). The signal is truncated or zero-padded to
// dft_length; the inverse is divided by dft_length.
struct DftView {
  spectral::DftPlan plan;
  DType dtype = DType::kFloat32;
  Shape output;
};
StatusOr<DftView> DftViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// STFT-17 (https://onnx.ai/onnx/operators/onnx__STFT.html, opset 17; ONNX's reference
// op_stft.py): signal [batch, signal_length, 1 or 2] float16/32/64; frame_step (int32
// or int64, one value in host memory, >= 1); optional window [window_length]
// (window_length >= 1, the signal's dtype); optional frame_length (int32 or int64, one
// value in host memory, in [1, min(signal_length, 2^24)]; absent or empty:
// window_length, else signal_length). Attribute onesided (0 or 1, default 1). Output
// [batch, frames, bins, 2] of the signal's dtype, frames = 1 + (signal_length -
// frame_length) / frame_step, bins = frame_length (onesided: frame_length / 2 + 1).
// Each frame is signal[f * frame_step ...] times the window (rounded to the signal's
// dtype, as the reference multiplies), the DFT of frame_length points of it
// (window_length points, truncated or zero-padded).
struct StftView {
  spectral::StftPlan plan;
  DType dtype = DType::kFloat32;
  Shape output;
};
StatusOr<StftView> StftViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// MelWeightMatrix-17 (https://onnx.ai/onnx/operators/onnx__MelWeightMatrix.html, opset
// 17; ONNX's reference op_mel_weight_matrix.py): num_mel_bins (in [1, 2^16]),
// dft_length (in [1, 2^24]), sample_rate (>= 1), each int32 or int64; lower_edge_hertz
// and upper_edge_hertz (float16/32/64, finite); one value each, all in host memory.
// Attribute output_datatype (an ONNX dtype, default 1 = float32; every numeric dtype
// Remex holds). Output [dft_length / 2 + 1, num_mel_bins]: column i is mel bin i's
// triangle over the frequency bins spectral::MelFrequencyBin(i .. i + 2)
// (spectral::MelWeight; float types rounded from double, integers truncated). Every
// frequency bin must lie in [0, dft_length / 2 + 1] and every element the reference
// writes inside the matrix (where numpy would wrap a negative index or fail):
// INVALID_ARGUMENT "... out of range" otherwise. At most 2^28 elements.
struct MelWeightMatrixView {
  DType dtype = DType::kFloat32;
  int64_t num_mel_bins = 0;
  int64_t spectrogram_bins = 0;  // dft_length / 2 + 1.
  std::vector<int64_t> bins;     // num_mel_bins + 2 frequency bins.
  Shape output;
};
StatusOr<MelWeightMatrixView> MelWeightMatrixViewOf(const Attributes& attrs, std::span<const ShapeFnArg> in);

// Writes the matrix of `v` as v.dtype elements to `out` (host memory, v.output's size).
void WriteMelWeightMatrix(const MelWeightMatrixView& v, void* out);

}  // namespace remex::kernels::internal
