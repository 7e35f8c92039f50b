#!/usr/bin/env node
// Remex reference runtime: runs an ONNX model with onnxruntime-node (CPU) on .npy inputs and
// writes every output as .npy, so tests can compare Remex's results against it.
//
// Usage:
//   node ort_run.js [--modules DIR] [BENCH OPTIONS] MODEL.onnx OUT_DIR NAME=IN.npy [NAME=IN.npy ...]
//
// BENCH OPTIONS time the session instead (OUT_DIR '-': no outputs written), as the side
// by side benchmark (bench/compare_ort.py) runs it: --bench REPEAT samples of --number
// N session.run calls each (default 1), after --warmup W untimed calls (default 1),
// with --threads T intra-op threads (default: ORT's) and --optimization
// disabled|basic|extended|all (default: ORT's). Prints one JSON object: samples_ms (mean
// ms per call of each sample), median_ms, min_ms, number, threads, optimization.
//
// onnxruntime-node is loaded from, in order: --modules DIR (a node_modules folder, e.g.
// CACHE_DIR/npm/node_modules as installed by scripts/fetch-models.sh), $REMEX_ORT_MODULES,
// or Node's normal resolution (so NODE_PATH=CACHE_DIR/npm/node_modules works).
//
// Inputs: .npy format 1.0/2.0/3.0, C order, little-endian; dtypes float32, float16, float64,
// int8/16/32/64, uint8/16/32/64, bool. Each output is written to OUT_DIR/<name>.npy, where
// every character of the output name outside [A-Za-z0-9_.-] becomes '_'. The session uses
// the CPU execution provider with ORT's default graph optimization level; a reference run
// (not --bench) asks for exact (non-saturating) integer matrix products on every x86-64
// CPU (session.x64quantprecision).
// Exits 2 on bad usage, 1 on any other error, with a message on stderr.
'use strict';

const fs = require('fs');
const path = require('path');

// numpy descr (without byte-order char) <-> ORT tensor type and typed array.
const DTYPES = [
  { descr: 'f4', ort: 'float32', Array: Float32Array },
  { descr: 'f2', ort: 'float16', Array: Uint16Array }, // raw IEEE half bits
  { descr: 'f8', ort: 'float64', Array: Float64Array },
  { descr: 'i1', ort: 'int8', Array: Int8Array },
  { descr: 'i2', ort: 'int16', Array: Int16Array },
  { descr: 'i4', ort: 'int32', Array: Int32Array },
  { descr: 'i8', ort: 'int64', Array: BigInt64Array },
  { descr: 'u1', ort: 'uint8', Array: Uint8Array },
  { descr: 'u2', ort: 'uint16', Array: Uint16Array },
  { descr: 'u4', ort: 'uint32', Array: Uint32Array },
  { descr: 'u8', ort: 'uint64', Array: BigUint64Array },
  { descr: 'b1', ort: 'bool', Array: Uint8Array },
];

class UsageError extends Error {}

function fail(msg) {
  throw new Error(msg);
}

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = buf[6];
  let headerLen, headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    fail(`${file}: unsupported .npy version ${major}.${buf[7]}`);
  }
  const header = buf.toString(major === 3 ? 'utf8' : 'latin1', headerStart, headerStart + headerLen);
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const order = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !order || !shape) fail(`${file}: malformed .npy header: ${header.trim()}`);
  if (order[1] === 'True') fail(`${file}: Fortran-order arrays are not supported`);
  const m = /^([<|=]?)([a-z]\d+)$/.exec(descr[1]);
  const dtype = m && DTYPES.find((d) => d.descr === m[2]);
  if (!dtype) fail(`${file}: unsupported dtype '${descr[1]}' (need little-endian numeric or bool)`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const dataStart = headerStart + headerLen;
  const nbytes = count * dtype.Array.BYTES_PER_ELEMENT;
  if (buf.length - dataStart < nbytes) fail(`${file}: truncated data (${buf.length - dataStart} of ${nbytes} bytes)`);
  // Copy into a fresh, aligned buffer: the data offset in the file need not be aligned.
  const data = new dtype.Array(count);
  new Uint8Array(data.buffer).set(buf.subarray(dataStart, dataStart + nbytes));
  return { dtype, dims, data };
}

