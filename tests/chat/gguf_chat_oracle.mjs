// gguf_chat_oracle.mjs - what a GGUF model's own chat template and
// tokenizer make of a file of conversations, from two outside libraries:
// node-llama-cpp (llama.cpp) reads the file's metadata and vocabulary, and
// @huggingface/jinja renders its tokenizer.chat_template.
//
//   node gguf_chat_oracle.mjs LIB JINJA_CJS MODEL.gguf CHATS.jsonl OUT.json
//
// LIB: the folder scripts/fetch-llamacpp.sh prints; JINJA_CJS: @huggingface/
// jinja's index.cjs (scripts/fetch-jinja-oracle.sh). Each conversation's
// "messages" is rendered with add_generation_prompt = true, bos_token and
// eos_token the texts of llama.cpp's BOS and EOS tokens, as Hugging Face's
// apply_chat_template does, and the text tokenized by llama.cpp with special
// tokens parsed and nothing added (model.tokenize(text, true):
// common_tokenize(add_special = false, parse_special = true); the template
// writes BOS where it wants one). node-llama-cpp does not expose llama.cpp's
// own llama_chat_apply_template, whose built-in formats are not the Jinja
// template anyway, so the rendering is @huggingface/jinja's.
// OUT.json: {"template": the file's tokenizer.chat_template as node-llama-
// cpp's GGUF reader read it, "bos", "eos", "prompts": [{"text", "ids"}]}.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [lib, jinjaPath, modelPath, chatsPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node gguf_chat_oracle.mjs LIB JINJA_CJS MODEL.gguf CHATS.jsonl OUT.json");
  process.exit(2);
}
const { Template } = createRequire(import.meta.url)(resolve(jinjaPath));
const main = join(lib, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(main).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, vocabOnly: true });
const template = model.fileInfo.metadata?.tokenizer?.chat_template;
if (typeof template !== "string") {
  console.error(`${modelPath}: no tokenizer.chat_template`);
  process.exit(1);
}
const bos = model.tokens.bosString ?? undefined, eos = model.tokens.eosString ?? undefined;
const tmpl = new Template(template);
const prompts = readFileSync(chatsPath, "utf8").split("\n").filter((l) => l.trim()).map((l) => {
  const text = tmpl.render({ messages: JSON.parse(l).messages, add_generation_prompt: true,
                             bos_token: bos, eos_token: eos });
  return { text, ids: model.tokenize(text, true) };
});
writeFileSync(outPath, JSON.stringify({ template, bos, eos, prompts }));
await model.dispose();
await llama.dispose();
