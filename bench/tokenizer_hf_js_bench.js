// tokenizer_hf_js_bench.js - the JavaScript side of bench/bench_tokenizer_hf.sh:
// encodes every document of a corpus with @lenml/tokenizers (loaded from the
// model directory's tokenizer.json and tokenizer_config.json), RUNS times,
// each run after emptying its BPE cache (as the C side starts each run with an
// empty word cache), special tokens in the text honoured and none added (as
// flexgen-tok-bench). Prints MB/s per run as JSON. Loading is not timed.
// Usage: node tokenizer_hf_js_bench.js TOKENIZERS_JS MODEL_DIR CORPUS.json RUNS
'use strict';
const fs = require('fs');
const path = require('path');
const [lib, dir, corpus, runsArg] = process.argv.slice(2);
const runs = parseInt(runsArg || '5', 10);
const { TokenizerLoader } = require(path.resolve(lib));
const readJson = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const t0 = process.hrtime.bigint();
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson('tokenizer.json'),
  tokenizerConfig: readJson('tokenizer_config.json'),
});
const loadS = Number(process.hrtime.bigint() - t0) / 1e9;
const docs = JSON.parse(fs.readFileSync(corpus, 'utf8'));
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);
const mbps = [];
let tokens = 0;
for (let r = 0; r < runs; r++) {
  if (tok.model.clear_cache) tok.model.clear_cache();
  tokens = 0;
  const t1 = process.hrtime.bigint();
  for (const d of docs) tokens += tok.encode(d, { add_special_tokens: false }).length;
  const s = Number(process.hrtime.bigint() - t1) / 1e9;
  mbps.push(bytes / 1e6 / s);
}
const sorted = [...mbps].sort((a, b) => a - b);
const median = runs % 2 ? sorted[(runs - 1) / 2] : (sorted[runs / 2 - 1] + sorted[runs / 2]) / 2;
console.log(JSON.stringify({ docs: docs.length, bytes, tokens, runs, node: process.version, load_s: +loadS.toFixed(3),
  mbps: mbps.map((x) => +x.toFixed(3)), median_mbps: +median.toFixed(3) }));
