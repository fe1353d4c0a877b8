// gguf_llamacpp_oracle.mjs - llama.cpp's own tokenizer (through
// node-llama-cpp's prebuilt CPU binary) as the oracle of the GGUF tokenizer
// (tokenizer/fg_tok_gguf.c): each vocabulary file is loaded with its tensors
// left out, and every document of a corpus (a JSON array of strings,
// gen_hf_corpus.py) is tokenized twice and its plain ids detokenized.
//
//   node gguf_llamacpp_oracle.mjs LIB CORPUS.json OUTDIR VOCAB.gguf...
//
// LIB: the folder scripts/fetch-llamacpp.sh prints (holding node_modules).
// OUTDIR/NAME.json (NAME: the vocabulary's file name without ".gguf"), one
// entry per document: {"plain": ids, "special": ids, "detok": text}.
//
// node-llama-cpp API used: getLlama({gpu: false, build: "never"}),
// llama.loadModel({modelPath, vocabOnly: true}), model.tokenize(text,
// specialTokens) and model.detokenize(tokens, false). tokenize calls
// llama.cpp's common_tokenize(vocab, text, add_special = false,
// parse_special = specialTokens) (node-llama-cpp's addon/AddonModel.cpp):
// no BOS or EOS is ever added, so the ids compare with fg_tok_encode_ex
// without FG_TOK_ADD_SPECIAL; "plain" is parse_special = false (a special
// token written in the text is text), "special" parse_special = true
// (FG_TOK_PARSE_SPECIAL). detokenize is llama_detokenize(remove_special =
// false, unparse_special = false): control tokens give no text, and an SPM
// vocabulary's leading space (the prefix encoding added) is taken off. An
// empty document is [] without asking llama.cpp (node-llama-cpp's own rule).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";

const [lib, corpusPath, outDir, ...vocabs] = process.argv.slice(2);
if (!lib || !corpusPath || !outDir || !vocabs.length) {
  console.error("usage: node gguf_llamacpp_oracle.mjs LIB CORPUS.json OUTDIR VOCAB.gguf...");
  process.exit(2);
}
const main = join(lib, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(main).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const docs = JSON.parse(readFileSync(corpusPath, "utf8"));
mkdirSync(outDir, { recursive: true });
for (const modelPath of vocabs) {
  const t0 = Date.now();
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  let tokens = 0;
  const res = docs.map((d) => {
    const plain = model.tokenize(d, false);
    const special = model.tokenize(d, true);
    tokens += plain.length;
    return { plain, special, detok: plain.length ? model.detokenize(plain, false) : "" };
  });
  const name = basename(modelPath).replace(/\.gguf$/, "");
  writeFileSync(join(outDir, name + ".json"), JSON.stringify(res));
  console.log(`llama.cpp ${name}: ${docs.length} documents, ${tokens} tokens, ${Date.now() - t0} ms`);
  await model.dispose();
}
await llama.dispose();
