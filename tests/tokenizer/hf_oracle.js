// hf_oracle.js - the independent reference for the C tokenizer's
// tokenizer.json support: @lenml/tokenizers (a JavaScript port of Hugging
// Face's tokenizers, from transformers.js), as scripts/fetch-tokenizers.sh
// fetches it, loaded from the same tokenizer.json and tokenizer_config.json.
// Each document of a corpus (a JSON array of strings) is encoded as
// transformers does by default (special tokens in the text honoured, the
// post-processor's BOS/EOS added), and its ids decoded back (special tokens
// kept, no clean-up of spaces).
// Usage: node hf_oracle.js TOKENIZERS_JS MODEL_DIR CORPUS.json OUT.json
// OUT.json: [{"ids": [...], "text": "..."}, ...], one per document.
'use strict';
const fs = require('fs');
const path = require('path');
if (process.argv.length !== 6) {
  console.error('usage: node hf_oracle.js TOKENIZERS_JS MODEL_DIR CORPUS.json OUT.json');
  process.exit(2);
}
const [lib, dir, corpus, out] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(lib));
const readJson = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson('tokenizer.json'),
  tokenizerConfig: readJson('tokenizer_config.json'),
});
const docs = JSON.parse(fs.readFileSync(corpus, 'utf8'));
const res = docs.map((d) => {
  const ids = tok.encode(d, { add_special_tokens: true });
  const text = ids.length
    ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false })
    : '';
  return { ids, text };
});
fs.writeFileSync(out, JSON.stringify(res));
