#!/usr/bin/python3
"""bench_models: writes the models of the classes bench/compare_ort.py measures that no
fetch script provides, each with random weights and the graph an exporter or quantizer
writes for it, and the inputs of one case.

    bench/bench_models.py NAME OUT_DIR [--shape S] [--seed 0]

Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.inputs/<input>.npy (the inputs at the case's
shape: images normal(0, 1), token ids uniform over the vocabulary, an attention mask of
ones, an empty or filled cache). NAME is one of:

  resnet50        ResNet-50 (torchvision's layout: stride in the 3x3 of each bottleneck),
                  Conv + BatchNormalization + Relu, MaxPool, residual Add,
                  GlobalAveragePool, Flatten, Gemm; float32 data [N, 3, 224, 224] -> [N, 1000]
                  (the ONNX model zoo's resnet50 at the same operations and sizes)
  densenet121     DenseNet-121 (growth 32, blocks 6/12/24/16, BN-Relu-Conv order, a
                  Concat per layer), float32 data [N, 3, 224, 224] -> [N, 1000]
  detector        a one-stage detector as YOLO-style exports write it: a strided
                  Conv + BatchNormalization + SiLU (Sigmoid, Mul) backbone to stride 32,
                  a top-down path of Resize (nearest, scales 2) and Concat, 1x1 heads at
                  strides 8, 16 and 32 reshaped, transposed and concatenated;
                  images [1, 3, 416, 416] -> detections [1, 10647, 25]
  encoder         a BERT-style encoder as torch.onnx.export writes it (opset 17), dynamic
                  batch and sequence: head reshapes from Shape/Gather/Unsqueeze/Concat,
                  an additive mask from attention_mask, Softmax attention,
                  LayerNormalization, GELU with Erf; 4 layers, hidden 256, 4 heads,
                  MLP 1024, vocabulary 8192; input_ids, attention_mask int64
                  [batch, sequence] -> last_hidden_state [batch, sequence, 256]
  encoder-int8    the encoder with every MatMul by a weight dynamically quantized as
                  ONNX Runtime's quantize_dynamic writes it: DynamicQuantizeLinear,
                  MatMulInteger (uint8 x int8 per tensor), Cast, Mul by the scales, Add
  resnet50-int8   ResNet-50 in QOperator form (BatchNormalization folded): QuantizeLinear,
                  QLinearConv (uint8 activations, int8 weights per output channel, int32
                  bias; Relu as the output's zero point 0), MaxPool on uint8, residual Add
                  through DequantizeLinear and QuantizeLinear, float head
  resnet50-convinteger  ResNet-50 with each Conv dynamically quantized:
                  DynamicQuantizeLinear, ConvInteger (uint8 x uint8, zero point 128),
                  Cast, Mul by the scales, Add of the bias (BatchNormalization folded)
  resnet50-fp16   resnet50 with every tensor in float16, input and output included
  decoder         bench/decoder_step.py's decoder step (2 layers, hidden 256) at one new
                  token after a cache of 32 (past_sequence 32)

--shape sets the batch (resnet50, densenet121 and their variants: N, default 1) or
batch x sequence (encoder, encoder-int8: default 1x128).
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_step  # noqa: E402


class Graph:
    """Nodes and initializers of one graph, with unique names and seeded weights."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, value, prefix="c"):
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def i64(self, v):
        return self.const(np.array(v, np.int64), "i")

    def f32(self, v):
        return self.const(np.array(v, np.float32), "f")

    def node(self, op, inputs, outputs=1, **attrs):
        names = [self.name(op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=names[0], **attrs))
        return names[0] if outputs == 1 else names

    def model(self, name, inputs, outputs, opset=17):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="remex-bench")
        onnx.checker.check_model(m)
        return m


# --- convolutions in four forms: float (with BatchNormalization), QLinearConv, ConvInteger


