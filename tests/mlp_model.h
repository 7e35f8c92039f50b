// The small model of the load-scenario tests (cli_load_test, cuda_load_test): y =
// Relu(MatMul(x, w) + b) with x float32 [1, side, side], w [side, side] and b [side]
// initializers (ONNX opset 13): a few kernels per call and weights of a known size,
// (side * side + side) * 4 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host_client/compiler/onnx_test_util.h"

namespace remex::testing {

// Saves the model as DIR/mlp.onnx and returns its path (a test failure when it cannot).
inline std::string SaveMlpModel(const std::string& dir, int64_t side) {
  OnnxModelBuilder b(13);
  b.Input("x", onnx::TensorProto::FLOAT, {1, side, side}).Output("y", onnx::TensorProto::FLOAT, {1, side, side});
  std::vector<float> w(side * side), bias(side);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 5) / 5.0f;
  b.FloatInit("w", {side, side}, w);
  b.FloatInit("b", {side}, bias);
  b.Node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.Node("Add", {"m", "b"}, {"s"}, "add");
  b.Node("Relu", {"s"}, {"y"}, "relu");
  std::string path = dir + "/mlp.onnx";
  EXPECT_TRUE(b.Save(path));
  return path;
}

}  // namespace remex::testing
