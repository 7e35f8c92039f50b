#!/usr/bin/python3
"""decoder_step: writes a small transformer decoder step with a KV cache, as
torch.onnx.export writes a GPT-2-style decoder (opset 17), for the decode-loop benchmark
(bench/decode_loop.py) and the Python client's decode-loop test.

    bench/decoder_step.py OUT.onnx [--layers 2] [--hidden 256] [--heads 4] [--ffn 1024]
        [--vocab 2048] [--seed 0]

Inputs (batch, sequence and past_sequence are symbolic dims):
  input_ids            int64   [batch, sequence]
  past_key_L, past_value_L     float32 [batch, heads, past_sequence, hidden/heads], L = 0..layers-1
Outputs:
  logits               float32 [batch, sequence, vocab]
  present_key_L, present_value_L  float32 [batch, heads, past_sequence + sequence, hidden/heads]
    (Concat(past, new) along axis 2: the next step's past)

Each layer: LayerNormalization, Q/K/V MatMul + Add, the heads split by a Reshape whose
shape is built from Shape/Gather/Concat and a Transpose, scaled dot-product attention with
a causal mask made from Range/Less/Where (position i of this step sees the past and
positions <= i), Softmax, the heads merged back, the output projection and a residual
Add; then LayerNormalization, an MLP with GELU written with Erf (0.5 x (1 + erf(x/sqrt 2)))
and a residual Add. Token and position embeddings by Gather (positions from past_sequence
on, by Range); a final LayerNormalization and the vocabulary projection. The first step
has an empty cache: past_sequence = 0. Weights: normal(0, 0.02) from --seed, as GPT-2
initialises them.
"""
import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers=2, hidden=256, heads=4, ffn=1024, vocab=2048, max_positions=1024, seed=0):
    """The decoder step as an onnx.ModelProto (opset 17); see the module docstring."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    head_dim = hidden // heads
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    count = [0]

    def name(prefix):
        count[0] += 1
        return f"{prefix}_{count[0]}"

    def const(value, prefix="c"):
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(*shape):
        return const((rng.standard_normal(shape) * 0.02).astype(np.float32), "w")

    def node(op, inputs, **attrs):
        out = name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def layer_norm(x):
        return node("LayerNormalization", [x, const(np.ones(hidden, np.float32), "ln_g"),
                                           const(np.zeros(hidden, np.float32), "ln_b")], axis=-1, epsilon=1e-5)

    def linear(x, n_in, n_out):
        return node("Add", [node("MatMul", [x, weight(n_in, n_out)]), weight(n_out)])

    i64 = lambda v: const(np.array(v, np.int64), "i")  # noqa: E731
    # Dims of the step, as the exporter computes them: Shape, Gather, Unsqueeze.
    ids_shape = node("Shape", ["input_ids"])
    batch = node("Gather", [ids_shape, i64(0)], axis=0)
    seq = node("Gather", [ids_shape, i64(1)], axis=0)
    past_len = node("Gather", [node("Shape", ["past_key_0"]), i64(2)], axis=0)
    total = node("Add", [past_len, seq])
    batch_1 = node("Unsqueeze", [batch, i64([0])])
    seq_1 = node("Unsqueeze", [seq, i64([0])])
    split_shape = node("Concat", [batch_1, seq_1, i64([heads]), i64([head_dim])], axis=0)
    merge_shape = node("Concat", [batch_1, seq_1, i64([hidden])], axis=0)
    # Causal mask [sequence, past_sequence + sequence]: -inf where a key lies after the query.
    rows = node("Range", [past_len, total, i64(1)])
    cols = node("Range", [i64(0), total, i64(1)])
    later = node("Less", [node("Unsqueeze", [rows, i64([1])]), node("Unsqueeze", [cols, i64([0])])])
    mask = node("Where", [later, const(np.array(-1e9, np.float32)), const(np.array(0, np.float32))])

    positions = node("Range", [past_len, total, i64(1)])
    x = node("Add", [node("Gather", [weight(vocab, hidden), "input_ids"], axis=0),
                     node("Gather", [weight(max_positions, hidden), positions], axis=0)])
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])]
    outputs = [None]
    scale = const(np.array(1 / math.sqrt(head_dim), np.float32))
    for layer in range(layers):
        h = layer_norm(x)

        def heads_of(t):  # [b, s, hidden] -> [b, heads, s, head_dim]
            return node("Transpose", [node("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])

        q = heads_of(linear(h, hidden, hidden))
        k = heads_of(linear(h, hidden, hidden))
        v = heads_of(linear(h, hidden, hidden))
        cache = []
        for kind, new in (("key", k), ("value", v)):
            past, present = f"past_{kind}_{layer}", f"present_{kind}_{layer}"
            inputs.append(helper.make_tensor_value_info(
                past, TensorProto.FLOAT, ["batch", heads, "past_sequence", head_dim]))
            nodes.append(helper.make_node("Concat", [past, new], [present], name=present, axis=2))
            outputs.append(helper.make_tensor_value_info(
                present, TensorProto.FLOAT, ["batch", heads, "total_sequence", head_dim]))
            cache.append(present)
        scores = node("Mul", [node("MatMul", [q, node("Transpose", [cache[0]], perm=[0, 1, 3, 2])]), scale])
        probs = node("Softmax", [node("Add", [scores, mask])], axis=-1)
        context = node("Reshape", [node("Transpose", [node("MatMul", [probs, cache[1]])], perm=[0, 2, 1, 3]),
                                   merge_shape])
        x = node("Add", [x, linear(context, hidden, hidden)])
        f = linear(layer_norm(x), hidden, ffn)
        gelu = node("Mul", [node("Mul", [f, const(np.array(0.5, np.float32))]),
                            node("Add", [node("Erf", [node("Div", [f, const(np.array(math.sqrt(2), np.float32))])]),
                                         const(np.array(1, np.float32))])])
        x = node("Add", [x, linear(gelu, ffn, hidden)])
    nodes.append(helper.make_node("MatMul", [layer_norm(x), weight(hidden, vocab)], ["logits"], name="logits"))
    outputs[0] = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab])
    graph = helper.make_graph(nodes, "decoder_step", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="remex-bench")
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    onnx.save(build(a.layers, a.hidden, a.heads, a.ffn, a.vocab, seed=a.seed), a.output)


if __name__ == "__main__":
    main()
