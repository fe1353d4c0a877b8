// tokenizer_js_bench.js - the JavaScript side of bench/bench_tokenizer.sh:
// encodes every document of a corpus with gpt-3-encoder's encoder, RUNS times,
// each run on a freshly loaded module (so its word cache starts empty, as the
// C side's does), and prints MB/s per run as JSON. Loading is not timed.
// Usage: node tokenizer_js_bench.js GPT2_DIR CORPUS.json RUNS
'use strict';
const fs = require('fs');
const path = require('path');
const [dir, corpus, runsArg] = process.argv.slice(2);
const runs = parseInt(runsArg || '5', 10);
const docs = JSON.parse(fs.readFileSync(corpus, 'utf8'));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
const modPath = require.resolve(path.resolve(dir, 'Encoder.js'));
const mbps = [];
let tokens = 0;
for (let r = 0; r < runs; r++) {
  delete require.cache[modPath];
  const enc = require(modPath);
  tokens = 0;
  const t0 = process.hrtime.bigint();
  for (const d of docs) tokens += enc.encode(d).length;
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  mbps.push(bytes / 1e6 / s);
}
const sorted = [...mbps].sort((a, b) => a - b);
const median = runs % 2 ? sorted[(runs - 1) / 2] : (sorted[runs / 2 - 1] + sorted[runs / 2]) / 2;
console.log(JSON.stringify({ docs: docs.length, bytes, tokens, runs, node: process.version,
  mbps: mbps.map((x) => +x.toFixed(3)), median_mbps: +median.toFixed(3) }));
