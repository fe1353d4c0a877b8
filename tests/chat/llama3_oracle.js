// llama3_oracle.js - what Hugging Face makes of a file of conversations for
// a model carrying Llama 3's tokenizer files, from two outside libraries:
// each conversation rendered with @huggingface/jinja from the model's
// tokenizer_config.json chat_template (add_generation_prompt, bos_token,
// eos_token), then encoded by @lenml/tokenizers without adding special
// tokens (the template wrote them), as apply_chat_template(tokenize=True)
// does; and each id list in DECODE.json decoded with special tokens skipped.
// Usage: node llama3_oracle.js JINJA_CJS TOKENIZERS_JS MODEL_DIR CHATS.jsonl DECODE.json OUT.json
// OUT.json: {"prompts": [{"text", "ids"}], "decoded": ["...", ...]}
'use strict';
const fs = require('fs');
const path = require('path');
if (process.argv.length !== 8) {
  console.error('usage: node llama3_oracle.js JINJA_CJS TOKENIZERS_JS MODEL_DIR CHATS.jsonl DECODE.json OUT.json');
  process.exit(2);
}
const [jinjaLib, tokLib, dir, chats, decode, out] = process.argv.slice(2);
const { Template } = require(path.resolve(jinjaLib));
const { TokenizerLoader } = require(path.resolve(tokLib));
const readJson = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const cfg = readJson('tokenizer_config.json');
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: readJson('tokenizer.json'), tokenizerConfig: cfg });
const special = (t) => (t && typeof t === 'object' ? t.content : t);
const tmpl = new Template(cfg.chat_template);
const prompts = fs.readFileSync(chats, 'utf8').split('\n').filter((l) => l.trim()).map((l) => {
  const text = tmpl.render({ messages: JSON.parse(l).messages, add_generation_prompt: true,
                             bos_token: special(cfg.bos_token), eos_token: special(cfg.eos_token) });
  return { text, ids: tok.encode(text, { add_special_tokens: false }) };
});
const decoded = JSON.parse(fs.readFileSync(decode, 'utf8')).map(
  (ids) => (ids.length ? tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }) : ''));
fs.writeFileSync(out, JSON.stringify({ prompts, decoded }));