def conv_weights(g, cin, cout, k, group=1):
    """He-initialised weights [cout, cin/group, k, k] and a BatchNormalization's parameters."""
    w = (g.rng.standard_normal((cout, cin // group, k, k)) * math.sqrt(2 / (cin // group * k * k))).astype(np.float32)
    bn = (g.rng.uniform(0.5, 1.5, cout), g.rng.uniform(-0.1, 0.1, cout), g.rng.uniform(-0.1, 0.1, cout),
          g.rng.uniform(0.5, 1.5, cout))  # scale, bias, mean, var
    return w, [b.astype(np.float32) for b in bn]


def fold(w, bn, eps=1e-5):
    scale, bias, mean, var = bn
    s = scale / np.sqrt(var + eps)
    return (w * s[:, None, None, None]).astype(np.float32), (bias - mean * s).astype(np.float32)


ACT_SCALE = 0.05  # the quantized models' activation scale (uint8: zero point 0 after Relu, 128 before)


class ConvNet:
    """Conv(+BatchNormalization)(+Relu) in the model's form. In the QOperator form `x` is
    uint8 (at ACT_SCALE, zero point 0 unless the call says otherwise) and so is the
    result: zero point 0 after a Relu, 128 without."""

    def __init__(self, g, form):
        self.g, self.form = g, form

    def conv(self, x, cin, cout, k, stride=1, relu=True, in_scale=ACT_SCALE, in_zp=0):
        g = self.g
        w, bn = conv_weights(g, cin, cout, k)
        if not relu:  # a residual branch's last scale small, so activations stay bounded over 16 blocks
            bn[0] *= 0.25
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        if self.form == "float":
            y = g.node("Conv", [x, g.const(w, "w")], **attrs)
            scale, bias, mean, var = bn
            y = g.node("BatchNormalization", [y, g.const(scale), g.const(bias), g.const(mean), g.const(var)],
                       epsilon=1e-5)
            return g.node("Relu", [y]) if relu else y
        wf, bf = fold(w, bn)
        if self.form == "qlinear":
            w_scale = np.abs(wf).reshape(cout, -1).max(axis=1) / 127
            wq = np.clip(np.round(wf / w_scale[:, None, None, None]), -127, 127).astype(np.int8)
            bq = np.round(bf / (in_scale * w_scale)).astype(np.int32)
            return g.node("QLinearConv", [x, g.f32(in_scale), g.const(np.uint8(in_zp)), g.const(wq, "w"),
                                          g.const(w_scale.astype(np.float32)), g.const(np.zeros(cout, np.int8)),
                                          g.f32(ACT_SCALE), g.const(np.uint8(0 if relu else 128)), g.const(bq)],
                          **attrs)
        # ConvInteger, as a dynamic quantizer writes it.
        w_scale = float(np.abs(wf).max() / 127)
        wq = (np.clip(np.round(wf / w_scale), -127, 127) + 128).astype(np.uint8)
        xq, x_scale, x_zp = g.node("DynamicQuantizeLinear", [x], outputs=3)
        acc = g.node("ConvInteger", [xq, g.const(wq, "w"), x_zp, g.const(np.uint8(128))], **attrs)
        y = g.node("Mul", [g.node("Cast", [acc], to=TensorProto.FLOAT), g.node("Mul", [x_scale, g.f32(w_scale)])])
        y = g.node("Add", [y, g.const(bf.reshape(1, cout, 1, 1))])
        return g.node("Relu", [y]) if relu else y

    def add_relu(self, a, b, b_zp):
        """Relu(a + b). In the QOperator form `a` has zero point 128 and `b` `b_zp`; both are
        dequantized and the sum quantized again (zero point 0), as a quantizer without
        QLinearAdd (not an ONNX op) writes it."""
        g = self.g
        if self.form != "qlinear":
            return g.node("Relu", [g.node("Add", [a, b])])
        fa = g.node("DequantizeLinear", [a, g.f32(ACT_SCALE), g.const(np.uint8(128))])
        fb = g.node("DequantizeLinear", [b, g.f32(ACT_SCALE), g.const(np.uint8(b_zp))])
        s = g.node("Relu", [g.node("Add", [fa, fb])])
        return g.node("QuantizeLinear", [s, g.f32(ACT_SCALE), g.const(np.uint8(0))])


def resnet50(form="float", seed=0):
    g = Graph(seed)
    net = ConvNet(g, form)
    x = "data"
    if form == "qlinear":  # images normal(0, 1): scale 1/32, zero point 128
        x = net.conv(g.node("QuantizeLinear", [x, g.f32(1 / 32), g.const(np.uint8(128))]), 3, 64, 7, stride=2,
                     in_scale=1 / 32, in_zp=128)
    else:
        x = net.conv(x, 3, 64, 7, stride=2)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            s = stride if b == 0 else 1
            y = net.conv(x, cin, width, 1)
            y = net.conv(y, width, width, 3, stride=s)
            y = net.conv(y, width, width * 4, 1, relu=False)
            if b == 0:
                x = net.add_relu(y, net.conv(x, cin, width * 4, 1, stride=s, relu=False), 128)
            else:
                x = net.add_relu(y, x, 0)
            cin = width * 4
    if form == "qlinear":
        x = g.node("DequantizeLinear", [x, g.f32(ACT_SCALE), g.const(np.uint8(0))])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    fc = (g.rng.standard_normal((1000, 2048)) * math.sqrt(1 / 2048)).astype(np.float32)
    g.nodes.append(helper.make_node("Gemm", [x, g.const(fc, "fc"), g.const(np.zeros(1000, np.float32))], ["prob"],
                                    name="fc", transB=1))
    return g.model("resnet50", [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 224, 224])],
                   [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 1000])])


