#!/usr/bin/env python3
"""Builds the seed corpus of the fuzz targets (tests/fuzz) from real artefacts.

  fuzz_server, fuzz_frame: the bytes real `remex` clients send to a real
      `remex-server` on loopback, one file per connection, recorded by a relay between
      them (`remex run` and `remex bench` on compiled executables and ONNX models, with
      attachments raw, zstd and chunked, and `remex shell` scripts);
  fuzz_executable: .rmx files from `remex compile` (NCHW, NHWC, float16, dispatched);
  fuzz_onnx_import: the ONNX models of the conformance cases (each under 64 KiB).

Usage: scripts/fuzz_seeds.py --build BUILD_DIR --out OUT_DIR
BUILD_DIR holds host_client/cli/remex and device_server/remex-server. The conformance cases
come from scripts/conformance-dir.sh.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Conformance models behind the recorded sessions and compiled executables: elementwise,
# broadcasting, shape functions, control flow, convolution, pooling, reductions,
# depth_to_space (DCR/CRD), recurrences, resize.
SESSION_MODELS = [
    "test_add", "test_add_bcast", "test_relu", "test_sigmoid", "test_matmul_2d", "test_gemm_default_single_elem_vector_bias",
    "test_conv_with_strides_padding", "test_maxpool_2d_default", "test_averagepool_2d_pads",
    "test_reduce_mean_keepdims_example", "test_softmax_axis_1", "test_concat_2d_axis_0",
    "test_reshape_reordered_all_dims", "test_transpose_default", "test_slice", "test_gather_0",
    "test_depthtospace_crd_mode_example", "test_depthtospace_example", "test_loop11", "test_if",
    "test_range_float_type_positive_delta_expanded", "test_lstm_defaults", "test_gru_defaults",
    "test_resize_upsample_scales_nearest", "test_expand_dim_changed", "test_where_example",
    "test_cast_FLOAT_to_FLOAT16", "test_batchnorm_example", "test_layer_normalization_2d_axis0",
]
MAX_ONNX_SEED_BYTES = 64 << 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """Relays connections from a local port to the server; writes what each client sent."""

    def __init__(self, upstream_port, out_dirs):
        self.upstream_port = upstream_port
        self.out_dirs = out_dirs
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.count = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.relay, args=(client,), daemon=True).start()

    def relay(self, client):
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        sent = bytearray()
        done = threading.Event()

        def back():
            try:
                while data := upstream.recv(1 << 16):
                    client.sendall(data)
            except OSError:
                pass
            done.set()

        threading.Thread(target=back, daemon=True).start()
        try:
            while data := client.recv(1 << 16):
                sent += data
                upstream.sendall(data)
        except OSError:
            pass
        upstream.shutdown(socket.SHUT_WR)
        done.wait(30)
        client.close()
        upstream.close()
        with self.lock:
            self.count += 1
            name = "session-%03d.bin" % self.count
        for d in self.out_dirs:
            with open(os.path.join(d, name), "wb") as f:
                f.write(sent)


FAILED = []


def run(cmd):
    """Runs a remex command. Errors are expected of some (unsupported ops, random inputs
    a model's data-dependent shapes refuse): such a session is a seed all the same."""
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        FAILED.append("%s: %s" % (" ".join(os.path.basename(c) for c in cmd[:3]),
                                  (result.stdout.strip().splitlines() or ["exit %d" % result.returncode])[-1]))
    return result.returncode == 0


def shell_session(remex, address, rmx, io_dir):
    """A `remex shell` session on `rmx` (what interactive clients send: uploads, runs
    kept on the server, stats, compare, profile, listHandles, free), its inputs saved
    by a `remex run` first."""
    if not run([remex, "run", rmx, "--output-dir", io_dir, "--save-inputs", "--fetch", "none"]):
        return
    inputs_dir = os.path.join(io_dir, "inputs")
    names = sorted(f[:-4] for f in os.listdir(inputs_dir) if f.endswith(".npy"))
    first_output = "%%%d" % (len(names) + 1)
    script = "\n".join([
        "load " + rmx,
        "upload " + " ".join("%s=%s" % (n, os.path.join(inputs_dir, n + ".npy")) for n in names),
        "handles", "run --fetch none", "stats " + first_output, "compare %s %s" % (first_output, first_output),
        "profile", "free " + first_output, "handles", ""])
    subprocess.run([remex, "shell", "--server", address], input=script, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, text=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    remex = os.path.join(args.build, "host_client", "cli", "remex")
    server_bin = os.path.join(args.build, "device_server", "remex-server")
    conformance = subprocess.run([os.path.join(REPO, "scripts", "conformance-dir.sh")], check=True,
                                 stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    node_dir = os.path.join(conformance, "onnx-node")
    dirs = {t: os.path.join(args.out, t) for t in ("fuzz_server", "fuzz_frame", "fuzz_executable", "fuzz_onnx_import")}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)

    # ONNX models.
    onnx_count = 0
    for case in sorted(os.listdir(node_dir)):
        model = os.path.join(node_dir, case, "model.onnx")
        if os.path.isfile(model) and os.path.getsize(model) <= MAX_ONNX_SEED_BYTES:
            shutil.copyfile(model, os.path.join(dirs["fuzz_onnx_import"], case + ".onnx"))
            onnx_count += 1

    # Executables.
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    compiled = []
    variants = [("", []), ("_nhwc", ["--layout", "NHWC"]), ("_f16", ["--dtype", "float16"])]
    for case in SESSION_MODELS:
        model = os.path.join(node_dir, case, "model.onnx")
        if not os.path.isfile(model):
            continue
        for suffix, flags in variants:
            out = os.path.join(work, case + suffix + ".rmx")
            if run([remex, "compile", model, "-o", out] + flags):
                shutil.copyfile(out, os.path.join(dirs["fuzz_executable"], case + suffix + ".rmx"))
                if not suffix:
                    compiled.append((case, out, model))

    # Sessions.
    port = free_port()
    server = subprocess.Popen([server_bin, "--listen", "127.0.0.1:%d" % port, "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        recorder = Recorder(port, [dirs["fuzz_server"], dirs["fuzz_frame"]])
        address = "127.0.0.1:%d" % recorder.port
        for i, (case, rmx, onnx_model) in enumerate(compiled):
            compression = ["auto", "none", "zstd"][i % 3]
            run([remex, "run", rmx, "--server", address, "--compression", compression, "--fetch", "all"])
            if i % 4 == 0:
                run([remex, "bench", onnx_model, "--server", address, "--warmup", "1", "--repeat", "2",
                     "--min-duration-s", "0", "--min-samples", "0", "--max-trials", "1"])
            if i % 5 == 0:
                shell_session(remex, address, rmx, os.path.join(work, case + "_io"))
        time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(30)
    shutil.rmtree(work)
    if FAILED:
        print("fuzz_seeds: %d commands ended in an error, e.g. %s" % (len(FAILED), FAILED[0]))
    counts = {t: len(os.listdir(d)) for t, d in dirs.items()}
    print("fuzz_seeds: " + ", ".join("%s %d" % kv for kv in sorted(counts.items())))
    if min(counts.values()) == 0:
        print("fuzz_seeds: a target got no seed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
