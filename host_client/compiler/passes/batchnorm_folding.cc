// BatchNormalization folding (see batchnorm_folding.h).
#include "host_client/compiler/passes/batchnorm_folding.h"

#include <cstring>
#include <string>
#include <vector>

#include "kernels/float16.h"
#include "kernels/ops/nn/batchnorm_ops.h"

namespace remex::compiler {
namespace {

// A float32 or float16 constant of static shape.
const vm::ConstantDef* FloatConstant(const Graph& g, int v) {
  if (v < 0 || !g.values[v].constant) return nullptr;
  const vm::ConstantDef& c = g.constants[*g.values[v].constant];
  if (c.dtype != DType::kFloat32 && c.dtype != DType::kFloat16) return nullptr;
  const auto n = NumElements(c.shape);
  if (!n || c.data.size() != static_cast<size_t>(*n) * DTypeSize(c.dtype)) return nullptr;
  return &c;
}

// Its values in float32 (float16 widened exactly).
std::vector<float> Floats(const vm::ConstantDef& c) {
  std::vector<float> v(c.data.size() / DTypeSize(c.dtype));
  if (c.dtype == DType::kFloat16) {
    for (size_t i = 0; i < v.size(); ++i) {
      kernels::Half h;
      std::memcpy(&h.bits, c.data.data() + 2 * i, 2);
      v[i] = kernels::HalfToFloat(h);
    }
  } else {
    std::memcpy(v.data(), c.data.data(), c.data.size());
  }
  return v;
}

// A constant of `dtype` (float32, or float16 rounded to nearest even) holding `values`.
vm::ConstantDef FloatConstantDef(DType dtype, const Shape& shape, const std::vector<float>& values) {
  vm::ConstantDef c;
  c.dtype = dtype;
  c.shape = shape;
  if (dtype == DType::kFloat16) {
    c.data.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const kernels::Half h = kernels::FloatToHalf(values[i]);
      std::memcpy(c.data.data() + 2 * i, &h.bits, 2);
    }
  } else {
    c.data.resize(values.size() * sizeof(float));
    std::memcpy(c.data.data(), values.data(), c.data.size());
  }
  return c;
}

// Whether `bn` is an inference BatchNormalization with one output.
bool IsInferenceBatchNorm(const Node& bn) {
  if (bn.op != "BatchNormalization" || bn.host || bn.values_op || !bn.regions.empty()) return false;
  if (bn.inputs.size() != 5 || bn.outputs.size() != 1) return false;
  auto training = bn.attrs.Int("training_mode", 0);
  auto spatial = bn.attrs.Int("spatial", 1);
  return training.ok() && *training == 0 && spatial.ok() && *spatial == 1;
}

}  // namespace

int FoldBatchNormalization(Graph& graph) {
  Graph& g = graph;
  std::vector<int> reads(g.values.size(), 0);
  std::vector<int> producer(g.values.size(), -1);
  std::vector<bool> is_output(g.values.size(), false);
  for (int o : g.outputs) is_output[o] = true;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    CountReads(g.nodes[i], reads);
    for (int o : g.nodes[i].outputs) producer[o] = static_cast<int>(i);
  }
  std::vector<bool> removed(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (!IsInferenceBatchNorm(bn)) continue;
    const int x = bn.inputs[0];
    if (x < 0 || producer[x] < 0 || reads[x] != 1 || is_output[x]) continue;
    Node& conv = g.nodes[producer[x]];
    if (conv.op != "Conv" || conv.host || !conv.regions.empty() || conv.outputs.size() != 1) continue;
    if (conv.inputs.size() < 2 || conv.inputs.size() > 3 || conv.inputs[0] < 0) continue;
    // float32, or float16: folded in float32, the new weights and bias rounded once.
    const DType dtype = g.values[x].dtype;
    if (dtype != DType::kFloat32 && dtype != DType::kFloat16) continue;
    const vm::ConstantDef* w = FloatConstant(g, conv.inputs[1]);
    if (!w || w->dtype != dtype || w->shape.size() < 3) continue;
    const int64_t m = w->shape[0];
    const vm::ConstantDef* b = conv.inputs.size() == 3 && conv.inputs[2] >= 0 ? FloatConstant(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() == 3 && conv.inputs[2] >= 0 && (!b || b->dtype != dtype || b->shape != Shape{m})) continue;
    const vm::ConstantDef* p[4];
    bool params = true;
    for (int k = 0; k < 4; ++k) {
      p[k] = FloatConstant(g, bn.inputs[1 + k]);
      params = params && p[k] && p[k]->shape == Shape{m};
    }
    auto epsilon = bn.attrs.Float("epsilon", 1e-5f);
    if (!params || !epsilon.ok()) continue;

    const std::vector<float> scale = Floats(*p[0]), bias = Floats(*p[1]), mean = Floats(*p[2]), var = Floats(*p[3]);
    std::vector<float> weights = Floats(*w);
    std::vector<float> conv_bias = b ? Floats(*b) : std::vector<float>(static_cast<size_t>(m), 0.0f);
    const size_t per_channel = weights.size() / static_cast<size_t>(m);
    for (int64_t c = 0; c < m; ++c) {
      const auto a = kernels::batchnorm::ChannelAffine<float>(scale[c], bias[c], mean[c], var[c], *epsilon);
      for (size_t k = 0; k < per_channel; ++k) weights[c * per_channel + k] *= a.mul;
      conv_bias[c] = conv_bias[c] * a.mul + a.add;
    }
    const Shape w_shape = w->shape;  // AddConstant may move the constants
    const int new_w = g.AddConstant(conv.name + "_W_bn_folded", FloatConstantDef(dtype, w_shape, weights));
    const int new_b = g.AddConstant(conv.name + "_B_bn_folded", FloatConstantDef(dtype, Shape{m}, conv_bias));
    conv.inputs.resize(3);
    conv.inputs[1] = new_w;
    conv.inputs[2] = new_b;
    conv.outputs[0] = bn.outputs[0];
    conv.name += "+" + bn.name;  // the Conv's kernel runs both (profiles, errors)
    removed[i] = true;
    ++folded;
  }
  if (folded > 0) {
    std::vector<Node> kept;
    kept.reserve(g.nodes.size() - folded);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
    }
    g.nodes = std::move(kept);
  }
  return folded;
}