function writeNpy(file, dtype, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  const byteOrder = dtype.Array.BYTES_PER_ELEMENT === 1 ? '|' : '<';
  let header = `{'descr': '${byteOrder}${dtype.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const major = header.length + 64 < 65536 ? 1 : 2;
  const prefix = major === 1 ? 10 : 12;
  header += ' '.repeat(63 - ((prefix + header.length) % 64)) + '\n'; // pad to 64 bytes
  const pre = Buffer.alloc(prefix);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = major;
  pre[7] = 0;
  if (major === 1) pre.writeUInt16LE(header.length, 8);
  else pre.writeUInt32LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function parseArgs(argv) {
  let modules = process.env.REMEX_ORT_MODULES || null;
  const bench = { repeat: 0, number: 1, warmup: 1, threads: 0, optimization: null };
  const pos = [];
  const count = (i, name, min) => {
    if (i + 1 >= argv.length) throw new UsageError(`${name} needs a number`);
    const v = Number(argv[i + 1]);
    if (!Number.isInteger(v) || v < min) throw new UsageError(`${name} must be an integer >= ${min}`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--bench') {
      bench.repeat = count(i++, '--bench', 1);
    } else if (argv[i] === '--number') {
      bench.number = count(i++, '--number', 1);
    } else if (argv[i] === '--warmup') {
      bench.warmup = count(i++, '--warmup', 0);
    } else if (argv[i] === '--threads') {
      bench.threads = count(i++, '--threads', 1);
    } else if (argv[i] === '--optimization') {
      if (i + 1 >= argv.length || !['disabled', 'basic', 'extended', 'all'].includes(argv[i + 1])) {
        throw new UsageError('--optimization must be disabled, basic, extended or all');
      }
      bench.optimization = argv[++i];
    } else if (argv[i] === '--modules') {
      if (i + 1 >= argv.length) throw new UsageError('--modules needs a directory');
      modules = argv[++i];
    } else if (argv[i].startsWith('--modules=')) {
      modules = argv[i].slice('--modules='.length);
    } else if (argv[i] === '-h' || argv[i] === '--help') {
      throw new UsageError('');
    } else {
      pos.push(argv[i]);
    }
  }
  if (pos.length < 2) throw new UsageError('need MODEL.onnx and OUT_DIR');
  const [model, outDir, ...specs] = pos;
  const inputs = specs.map((s) => {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new UsageError(`input '${s}' is not NAME=FILE.npy`);
    return { name: s.slice(0, eq), file: s.slice(eq + 1) };
  });
  return { modules, model, outDir, inputs, bench };
}

function loadOrt(modules) {
  const id = modules ? path.resolve(modules, 'onnxruntime-node') : 'onnxruntime-node';
  try {
    return require(id);
  } catch (e) {
    fail(`cannot load onnxruntime-node from ${modules ? id : 'NODE_PATH/default paths'} ` +
      `(run scripts/fetch-models.sh; pass --modules CACHE_DIR/npm/node_modules): ${e.message.split('\n')[0]}`);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt(args.modules);
  if (!fs.existsSync(args.model)) fail(`model not found: ${args.model}`);

  const options = { executionProviders: ['cpu'] };
  // session.x64quantprecision: on x86-64 CPUs without VNNI, ORT's default u8 x s8
  // integer GEMM (MatMulInteger, ConvInteger, QLinearConv, ...) adds pairs of products in
  // saturating 16-bit lanes, so its results depend on the CPU; '1' makes it multiply the
  // s8 weights as u8 in exact 32-bit sums on every CPU, as the ONNX spec defines them.
  // A reference run takes it; --bench times ORT's default plan, as its users run it.
  if (!args.bench.repeat) options.extra = { session: { x64quantprecision: '1' } };
  if (args.bench.threads) options.intraOpNumThreads = args.bench.threads;
  if (args.bench.optimization) options.graphOptimizationLevel = args.bench.optimization;
  const session = await ort.InferenceSession.create(args.model, options);
  const feeds = {};
  for (const { name, file } of args.inputs) {
    if (!session.inputNames.includes(name)) {
      fail(`model has no input '${name}' (inputs: ${session.inputNames.join(', ')})`);
    }
    if (name in feeds) fail(`input '${name}' given twice`);
    const { dtype, dims, data } = readNpy(file);
    feeds[name] = new ort.Tensor(dtype.ort, data, dims);
  }
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length) fail(`missing model inputs: ${missing.join(', ')}`);

  if (args.bench.repeat > 0) {
    const b = args.bench;
    for (let i = 0; i < b.warmup; i++) await session.run(feeds);
    const samples = [];
    for (let r = 0; r < b.repeat; r++) {
      const t = process.hrtime.bigint();
      for (let i = 0; i < b.number; i++) await session.run(feeds);
      samples.push(Number(process.hrtime.bigint() - t) / 1e6 / b.number);
    }
    const sorted = [...samples].sort((x, y) => x - y);
    const mid = sorted.length >> 1;
    const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    console.log(JSON.stringify({ samples_ms: samples, median_ms: median, min_ms: sorted[0], number: b.number,
      threads: b.threads || null, optimization: b.optimization }));
    if (args.outDir === '-') {
      await session.release();
      return;
    }
  }
  const results = await session.run(feeds);
  fs.mkdirSync(args.outDir, { recursive: true });
  const written = new Map();
  for (const name of session.outputNames) {
    const t = results[name];
    const dtype = t && DTYPES.find((d) => d.ort === t.type);
    if (!dtype) fail(`output '${name}': unsupported type '${t ? t.type : 'none'}'`);
    const base = name.replace(/[^A-Za-z0-9_.-]/g, '_');
    if (written.has(base)) fail(`outputs '${written.get(base)}' and '${name}' both map to ${base}.npy`);
    written.set(base, name);
    writeNpy(path.join(args.outDir, `${base}.npy`), dtype, t.dims, t.data);
  }
  await session.release();
}

main().catch((e) => {
  if (e instanceof UsageError) {
    if (e.message) console.error(`ort_run: ${e.message}`);
    console.error('usage: node ort_run.js [--modules DIR] [--bench REPEAT [--number N] [--warmup W] [--threads T] ' +
      '[--optimization LEVEL]] MODEL.onnx OUT_DIR|- NAME=IN.npy [NAME=IN.npy ...]');
    process.exit(2);
  }
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