def to_float16(model):
    """Every float32 initializer, input and output of `model` in float16 (its ops take
    either), as a float16 conversion without kept float32 I/O writes it."""
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.checker.check_model(model)
    return model


def densenet121(seed=0):
    g = Graph(seed)

    def bn_relu(x, c):
        _, bn = conv_weights(g, 1, c, 1)
        scale, bias, mean, var = bn
        return g.node("Relu", [g.node("BatchNormalization", [x, g.const(scale), g.const(bias), g.const(mean),
                                                             g.const(var)], epsilon=1e-5)])

    def conv(x, cin, cout, k, stride=1):
        w, _ = conv_weights(g, cin, cout, k)
        return g.node("Conv", [x, g.const(w, "w")], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)

    x = bn_relu(conv("data", 3, 64, 7, stride=2), 64)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c, growth = 64, 32
    for i, layers in enumerate((6, 12, 24, 16)):
        for _ in range(layers):
            y = conv(bn_relu(x, c), c, 4 * growth, 1)
            y = conv(bn_relu(y, 4 * growth), 4 * growth, growth, 3)
            x = g.node("Concat", [x, y], axis=1)
            c += growth
        if i < 3:
            x = conv(bn_relu(x, c), c, c // 2, 1)
            c //= 2
            x = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.node("Flatten", [g.node("GlobalAveragePool", [bn_relu(x, c)])], axis=1)
    fc = (g.rng.standard_normal((1000, c)) * math.sqrt(1 / c)).astype(np.float32)
    g.nodes.append(helper.make_node("Gemm", [x, g.const(fc, "fc"), g.const(np.zeros(1000, np.float32))], ["prob"],
                                    name="fc", transB=1))
    return g.model("densenet121", [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 224, 224])],
                   [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["N", 1000])])


