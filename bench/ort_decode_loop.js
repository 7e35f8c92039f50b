#!/usr/bin/env node
// The decode loop of bench/decode_loop.py on ONNX Runtime, in process (onnxruntime-node,
// CPU execution provider): a decoder step (bench/decoder_step.py's inputs and outputs) run
// --steps times from an empty cache, each step's present_* outputs fed as the next step's
// past_* inputs and the next token the argmax of its logits (greedy decoding).
//
// Usage:
//   node bench/ort_decode_loop.js --modules DIR [--steps 32] [--threads T] [--token 1]
//       --past-shape BxHx0xD MODEL.onnx
// Prints one JSON object: steps_ms (each step's session.run, ms), median_ms, max_ms,
// tokens (the greedy tokens, the first one --token), threads.
// onnxruntime-node is loaded from --modules DIR (a node_modules folder:
// .cache/npm/node_modules after scripts/fetch-models.sh). Exits 2 on bad usage, 1 on any
// other error.
'use strict';

const path = require('path');

function usage(msg) {
  console.error(`ort_decode_loop: ${msg}\nusage: node ort_decode_loop.js --modules DIR [--steps N] ` +
                '[--threads T] [--token ID] --past-shape BxHx0xD MODEL.onnx');
  process.exit(2);
}

function parse(argv) {
  const a = { modules: null, steps: 32, threads: 0, token: 1, pastShape: null, model: null };
  for (let i = 0; i < argv.length; i++) {
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${argv[i]} needs a value`));
    switch (argv[i]) {
      case '--modules': a.modules = value(); break;
      case '--steps': a.steps = Number(value()); break;
      case '--threads': a.threads = Number(value()); break;
      case '--token': a.token = Number(value()); break;
      case '--past-shape': a.pastShape = value().split('x').map(Number); break;
      default:
        if (argv[i].startsWith('-') || a.model) usage(`unexpected argument ${argv[i]}`);
        a.model = argv[i];
    }
  }
  if (!a.model || !a.modules || !a.pastShape) usage('--modules, --past-shape and MODEL.onnx are required');
  if (!(Number.isInteger(a.steps) && a.steps >= 1 && a.steps <= 4096)) usage('--steps must be 1 to 4096');
  if (a.pastShape.length !== 4 || a.pastShape.some((d) => !Number.isInteger(d) || d < 0)) {
    usage('--past-shape must be four dims BxHxPxD');
  }
  return a;
}

async function main() {
  const a = parse(process.argv.slice(2));
  const ort = require(path.resolve(a.modules, 'onnxruntime-node'));
  const options = { executionProviders: ['cpu'], graphOptimizationLevel: 'all' };
  if (a.threads) options.intraOpNumThreads = a.threads;
  const session = await ort.InferenceSession.create(a.model, options);
  let feeds = {};
  for (const name of session.inputNames) {
    if (name.startsWith('past_')) feeds[name] = new ort.Tensor('float32', new Float32Array(0), a.pastShape);
  }
  let token = a.token;
  const tokens = [token], stepsMs = [];
  for (let step = 0; step < a.steps; step++) {
    feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from([BigInt(token)]), [1, 1]);
    const t = process.hrtime.bigint();
    const out = await session.run(feeds);
    stepsMs.push(Number(process.hrtime.bigint() - t) / 1e6);
    const logits = out.logits.data;
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
    token = best;
    tokens.push(token);
    const next = { };
    for (const name of session.outputNames) {
      if (name.startsWith('present_')) next['past_' + name.slice('present_'.length)] = out[name];
    }
    feeds = next;
  }
  const sorted = [...stepsMs].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  console.log(JSON.stringify({ steps_ms: stepsMs, median_ms: median, max_ms: sorted[sorted.length - 1],
                               tokens, threads: a.threads || null }));
}

main().catch((e) => { console.error(`ort_decode_loop: ${e.message}`); process.exit(1); });