int DecomposeBatchNormalization(Graph& graph) {
  Graph& g = graph;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  int decomposed = 0;
  for (Node& bn : g.nodes) {
    if (!IsInferenceBatchNorm(bn) || bn.inputs[0] < 0) {
      nodes.push_back(std::move(bn));
      continue;
    }
    const Value& x = g.values[bn.inputs[0]];
    const vm::ConstantDef* p[4];
    const DType dtype = x.dtype;
    bool params = (dtype == DType::kFloat32 || dtype == DType::kFloat16) && x.kind == vm::ValueKind::kTensor && x.rank_known &&
                  x.shape.size() >= 2 && x.shape[1] >= 0;
    const int64_t c = params ? x.shape[1] : 0;
    for (int k = 0; k < 4 && params; ++k) {
      p[k] = FloatConstant(g, bn.inputs[1 + k]);
      params = p[k] && p[k]->shape == Shape{c};
    }
    auto epsilon = bn.attrs.Float("epsilon", 1e-5f);
    if (!params || !epsilon.ok()) {
      nodes.push_back(std::move(bn));
      continue;
    }
    const std::vector<float> scale = Floats(*p[0]), bias = Floats(*p[1]), mean = Floats(*p[2]), var = Floats(*p[3]);
    std::vector<float> mul(static_cast<size_t>(c)), add(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) {
      const auto a = kernels::batchnorm::ChannelAffine<float>(scale[ch], bias[ch], mean[ch], var[ch], *epsilon);
      mul[ch] = a.mul;
      add[ch] = a.add;
    }
    // [C, 1, ...]: broadcast along X's dims after the channel's (ONNX aligns trailing dims).
    Shape per_channel{c};
    per_channel.resize(x.shape.size() - 1, 1);
    const int mul_id = g.AddConstant(bn.name + "_mul", FloatConstantDef(dtype, per_channel, mul));
    const int add_id = g.AddConstant(bn.name + "_add", FloatConstantDef(dtype, per_channel, add));
    Value scaled;  // X's type (AddConstant may have moved the values: read them again)
    const Value& xv = g.values[bn.inputs[0]];
    scaled.name = bn.name + "/scaled";
    scaled.dtype = xv.dtype;
    scaled.shape = xv.shape;
    scaled.rank_known = true;
    scaled.dims = xv.dims;
    scaled.bounds = xv.bounds;
    scaled.samples = xv.samples;
    scaled.lower_corner_unknown = xv.lower_corner_unknown;
    const int scaled_id = g.AddValue(std::move(scaled));
    Node m;
    m.op = "Mul";
    m.name = bn.name + "/mul";
    m.inputs = {bn.inputs[0], mul_id};
    m.outputs = {scaled_id};
    Node a;
    a.op = "Add";
    a.name = bn.name + "/add";
    a.inputs = {scaled_id, add_id};
    a.outputs = {bn.outputs[0]};
    nodes.push_back(std::move(m));
    nodes.push_back(std::move(a));
    ++decomposed;
  }
  g.nodes = std::move(nodes);
  return decomposed;
}

}  // namespace remex::compiler
