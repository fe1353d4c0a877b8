// llamacpp_oracle.mjs - llama.cpp (through node-llama-cpp, CPU build) as an
// outside oracle for the Llama family: loads a GGUF file and, for each
// prompt given as token ids, decodes greedily for N tokens, recording per step
// the chosen id, the top-2 probabilities and (for step 0) every token's log
// probability, so a test can compare with the numpy oracle and count
// near-ties. Nothing is tokenized and no BOS is added: the ids are fed as given.
//
//   node llamacpp_oracle.mjs --lib DIR --model F.gguf --prompt-ids P.json
//        --gen-len N --vocab V --out OUT.json [--kv f32|f16] [--threads 1]
//
// DIR: the folder scripts/fetch-llamacpp.sh prints (holding node_modules).
// --threads: 1 by default: the models are tiny, and ggml's threads meet at a
// barrier after every op, which on a loaded 2-core host made 2 threads 10x
// and 3 threads 75x slower than one (1.7 s for 16 prompts x 32 tokens).
// P.json: a JSON list of lists of ids. OUT.json: {"tokens": [[...]],
// "top2": [[[id1, p1, id2, p2] per step]], "logprobs0": [[V floats]]} where
// logprobs0[p][v] = log P(v) at the first step of prompt p (-Infinity where
// llama.cpp's float probability underflowed to 0).
//
// node-llama-cpp API used: getLlama({gpu: false, build: "never"}) (the
// prebuilt CPU binary, never a source build), llama.loadModel({modelPath,
// gpuLayers: 0}), model.createContext({contextSize, batchSize, sequences: 1,
// threads, flashAttention: false, experimentalKvCacheKeyType/ValueType}),
// context.getSequence(), sequence.controlledEvaluate(items) where the last
// item is [token, {generateNext: {token: true, probabilities: true, options:
// {temperature: 0}}}] (temperature 0 = llama.cpp's greedy sampler; the
// probabilities are the softmax of the raw logits over the whole vocabulary,
// sorted), and sequence.clearHistory() between prompts.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

function parseArgs(argv) {
  const a = { kv: "f32", threads: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (argv[i + 1] === undefined) throw new Error(`flag ${argv[i]} needs a value`);
    a[k] = argv[i + 1];
  }
  for (const k of ["lib", "model", "promptIds", "genLen", "vocab", "out"])
    if (a[k] === undefined) throw new Error(`missing --${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`);
  a.genLen = Number(a.genLen);
  a.threads = Number(a.threads);
  a.vocab = Number(a.vocab);
  return a;
}

// One greedy step's result from controlledEvaluate's output item.
function stepResult(item, wantAll) {
  const probs = item?.next?.probabilities;
  if (!probs || item.next.token == null) throw new Error("llama.cpp returned no next token");
  const it = probs.entries();
  const [id1, p1] = it.next().value;
  const second = it.next().value ?? [-1, 0];
  let all = null;
  if (wantAll) {
    all = new Map();
    for (const [id, p] of probs) all.set(id, Math.log(p));
  }
  return { token: item.next.token, top2: [id1, p1, second[0], second[1]], all };
}

async function decode(seq, prompt, genLen, vocab) {
  const next = { generateNext: { token: true, probabilities: true, options: { temperature: 0 } } };
  const tokens = [], top2 = [];
  let logprobs0 = null;
  let items = prompt.map((t, i) => (i === prompt.length - 1 ? [t, next] : t));
  for (let s = 0; s < genLen; s++) {
    const out = await seq.controlledEvaluate(items);
    const r = stepResult(out[items.length - 1], s === 0);
    if (s === 0) {
      logprobs0 = new Array(vocab).fill(-Infinity);
      for (const [id, lp] of r.all) logprobs0[id] = lp;
    }
    tokens.push(r.token);
    top2.push(r.top2);
    items = [[r.token, next]];
  }
  return { tokens, top2, logprobs0 };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const entry = join(a.lib, "node_modules", "node-llama-cpp", "dist", "index.js");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const prompts = JSON.parse(readFileSync(a.promptIds, "utf8"));
  let llama;
  try {
    llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  } catch (e) {   // no prebuilt binary loads on this machine: the caller skips
    console.log("skip: llama.cpp's CPU binary does not load here: " + (e?.message ?? e));
    process.exit(77);
  }
  const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
  const longest = Math.max(...prompts.map((p) => p.length));
  const kvType = a.kv.toUpperCase();
  const context = await model.createContext({
    contextSize: Math.max(64, longest + a.genLen + 8), batchSize: Math.max(32, longest),
    sequences: 1, threads: a.threads, flashAttention: false,
    experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType,
  });
  const seq = context.getSequence();
  const res = { tokens: [], top2: [], logprobs0: [] };
  for (const p of prompts) {
    await seq.clearHistory();
    const r = await decode(seq, p, a.genLen, a.vocab);
    res.tokens.push(r.tokens);
    res.top2.push(r.top2);
    res.logprobs0.push(r.logprobs0.map((x) => (Number.isFinite(x) ? x : -1e30)));
  }
  writeFileSync(a.out, JSON.stringify(res));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  console.log(`llamacpp_oracle: ${prompts.length} prompts x ${a.genLen} tokens (KV cache ${kvType})`);
}

main().catch((e) => {
  console.error("llamacpp_oracle: error: " + (e?.stack ?? e));
  process.exit(1);
});
