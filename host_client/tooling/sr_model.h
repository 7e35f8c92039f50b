// A synthetic EDSR-style x4 super-resolution network as an ONNX model, for layout and
// performance work on convolution-heavy graphs (the shape of EDSR, Lim et al. 2017,
// "Enhanced Deep Residual Networks for Single Image Super-Resolution", at small width
// and depth; weights are random, not trained).
//
// Graph (opset 13), every Conv 3x3, pad 1, stride 1, with bias:
//   x [1, 3, H, W] -> Conv 3->64 ("head")
//   -> 2 residual blocks: Conv 64->64, LeakyRelu(alpha 0.1), Conv 64->64, Add block input
//   -> Conv 64->64, Add head output
//   -> Conv 64->128, DepthToSpace(blocksize 2, CRD) -> Conv 32->64,
//      DepthToSpace(blocksize 2, CRD) -> Conv 16->3 -> y [1, 3, 4H, 4W].
// Weights are drawn from N(0, 2 / fan_in) (He et al. 2015) from a seeded generator, the
// second Conv of each residual block scaled by 0.1 (EDSR's residual scaling); biases
// are uniform in [-0.01, 0.01]. The same options give the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace remex::sr {

struct SrModelOptions {
  int64_t height = 720;  // input H, in pixels (1 .. 65536)
  int64_t width = 1280;  // input W, in pixels (1 .. 65536)
  // Input, output and weight dtype: float32 or float16 (weights rounded to nearest even).
  DType dtype = DType::kFloat32;
  uint64_t seed = 1;  // weight generator seed
  // Each DepthToSpace written as its ONNX definition instead (CRD: Reshape to
  // [N, C/4, 2, 2, H, W], Transpose perm [0, 1, 4, 2, 5, 3], Reshape to
  // [N, C/4, 2H, 2W]), the baseline a native depth_to_space is measured against.
  bool depth_to_space_as_reshape = false;
};

// Floating-point operations of one inference: 2 per multiply-add of the convolutions
// (9 * Cin * Cout per output pixel); bias, activations and adds are not counted.
uint64_t SrModelFlops(const SrModelOptions& options);

// The serialized ModelProto. INVALID_ARGUMENT for a size out of range or another dtype.
StatusOr<std::vector<std::byte>> BuildSrModel(const SrModelOptions& options);

// Writes BuildSrModel's bytes to `path`; DATA_LOSS when the file cannot be written.
Status WriteSrModel(const SrModelOptions& options, const std::string& path);

}  // namespace remex::sr