def detector(seed=0, size=416, classes=20, anchors=3):
    g = Graph(seed)

    def cbs(x, cin, cout, k=3, stride=1):  # Conv, BatchNormalization, SiLU
        w, (scale, bias, mean, var) = conv_weights(g, cin, cout, k)
        y = g.node("Conv", [x, g.const(w, "w")], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        y = g.node("BatchNormalization", [y, g.const(scale), g.const(bias), g.const(mean), g.const(var)])
        return g.node("Mul", [y, g.node("Sigmoid", [y])])

    def up(x):
        return g.node("Resize", [x, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    x = cbs("images", 3, 16, stride=2)  # /2
    x = cbs(cbs(x, 16, 32, stride=2), 32, 32)  # /4
    c3 = cbs(cbs(x, 32, 64, stride=2), 64, 64)  # /8
    c4 = cbs(cbs(c3, 64, 128, stride=2), 128, 128)  # /16
    c5 = cbs(cbs(c4, 128, 256, stride=2), 256, 256)  # /32
    p5 = cbs(c5, 256, 128, k=1)
    p4 = cbs(g.node("Concat", [up(p5), c4], axis=1), 256, 128)
    p3 = cbs(g.node("Concat", [up(cbs(p4, 128, 64, k=1)), c3], axis=1), 128, 64)
    per = 5 + classes
    heads = []
    for p, c, stride in ((p3, 64, 8), (p4, 128, 16), (p5, 128, 32)):
        n = size // stride
        w, _ = conv_weights(g, c, anchors * per, 1)
        h = g.node("Conv", [p, g.const(w, "w"), g.const(np.zeros(anchors * per, np.float32))], kernel_shape=[1, 1])
        h = g.node("Reshape", [h, g.i64([1, anchors, per, n, n])])
        h = g.node("Transpose", [h], perm=[0, 1, 3, 4, 2])
        heads.append(g.node("Reshape", [h, g.i64([1, -1, per])]))
    g.nodes.append(helper.make_node("Sigmoid", [g.node("Concat", heads, axis=1)], ["detections"], name="detections"))
    boxes = anchors * sum((size // s) ** 2 for s in (8, 16, 32))
    return g.model("detector", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info("detections", TensorProto.FLOAT, [1, boxes, per])])


def encoder(quantized=False, seed=0, layers=4, hidden=256, heads=4, ffn=1024, vocab=8192, max_positions=512):
    g = Graph(seed)
    head_dim = hidden // heads

    def weight(*shape):
        return (g.rng.standard_normal(shape) * 0.02).astype(np.float32)

    def linear(x, n_in, n_out):
        w, b = weight(n_in, n_out), g.const(weight(n_out), "b")
        if not quantized:
            return g.node("Add", [g.node("MatMul", [x, g.const(w, "w")]), b])
        w_scale = float(np.abs(w).max() / 127)
        wq = np.clip(np.round(w / w_scale), -127, 127).astype(np.int8)
        xq, x_scale, x_zp = g.node("DynamicQuantizeLinear", [x], outputs=3)
        acc = g.node("MatMulInteger", [xq, g.const(wq, "w"), x_zp, g.const(np.int8(0))])
        y = g.node("Mul", [g.node("Cast", [acc], to=TensorProto.FLOAT), g.node("Mul", [x_scale, g.f32(w_scale)])])
        return g.node("Add", [y, b])

    def layer_norm(x):
        return g.node("LayerNormalization", [x, g.const(np.ones(hidden, np.float32)),
                                             g.const(np.zeros(hidden, np.float32))], axis=-1, epsilon=1e-12)

    shape = g.node("Shape", ["input_ids"])
    batch = g.node("Unsqueeze", [g.node("Gather", [shape, g.i64(0)], axis=0), g.i64([0])])
    seq_scalar = g.node("Gather", [shape, g.i64(1)], axis=0)
    seq = g.node("Unsqueeze", [seq_scalar, g.i64([0])])
    split_shape = g.node("Concat", [batch, seq, g.i64([heads]), g.i64([head_dim])], axis=0)
    merge_shape = g.node("Concat", [batch, seq, g.i64([hidden])], axis=0)
    positions = g.node("Range", [g.i64(0), seq_scalar, g.i64(1)])
    x = g.node("Add", [g.node("Gather", [g.const(weight(vocab, hidden), "emb"), "input_ids"], axis=0),
                       g.node("Gather", [g.const(weight(max_positions, hidden), "pos"), positions], axis=0)])
    x = layer_norm(x)
    # [batch, 1, 1, sequence]: 0 where attention_mask is 1, -10000 where it is 0
    m = g.node("Cast", [g.node("Unsqueeze", ["attention_mask", g.i64([1, 2])])], to=TensorProto.FLOAT)
    mask = g.node("Mul", [g.node("Sub", [g.f32(1.0), m]), g.f32(-10000.0)])
    scale = g.f32(math.sqrt(head_dim))
    for _ in range(layers):
        def heads_of(t):
            return g.node("Transpose", [g.node("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])

        q, k, v = (heads_of(linear(x, hidden, hidden)) for _ in range(3))
        scores = g.node("Div", [g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        probs = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
        ctx = g.node("Reshape", [g.node("Transpose", [g.node("MatMul", [probs, v])], perm=[0, 2, 1, 3]),
                                 merge_shape])
        x = layer_norm(g.node("Add", [linear(ctx, hidden, hidden), x]))
        f = linear(x, hidden, ffn)
        gelu = g.node("Mul", [g.node("Mul", [f, g.node("Add", [g.node("Erf", [g.node("Div", [f, g.f32(math.sqrt(2))])]),
                                                               g.f32(1.0)])]), g.f32(0.5)])
        x = layer_norm(g.node("Add", [linear(gelu, ffn, hidden), x]))
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
           for n in ("input_ids", "attention_mask")]
    return g.model("encoder", ids, [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                                                  ["batch", "sequence", hidden])])


def build(name, shape, seed):
    """(model, {input name: array}) of the case `name` at `shape` (see the module docstring)."""
    rng = np.random.default_rng(seed + 1)
    image = lambda n, size=224: rng.standard_normal((n, 3, size, size)).astype(np.float32)  # noqa: E731
    if name in ("resnet50", "densenet121", "resnet50-int8", "resnet50-convinteger", "resnet50-fp16"):
        n = int(shape or 1)
        if name == "densenet121":
            return densenet121(seed), {"data": image(n)}
        if name == "resnet50-fp16":
            return to_float16(resnet50("float", seed)), {"data": image(n).astype(np.float16)}
        form = {"resnet50": "float", "resnet50-int8": "qlinear", "resnet50-convinteger": "convinteger"}[name]
        return resnet50(form, seed), {"data": image(n)}
    if name == "detector":
        return detector(seed), {"images": image(1, 416)}
    if name in ("encoder", "encoder-int8"):
        b, s = (int(v) for v in (shape or "1x128").split("x"))
        return encoder(name == "encoder-int8", seed), {
            "input_ids": rng.integers(0, 8192, (b, s), dtype=np.int64), "attention_mask": np.ones((b, s), np.int64)}
    if name == "decoder":
        model = decoder_step.build(seed=seed)
        inputs = {"input_ids": rng.integers(0, 2048, (1, 1), dtype=np.int64)}
        for layer in range(2):
            for kind in ("key", "value"):
                inputs[f"past_{kind}_{layer}"] = rng.standard_normal((1, 4, 32, 64)).astype(np.float32)
        return model, inputs
    raise SystemExit(f"bench_models: unknown model {name!r} (see --help)")


NAMES = ["resnet50", "densenet121", "detector", "encoder", "encoder-int8", "resnet50-int8", "resnet50-convinteger",
         "resnet50-fp16", "decoder"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=NAMES)
    ap.add_argument("out_dir")
    ap.add_argument("--shape", default="")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    model, inputs = build(a.name, a.shape, a.seed)
    os.makedirs(os.path.join(a.out_dir, a.name + ".inputs"), exist_ok=True)
    onnx.save(model, os.path.join(a.out_dir, a.name + ".onnx"))
    for n, v in inputs.items():
        np.save(os.path.join(a.out_dir, a.name + ".inputs", n + ".npy"), v)
    print(os.path.join(a.out_dir, a.name + ".onnx"))


if __name__ == "__main__":
    main()
